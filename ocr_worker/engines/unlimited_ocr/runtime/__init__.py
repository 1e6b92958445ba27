"""The engine's runtime: page groups in, text out, through the scheduler, the sequences and the
bounded KV workspace (torch-free bookkeeping beside the engine that drives the card)."""
