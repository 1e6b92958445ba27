"""More queued jobs than queue_max_size: 429 with Retry-After, and no job recorded."""

from __future__ import annotations

import uuid

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from ocr_api.core.db import make_engine, make_session_factory
from ocr_api.core.models import Job
from ocr_api.core.storage import S3ObjectStore
from ocr_api.main import create_app
from tests.conftest import ServiceUrls, Stack, create_database, drop_database, fresh_redis_url
from tests.factories import sample_pages, scanned_pdf


def test_a_full_queue_answers_429_with_retry_after(stack: Stack, service_urls: ServiceUrls) -> None:
    tag = uuid.uuid4().hex[:10]
    database = create_database(service_urls.database_admin, tag)
    # Its own database and bucket, and a Redis database no worker reads: its job stays queued.
    settings = stack.settings.model_copy(
        update={
            "queue_max_size": 1,
            "database": stack.settings.database.model_copy(update={"url": database}),
            "redis": stack.settings.redis.model_copy(update={"url": fresh_redis_url(service_urls)}),
            "s3": stack.settings.s3.model_copy(update={"bucket": f"uocr-{tag}"}),
        }
    )
    sessions = make_session_factory(make_engine(settings.database))
    store = S3ObjectStore(settings.s3)
    store.ensure_bucket()
    try:
        tenant = Stack(settings, {}, sessions, store).new_tenant()
        pdf = scanned_pdf(sample_pages(1, lines=1))
        with TestClient(create_app(settings)) as client:
            auth = {"Authorization": f"Bearer {tenant.api_key}"}
            first = client.post("/v1/jobs", files={"file": ("a.pdf", pdf)}, headers=auth)
            second = client.post("/v1/jobs", files={"file": ("b.pdf", pdf)}, headers=auth)
        assert first.status_code == 202
        assert second.status_code == 429
        assert int(second.headers["Retry-After"]) > 0
        assert "queue is full" in second.json()["detail"]
        with sessions() as session:
            assert session.scalar(select(func.count()).select_from(Job)) == 1
    finally:
        sessions.kw["bind"].dispose()
        drop_database(service_urls.database_admin, tag)
