"""UocrClient: every route of the API as a typed method, with the retries a batch client needs
(a full queue or a dependency outage is waited out, as Retry-After says)."""

from __future__ import annotations

import json
import mimetypes
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import httpx

from uocr_client.errors import ApiError
from uocr_core.contracts import PageResult
from uocr_core.schemas.batches import BatchAdded, BatchPublic
from uocr_core.schemas.jobs import (
    JobAccepted,
    JobList,
    JobPublic,
    JobSummary,
    ResultLink,
    ReviewList,
    ReviewPagePublic,
)
from uocr_core.schemas.search import SearchHit, SearchResults
from uocr_core.schemas.uploads import UploadTarget

TERMINAL = ("succeeded", "failed", "canceled")
# A cursor-paged answer: the job list, the review list, search results.
Paged = TypeVar("Paged", JobList, ReviewList, SearchResults)
_RETRYABLE = (429, 502, 503, 504)
_CONTENT_TYPES = {".pdf": "application/pdf", ".tif": "image/tiff", ".tiff": "image/tiff"}


class UocrClient:
    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 60,
        retries: int = 8,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.retries = retries
        self.http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=timeout,
            transport=transport,
        )

    @classmethod
    def from_env(cls, **kwargs: Any) -> UocrClient:
        """``UOCR_URL`` (default http://localhost:8100) and ``UOCR_API_KEY``."""
        api_key = os.environ.get("UOCR_API_KEY")
        if not api_key:
            raise ValueError("UOCR_API_KEY is not set: create one with `uocr keys create`")
        return cls(os.environ.get("UOCR_URL", "http://localhost:8100"), api_key, **kwargs)

    def __enter__(self) -> UocrClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    # Jobs ------------------------------------------------------------------------------------

    def submit_file(
        self, path: Path | str, *, idempotency_key: str | None = None, **options: Any
    ) -> JobAccepted:
        """Upload one document through the API (up to ``max_upload_bytes``)."""
        path = Path(path)
        files = {"file": (path.name, path.read_bytes(), content_type_of(path))}
        response = self._send(
            "POST",
            "/v1/jobs",
            files=files,
            data=_form(options),
            headers=_key_header(idempotency_key),
        )
        return JobAccepted.model_validate(response.json())

    def submit_object(
        self, object_key: str, *, idempotency_key: str | None = None, **options: Any
    ) -> JobAccepted:
        """Submit a document already in the tenant's inbox (see :meth:`upload`)."""
        response = self._send(
            "POST",
            "/v1/jobs",
            json={"object_key": object_key, **_json_options(options)},
            headers=_key_header(idempotency_key),
        )
        return JobAccepted.model_validate(response.json())

    def upload(self, path: Path | str) -> str:
        """Send a document straight to object storage; returns its object key."""
        path = Path(path)
        kind = content_type_of(path)
        target = UploadTarget.model_validate(
            self._send(
                "POST",
                "/v1/uploads",
                json={"filename": path.name, "content_type": kind, "size": path.stat().st_size},
            ).json()
        )
        with path.open("rb") as body:
            put = httpx.put(
                target.upload_url, content=body, headers=target.headers, timeout=self.http.timeout
            )
        if put.status_code >= 300:
            raise ApiError(put.status_code, "upload-refused", put.text[:300], "", None)
        return target.object_key

    def job(self, job_id: str, *, pages: str | None = None) -> JobPublic:
        """The job's status; ``pages``: which pages it lists ("all", "none", "301-600"; by
        default all of a short document, none of a long one: follow ``pages_next``)."""
        params = {"pages": pages} if pages else None
        return JobPublic.model_validate(
            self._send("GET", f"/v1/jobs/{job_id}", params=params).json()
        )

    def jobs(self, *, status: str | None = None, page_size: int = 100) -> Iterator[JobSummary]:
        """Every job of the tenant, newest first, following the cursor."""
        params = {"limit": page_size, "status": status or None}
        for page in self._pages("/v1/jobs", JobList, params):
            yield from page.jobs

    def wait(
        self,
        job_id: str,
        *,
        timeout: float | None = None,
        poll_seconds: float = 1.0,
        on_progress: Callable[[JobPublic], None] | None = None,
    ) -> JobPublic:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if on_progress:
                on_progress(job)
            if job.status in TERMINAL:
                return job
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} is still {job.status} after {timeout} s")
            time.sleep(poll_seconds)

    def result(self, job_id: str, format: str = "json") -> bytes:
        return self._send("GET", f"/v1/jobs/{job_id}/result", params={"format": format}).content

    def result_link(self, job_id: str, format: str = "json") -> ResultLink:
        response = self._send("GET", f"/v1/jobs/{job_id}/result/link", params={"format": format})
        return ResultLink.model_validate(response.json())

    def page(self, job_id: str, page_no: int) -> PageResult:
        return PageResult.model_validate(
            self._send("GET", f"/v1/jobs/{job_id}/pages/{page_no}").json()
        )

    def cancel(self, job_id: str) -> JobPublic:
        return JobPublic.model_validate(self._send("POST", f"/v1/jobs/{job_id}/cancel").json())

    def delete(self, job_id: str) -> None:
        self._send("DELETE", f"/v1/jobs/{job_id}")

    # Batches ---------------------------------------------------------------------------------

    def create_batch(self, *, idempotency_key: str | None = None, **body: Any) -> BatchPublic:
        response = self._send(
            "POST", "/v1/batches", json=_json_options(body), headers=_key_header(idempotency_key)
        )
        return BatchPublic.model_validate(response.json())

    def add_documents(self, batch_id: str, documents: list[dict[str, str]]) -> BatchAdded:
        response = self._send(
            "POST", f"/v1/batches/{batch_id}/documents", json={"documents": documents}
        )
        return BatchAdded.model_validate(response.json())

    def close_batch(self, batch_id: str) -> BatchPublic:
        response = self._send("POST", f"/v1/batches/{batch_id}/close")
        return BatchPublic.model_validate(response.json())

    def cancel_batch(self, batch_id: str) -> BatchPublic:
        response = self._send("POST", f"/v1/batches/{batch_id}/cancel")
        return BatchPublic.model_validate(response.json())

    def batch(self, batch_id: str) -> BatchPublic:
        return BatchPublic.model_validate(self._send("GET", f"/v1/batches/{batch_id}").json())

    def batch_jobs(self, batch_id: str, *, page_size: int = 1000) -> Iterator[JobSummary]:
        for page in self._pages(f"/v1/batches/{batch_id}/jobs", JobList, {"limit": page_size}):
            yield from page.jobs

    def review(
        self, *, batch_id: str | None = None, page_size: int = 500
    ) -> Iterator[ReviewPagePublic]:
        """The tenant's pages to review (a batch's only, if named), oldest first."""
        params = {"limit": page_size, "batch_id": batch_id}
        for page in self._pages("/v1/review", ReviewList, params):
            yield from page.pages

    def search(
        self,
        q: str,
        *,
        batch_id: str | None = None,
        job_id: str | None = None,
        page_size: int = 100,
    ) -> Iterator[SearchHit]:
        """The tenant's read pages matching ``q``, best first, each with its boxes."""
        params = {"q": q, "limit": page_size, "batch_id": batch_id, "job_id": job_id}
        for page in self._pages("/v1/search", SearchResults, params):
            yield from page.hits

    def mark_reviewed(self, job_id: str, page_no: int) -> dict[str, Any]:
        answer = self._send("POST", f"/v1/jobs/{job_id}/pages/{page_no}/reviewed")
        return answer.json()  # type: ignore[no-any-return]

    def batch_manifest(self, batch_id: str) -> list[dict[str, Any]]:
        text = self._send("GET", f"/v1/batches/{batch_id}/manifest").text
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    # Transport -------------------------------------------------------------------------------

    def _pages(self, url: str, model: type[Paged], params: dict[str, Any]) -> Iterator[Paged]:
        """Each page of a cursor-paged listing, following ``next_cursor`` to the end (the
        parameters left None are not sent)."""
        params = {name: value for name, value in params.items() if value is not None}
        while True:
            page = model.model_validate(self._send("GET", url, params=params).json())
            yield page
            if page.next_cursor is None:
                return
            params["cursor"] = page.next_cursor

    def _send(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """One request; 429/5xx-with-Retry-After and lost connections are retried (every
        request here is safe to repeat: reads, or writes carrying an idempotency key)."""
        for attempt in range(self.retries + 1):
            try:
                response = self.http.request(method, url, **kwargs)
            except httpx.TransportError:
                if attempt == self.retries:
                    raise
                time.sleep(min(2**attempt, 30))
                continue
            if response.status_code in _RETRYABLE and attempt < self.retries:
                time.sleep(_retry_after(response, attempt))
                continue
            if response.status_code >= 400:
                raise ApiError.from_response(response)
            return response
        raise AssertionError("unreachable")


def content_type_of(path: Path) -> str:
    suffix = path.suffix.lower()
    return _CONTENT_TYPES.get(suffix) or mimetypes.guess_type(path.name)[0] or "application/pdf"


def _retry_after(response: httpx.Response, attempt: int) -> float:
    try:
        return min(float(response.headers.get("retry-after", "")), 60.0)
    except ValueError:
        return float(min(2**attempt, 30))


def _key_header(key: str | None) -> dict[str, str]:
    return {"Idempotency-Key": key} if key else {}


def _json_options(options: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in options.items() if value is not None}


def _form(options: dict[str, Any]) -> dict[str, str]:
    form = {}
    for name, value in _json_options(options).items():
        form[name] = json.dumps(value) if isinstance(value, dict) else str(value)
    return form
