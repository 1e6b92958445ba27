"""The ground floor both sides run, free of HTTP and of torch: settings, the database and its
models, object storage and its keys, the task contracts and dispatch, tenants and keys, audit,
model versions, the job lifecycle, admission, and the services of jobs, batches and webhooks.

``ocr_api`` (HTTP), ``ocr_worker`` (compute), ``uocr_cli`` and ``uocr_client`` import it; it
imports none of them, nor FastAPI or Starlette (tests/test_layering.py).
"""
