"""Accuracy on real documents: public manuals from Debian packages, "scanned" the way a real
scanner degrades a page, read by uocr and by bare RapidOCR, and scored against their own text
layers (see bench/accuracy_bench.py and tests/accuracy/)."""
