"""Service benches: the whole stack on CPU and GPU, recovery, backlog, render, store, memory."""
