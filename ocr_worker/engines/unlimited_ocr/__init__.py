"""The GPU engine: Unlimited-OCR decoded page group by page group with our own KV workspace.

Torch-free bookkeeping (manifest, kv_workspace, scheduler, page_guard, det_parser) lives beside
the torch modules (checkpoint, model_runner, engine) so its tests run in milliseconds.
"""
