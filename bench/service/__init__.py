"""Benches of the service around the engines: the whole stack against the bare engine (GPU and
CPU), recovery from faults, backlogs, rendering, storage, the searchable PDF and the worker
process's memory and GIL."""
