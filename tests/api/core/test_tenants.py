"""API keys: shown once, stored hashed, listed by prefix, revoked by prefix."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from ocr_api.core.db import make_engine, make_session_factory, transaction
from ocr_api.core.errors import NotFound
from ocr_api.core.migrate import upgrade
from ocr_api.core.models import ApiKey
from ocr_api.core.settings import DatabaseSettings
from ocr_api.core.tenants import create_key, list_keys, revoke_key, tenant_for_key


@pytest.fixture
def sessions(tmp_path: Path) -> sessionmaker[Session]:
    url = f"sqlite:///{tmp_path / 'keys.db'}"
    upgrade(url)
    return make_session_factory(make_engine(DatabaseSettings(url=url)))


def test_a_key_is_stored_only_as_its_hash(sessions: sessionmaker[Session]) -> None:
    with transaction(sessions) as session:
        created = create_key(session, tenant_name="archive")
    with sessions() as session:
        stored = session.scalars(select(ApiKey)).one()
        assert created.api_key not in (stored.key_hash, stored.prefix)
        assert created.api_key.startswith(stored.prefix)
        tenant = tenant_for_key(session, created.api_key)
        assert tenant is not None and tenant.name == "archive"


def test_a_revoked_key_stops_working_and_the_tenants_other_keys_do_not(
    sessions: sessionmaker[Session],
) -> None:
    with transaction(sessions) as session:
        old = create_key(session, tenant_name="archive")
        new = create_key(session, tenant_name="archive")
        create_key(session, tenant_name="library")
    with transaction(sessions) as session:
        revoked = revoke_key(session, old.api_key[:12])
    assert revoked.tenant_name == "archive" and revoked.revoked_at is not None
    with sessions() as session:
        assert tenant_for_key(session, old.api_key) is None
        assert tenant_for_key(session, new.api_key) is not None
        listed = list_keys(session, tenant_name="archive")
    assert [(k.prefix, k.revoked_at is not None) for k in listed] == [
        (old.api_key[:12], True),
        (new.api_key[:12], False),
    ]


@pytest.mark.parametrize("prefix", ["uocr_", "uocr_zzzzzzz", "x"])
def test_revoking_needs_a_prefix_that_names_one_key(
    sessions: sessionmaker[Session], prefix: str
) -> None:
    with transaction(sessions) as session:
        create_key(session, tenant_name="archive")
        create_key(session, tenant_name="archive")
    with transaction(sessions) as session, pytest.raises(NotFound, match="first 12 characters"):
        revoke_key(session, prefix)
