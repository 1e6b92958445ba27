"""The Triton kernels the step runs (they also run on the CPU in Triton's interpreter, for the
tests), and ``tuning.py``: every kernel's tiles and plans, one table a card."""
