"""Accuracy against labelled documents: CER scoring, the labelled-set format, a model version's
run over a set, and the gate comparing two versions (``uocr eval``)."""
