"""The ``uocr`` command: the one place that wires the packages together.

``uocr_core``, ``ocr_api`` and ``ocr_worker`` never import this package. It imports the core
and the worker, each command only what it runs (``uocr --help`` loads neither torch nor
FastAPI), and starts the API by its app factory's name (``ocr_api.main:create_app``).
"""
