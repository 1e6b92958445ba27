"""The servers check what they need before starting: a database at head, credentials for
Flower."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from tests.cli.conftest import UNREACHABLE, uocr
from tests.conftest import ServiceUrls, create_database, drop_database


@pytest.fixture
def empty_database(service_urls: ServiceUrls) -> Iterator[str]:
    """A database on the test server that was never migrated."""
    tag = f"empty_{uuid.uuid4().hex[:8]}"
    admin = create_engine(service_urls.database_admin, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE uocr_{tag}"))
    admin.dispose()
    yield service_urls.database_admin.rsplit("/", 1)[0] + f"/uocr_{tag}"
    drop_database(service_urls.database_admin, tag)


def test_api_refuses_a_database_not_migrated(empty_database: str) -> None:
    done = uocr("api", env={"UOCR_DATABASE__URL": empty_database})
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: the database at ")
    assert "(UOCR_DATABASE__URL) is at revision none" in line
    assert line.endswith("run `uocr db upgrade`")


def test_worker_refuses_a_database_not_migrated(
    empty_database: str, service_urls: ServiceUrls
) -> None:
    env = {"UOCR_DATABASE__URL": empty_database, "UOCR_REDIS__URL": f"{service_urls.redis}/0"}
    done = uocr("worker", env=env)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].endswith("run `uocr db upgrade`")


def test_db_upgrade_brings_it_to_head_and_keys_then_work(service_urls: ServiceUrls) -> None:
    tag = f"cli_{uuid.uuid4().hex[:8]}"
    url = create_database(service_urls.database_admin, tag)
    try:
        env = {"UOCR_DATABASE__URL": url}
        assert uocr("db", "upgrade", env=env).stdout.strip() == "database at head"
        created = uocr("keys", "create", "--tenant", "acme", env=env)
        assert created.returncode == 0, created.stderr
        listed = uocr("keys", "list", env=env)
        assert "acme" in listed.stdout and "active" in listed.stdout
    finally:
        drop_database(service_urls.database_admin, tag)


def test_flower_needs_credentials_unless_run_open() -> None:
    done = uocr("flower", env=UNREACHABLE)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: Flower needs credentials: set FLOWER_BASIC_AUTH=user:password (or --basic-auth "
        "user:password), or run it open with --unauthenticated"
    ]


@pytest.mark.parametrize("credentials", ["admin", "admin:", ":secret"])
def test_flower_refuses_credentials_without_a_user_and_a_password(credentials: str) -> None:
    done = uocr("flower", env={**UNREACHABLE, "FLOWER_BASIC_AUTH": credentials})
    assert done.returncode == 1
    assert done.stderr.strip() == "error: --basic-auth (FLOWER_BASIC_AUTH) takes user:password"


def test_api_refuses_a_search_language_postgres_does_not_have(service_urls: ServiceUrls) -> None:
    """A misspelt language would fail every page's recording: refused at start, naming it and
    the ones there are."""
    tag = f"cli_{uuid.uuid4().hex[:8]}"
    url = create_database(service_urls.database_admin, tag)
    try:
        done = uocr("api", env={"UOCR_DATABASE__URL": url, "UOCR_SEARCH__LANGUAGE": "englsh"})
        assert done.returncode == 1
        (line,) = done.stderr.strip().splitlines()
        assert "search.language 'englsh' (UOCR_SEARCH__LANGUAGE)" in line
        assert "english" in line and "simple" in line
    finally:
        drop_database(service_urls.database_admin, tag)
