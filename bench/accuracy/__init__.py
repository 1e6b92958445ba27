"""Benches of what uocr reads right: public manuals from Debian packages, "scanned" the way a real
scanner degrades a page, read by uocr and by bare RapidOCR, and scored against their own text
layers (accuracy_bench.py, orientation_bench.py; the set: corpus.py, scan.py, runner.py; the
regression set for ``uocr eval``: eval_set.py; tests/accuracy/)."""
