"""Shared fixtures: the services .ci/run starts (Postgres, Redis, S3), each test session on its
own fresh database, bucket and Redis database, so runs never see each other's data."""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session, sessionmaker

from uocr_core.db import make_engine, make_session_factory, transaction
from uocr_core.migrate import upgrade
from uocr_core.settings import Settings, load_settings
from uocr_core.storage import S3ObjectStore
from uocr_core.tenants import CreatedKey, create_key

# Without a GPU our Triton kernels run in Triton's interpreter (test_triton_kernels.py). The
# switch is read when triton is first imported, and torch or transformers may import it before
# that module does: so it is set here, before any test module is collected.
if shutil.which("nvidia-smi") is None:
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """GPU tests run where CUDA is (the device machine); CI has none and skips them."""
    if any("gpu" in item.keywords for item in items):
        import torch

        if not torch.cuda.is_available():
            skip = pytest.mark.skip(reason="needs a CUDA GPU")
            for item in items:
                if "gpu" in item.keywords:
                    item.add_marker(skip)


@dataclass(frozen=True)
class ServiceUrls:
    database_admin: str
    redis: str
    s3: str


@pytest.fixture(scope="session")
def service_urls() -> ServiceUrls:
    names = ("UOCR_TEST_DATABASE_URL", "UOCR_TEST_REDIS_URL", "UOCR_TEST_S3_URL")
    values = [os.environ.get(name) for name in names]
    if not all(values):
        message = "Postgres, Redis and S3 are not running: use `bash .ci/run`"
        if os.environ.get("UOCR_REQUIRE_SERVICES"):
            pytest.fail(message)
        pytest.skip(message)
    return ServiceUrls(*values)  # type: ignore[arg-type]


_redis_databases = itertools.count(1)  # 0 is left to whoever runs Redis by hand


def fresh_redis_url(service_urls: ServiceUrls) -> str:
    """A Redis database no other deployment in this test session uses. Workers of different
    deployments live at once (the session's stack outlives a test's own workers), and one on a
    shared database would take the other's page-group tasks, find no such job and drop them."""
    index = next(_redis_databases)
    available = _redis_database_count(service_urls.redis)
    if index >= available:
        raise RuntimeError(
            f"Redis has {available} databases: too many deployments in one test session "
            "(.ci/services starts it with 256)"
        )
    return f"{service_urls.redis}/{index}"


@functools.cache
def _redis_database_count(url: str) -> int:
    import redis

    return int(str(redis.Redis.from_url(url).config_get("databases")["databases"]))


@dataclass
class Stack:
    """One isolated deployment's configuration on the shared servers."""

    settings: Settings
    env: dict[str, str]  # the same settings, as environment for subprocesses
    sessions: sessionmaker[Session]
    store: S3ObjectStore

    def new_tenant(self, name: str | None = None) -> CreatedKey:
        with transaction(self.sessions) as session:
            return create_key(session, tenant_name=name or f"tenant-{uuid.uuid4().hex[:8]}")


TEST_SETTINGS_ENV = {
    "UOCR_PAGE_GROUP_SIZE": "3",
    "UOCR_PAGE_GROUP_OVERLAP": "1",
    "UOCR_MAX_PAGES_PER_REQUEST": "20",
    "UOCR_MAX_UPLOAD_BYTES": str(3 * 1024 * 1024),
    "UOCR_QUEUE_MAX_SIZE": "64",
    "UOCR_LONG_DOCUMENT_PAGES": "10",  # tests/e2e/test_batches.py: the long pool
    "UOCR_WORKER__LEASE_SECONDS": "6",
    "UOCR_WORKER__MAX_GROUP_ATTEMPTS": "3",
    "UOCR_WORKER__RENDER_DPI": "150",
    "UOCR_WEBHOOKS__ALLOWED_PRIVATE_HOSTS": '["127.0.0.1"]',
    "UOCR_WEBHOOKS__BACKOFF_BASE_SECONDS": "0.5",
    "UOCR_WEBHOOKS__MAX_ATTEMPTS": "4",
    "UOCR_WEBHOOKS__TIMEOUT_SECONDS": "3",
}


def create_database(admin_url: str, tag: str) -> str:
    """A new, migrated database on the test server; returns its URL."""
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE uocr_{tag}"))
    admin.dispose()
    url = admin_url.rsplit("/", 1)[0] + f"/uocr_{tag}"
    upgrade(url)
    return url


def drop_database(admin_url: str, tag: str) -> None:
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS uocr_{tag} WITH (FORCE)"))
    admin.dispose()


@pytest.fixture(scope="session")
def stack(service_urls: ServiceUrls) -> Iterator[Stack]:
    tag = uuid.uuid4().hex[:10]
    db_url = create_database(service_urls.database_admin, tag)
    env = {
        **TEST_SETTINGS_ENV,
        "UOCR_DATABASE__URL": db_url,
        "UOCR_REDIS__URL": fresh_redis_url(service_urls),
        "UOCR_S3__ENDPOINT_URL": service_urls.s3,
        "UOCR_S3__BUCKET": f"uocr-{tag}",
        "UOCR_LOG_LEVEL": "info",
    }
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    settings = load_settings()
    store = S3ObjectStore(settings.s3)
    store.ensure_bucket()
    engine = make_engine(settings.database)
    yield Stack(settings, env, make_session_factory(engine), store)
    engine.dispose()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    drop_database(service_urls.database_admin, tag)


@contextmanager
def deployment_without_workers(
    stack: Stack, service_urls: ServiceUrls, **updates: object
) -> Iterator[Stack]:
    """The stack's settings (with ``updates``) on a database, bucket and Redis database of its
    own that no worker reads (every job submitted there stays queued) unless the test starts one
    with the returned stack's ``env``."""
    tag = uuid.uuid4().hex[:10]
    database, redis, bucket = (
        create_database(service_urls.database_admin, tag),
        fresh_redis_url(service_urls),
        f"uocr-{tag}",
    )
    settings = stack.settings.model_copy(
        update={
            **updates,
            "database": stack.settings.database.model_copy(update={"url": database}),
            "redis": stack.settings.redis.model_copy(update={"url": redis}),
            "s3": stack.settings.s3.model_copy(update={"bucket": bucket}),
        }
    )
    env = {
        **stack.env,
        "UOCR_DATABASE__URL": database,
        "UOCR_REDIS__URL": redis,
        "UOCR_S3__BUCKET": bucket,
        **{f"UOCR_{name.upper()}": str(value) for name, value in updates.items()},
    }
    sessions = make_session_factory(make_engine(settings.database))
    store = S3ObjectStore(settings.s3)
    store.ensure_bucket()
    try:
        yield Stack(settings, env, sessions, store)
    finally:
        sessions.kw["bind"].dispose()
        drop_database(service_urls.database_admin, tag)
