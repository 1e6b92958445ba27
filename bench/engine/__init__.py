"""GPU engine benches: kernels, decode steps, runs of documents, memory; setup.py builds them."""
