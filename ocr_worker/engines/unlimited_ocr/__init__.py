"""The GPU engine: Unlimited-OCR decoded page group by page group with our own KV workspace.

- ``model/``: the checkpoint, its manifest, page preprocessing and SAM's attention.
- ``runtime/``: the engine, its decode loop and scheduler, kept boundary pages and the vision
  tower's batcher.
- ``workspace/``: the bookkeeping of the bounded KV workspace and of the sequences holding its
  blocks, torch-free, so its tests run in milliseconds.
- ``step/``: one decode step or prefill pass on the card: the model runner, the fused step and
  MLP, the prefill's parts, CUDA graphs, step inputs, sampling and the decode rules (R-SWA,
  SR-SWA).
- ``kernels/``: the Triton kernels (decode and prefill attention, MoE, routing, choice, norms
  and RoPE), and ``tuning.py``: each card's tiles and plans in one table.
- ``output/``: what the model wrote, read back: the page guard, sections, det blocks.
"""
