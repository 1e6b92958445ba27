"""A Python client for the uocr HTTP API (httpx, typed): what the CLI and the tests use.

from uocr_client import UocrClient
with UocrClient.from_env() as client:          # UOCR_URL, UOCR_API_KEY
    job = client.submit_file("scan.pdf", priority="interactive")
    done = client.wait(job.id)
    markdown = client.result(job.id, "markdown")
"""

from uocr_client.client import UocrClient
from uocr_client.errors import ApiError
from uocr_client.keys import content_key

__all__ = ["ApiError", "UocrClient", "content_key"]
