"""Benches of the GPU engine: its kernels (attention, MoE, a prefill pass's launches), whole decode
steps and runs of documents against transformers' ``generate``, its memory, and the per-card
picks of tiles and plans; setup.py builds the model and the engine they share."""
