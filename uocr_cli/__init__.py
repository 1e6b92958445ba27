"""The ``uocr`` command: the one place that wires the API and the workers together.

``ocr_api`` and ``ocr_worker`` never import this package; it imports both, each command only
what it runs (the API never loads torch, ``uocr --help`` loads neither).
"""
