"""API keys: shown once, stored hashed, listed by prefix, revoked and rotated by prefix,
refused once expired; every change in the audit log."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from uocr_core import audit
from uocr_core.db import make_engine, make_session_factory, transaction, utcnow
from uocr_core.errors import Conflict, KeyExpired, NotFound, Unauthorized
from uocr_core.migrate import upgrade
from uocr_core.models import ApiKey
from uocr_core.settings import DatabaseSettings
from uocr_core.tenants import authenticate, create_key, list_keys, revoke_key, rotate_key


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
        holder = authenticate(session, created.api_key)
        assert holder.tenant.name == "archive" and holder.key_prefix == stored.prefix


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
        with pytest.raises(Unauthorized, match="invalid or revoked"):
            authenticate(session, old.api_key)
        assert authenticate(session, new.api_key).tenant.name == "archive"
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


def test_a_key_past_its_expiry_is_refused_as_expired_not_invalid(
    sessions: sessionmaker[Session],
) -> None:
    with transaction(sessions) as session:
        created = create_key(session, tenant_name="archive", expires_in=timedelta(days=90))
    assert created.expires_at is not None
    assert timedelta(days=89) < created.expires_at - utcnow() <= timedelta(days=90)
    with sessions() as session:
        assert authenticate(session, created.api_key).tenant.name == "archive"
    _expire(sessions, created.prefix)
    with sessions() as session, pytest.raises(KeyExpired, match=f"API key {created.prefix} exp"):
        authenticate(session, created.api_key)
    with sessions() as session, pytest.raises(Unauthorized, match="invalid or revoked"):
        authenticate(session, created.api_key + "x")  # a typo is not "expired"


def test_rotation_keeps_the_old_key_for_the_overlap_and_the_successor_after(
    sessions: sessionmaker[Session],
) -> None:
    with transaction(sessions) as session:
        old = create_key(session, tenant_name="archive", expires_in=timedelta(days=90))
    with transaction(sessions) as session:
        rotation = rotate_key(session, old.prefix, overlap=timedelta(days=7))
    new = rotation.new
    assert new.tenant_id == old.tenant_id and new.api_key != old.api_key
    assert rotation.old.expires_at is not None and new.expires_at is not None
    assert timedelta(days=6) < rotation.old.expires_at - utcnow() <= timedelta(days=7)
    assert new.expires_at - utcnow() > timedelta(days=89)  # the old key's lifetime again
    with sessions() as session:
        assert authenticate(session, old.api_key).tenant.id == old.tenant_id
        assert authenticate(session, new.api_key).tenant.id == old.tenant_id
    _expire(sessions, old.prefix)
    with sessions() as session:
        with pytest.raises(KeyExpired):
            authenticate(session, old.api_key)
        assert authenticate(session, new.api_key).key_prefix == new.prefix


def test_rotation_never_lengthens_a_keys_life_and_refuses_a_revoked_key(
    sessions: sessionmaker[Session],
) -> None:
    with transaction(sessions) as session:
        short = create_key(session, tenant_name="archive", expires_in=timedelta(hours=1))
        forever = create_key(session, tenant_name="library")
    with transaction(sessions) as session:
        rotated = rotate_key(session, short.prefix, overlap=timedelta(days=7))
        endless = rotate_key(session, forever.prefix, overlap=timedelta(days=7))
    assert short.expires_at is not None
    assert rotated.old.expires_at == short.expires_at  # an hour, not a week
    assert endless.new.expires_at is None  # a key that never expired begets one that never does
    with transaction(sessions) as session:
        revoke_key(session, forever.prefix)
    with transaction(sessions) as session, pytest.raises(Conflict, match="is revoked"):
        rotate_key(session, forever.prefix, overlap=timedelta(days=1))


def test_key_operations_are_in_the_audit_log_with_the_tenant_and_the_key(
    sessions: sessionmaker[Session],
) -> None:
    with transaction(sessions) as session:
        old = create_key(session, tenant_name="archive")
    with transaction(sessions) as session:
        new = rotate_key(session, old.prefix, overlap=timedelta(days=7)).new
    with transaction(sessions) as session:
        revoke_key(session, old.prefix)
        revoke_key(session, old.prefix)  # already revoked: nothing happened, nothing logged
    with sessions() as session:
        logged = audit.events(session, audit.AuditFilter(tenant_id=old.tenant_id))
    assert [(e.actor, e.action, e.target) for e in logged] == [
        ("operator", "key.created", old.prefix),
        ("operator", "key.rotated", old.prefix),
        ("operator", "key.revoked", old.prefix),
    ]
    assert logged[1].detail["successor"] == new.prefix
    assert old.api_key not in str([e.detail for e in logged])  # never the key itself


def _expire(sessions: sessionmaker[Session], prefix: str) -> None:
    """The clock moved past the key's expiry (set in the database, as time would)."""
    with transaction(sessions) as session:
        key = session.scalars(select(ApiKey).where(ApiKey.prefix == prefix)).one()
        key.expires_at = utcnow() - timedelta(seconds=1)
