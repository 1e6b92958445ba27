"""Accuracy benches: real manuals "scanned", read by uocr and bare RapidOCR, scored by CER."""
