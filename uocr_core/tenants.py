"""Tenants and their API keys. A key is shown once and stored only as its SHA-256 hash.

A key may carry an expiry. Rotating a key issues its successor and moves the old key's expiry
to the end of an overlap, so clients switch over without a moment where neither works. Every
change here is written to the audit log in the same transaction.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from uocr_core import audit
from uocr_core.db import utcnow
from uocr_core.errors import Conflict, KeyExpired, NotFound, Unauthorized
from uocr_core.models import ApiKey, Tenant

KEY_PREFIX = "uocr_"
PREFIX_LENGTH = 12  # a key's first characters: enough to name it, useless to use it


@dataclass(frozen=True)
class CreatedKey:
    tenant_id: str
    tenant_name: str
    api_key: str
    webhook_secret: str
    expires_at: datetime | None = None

    @property
    def prefix(self) -> str:
        return self.api_key[:PREFIX_LENGTH]


@dataclass(frozen=True)
class KeyInfo:
    prefix: str
    tenant_name: str
    created_at: datetime
    revoked_at: datetime | None
    expires_at: datetime | None = None


@dataclass(frozen=True)
class KeyHolder:
    """Who presented a valid key: the tenant, and which of its keys (for the audit log)."""

    tenant: Tenant
    key_prefix: str


@dataclass(frozen=True)
class Rotation:
    new: CreatedKey
    old: KeyInfo  # its expires_at is when it stops working


def hash_key(api_key: str) -> str:
    # Keys are 256 random bits, so a fast hash is enough: there is nothing to brute-force.
    return hashlib.sha256(api_key.encode()).hexdigest()


def create_key(
    session: Session,
    *,
    tenant_name: str,
    expires_in: timedelta | None = None,
    actor: audit.Actor = audit.OPERATOR,
) -> CreatedKey:
    """A new key for the tenant (created if new); without ``expires_in`` it never expires."""
    tenant = session.scalar(select(Tenant).where(Tenant.name == tenant_name))
    if tenant is None:
        tenant = Tenant(name=tenant_name, webhook_secret="whsec_" + secrets.token_urlsafe(32))
        session.add(tenant)
        session.flush()
    created = _issue(session, tenant, expires_in)
    audit.record(
        session,
        actor,
        audit.Action.KEY_CREATED,
        target=created.prefix,
        tenant_id=tenant.id,
        expires_at=_iso(created.expires_at),
    )
    return created


def authenticate(session: Session, api_key: str) -> KeyHolder:
    """The holder of a live key; an expired key is told so, anything else is just invalid."""
    key = session.scalar(select(ApiKey).where(ApiKey.key_hash == hash_key(api_key)))
    if key is None or key.revoked_at is not None:
        raise Unauthorized("invalid or revoked API key")
    if key.expires_at is not None and key.expires_at <= utcnow():
        raise KeyExpired(
            f"API key {key.prefix} expired on {key.expires_at:%Y-%m-%d at %H:%M:%S} UTC; "
            "use the key that replaced it, or ask an operator for a new one"
        )
    tenant = session.get_one(Tenant, key.tenant_id)
    return KeyHolder(tenant, key.prefix)


def list_keys(session: Session, *, tenant_name: str | None = None) -> list[KeyInfo]:
    query = select(ApiKey, Tenant.name).join(Tenant).order_by(Tenant.name, ApiKey.created_at)
    if tenant_name is not None:
        query = query.where(Tenant.name == tenant_name)
    return [_info(key, name) for key, name in session.execute(query).all()]


def revoke_key(session: Session, prefix: str, *, actor: audit.Actor = audit.OPERATOR) -> KeyInfo:
    """Revoke the key whose first characters are ``prefix``; it stops working at once."""
    key = _one_key(session, prefix)
    already = key.revoked_at is not None
    key.revoked_at = key.revoked_at or utcnow()
    if not already:
        audit.record(
            session, actor, audit.Action.KEY_REVOKED, target=key.prefix, tenant_id=key.tenant_id
        )
    return _info(key, session.get_one(Tenant, key.tenant_id).name)


def rotate_key(
    session: Session,
    prefix: str,
    *,
    overlap: timedelta,
    expires_in: timedelta | None = None,
    actor: audit.Actor = audit.OPERATOR,
) -> Rotation:
    """Issue the successor of the key starting with ``prefix`` and let the old key work for
    ``overlap`` more (never longer than it already would). The successor lives ``expires_in``,
    by default as long as the old key was given; a key that never expired begets one that
    never expires."""
    old = _one_key(session, prefix)
    if old.revoked_at is not None:
        raise Conflict(f"key {old.prefix} is revoked; create a new key instead of rotating it")
    tenant = session.get_one(Tenant, old.tenant_id)
    if expires_in is None and old.expires_at is not None:
        expires_in = old.expires_at - old.created_at
    new = _issue(session, tenant, expires_in)
    ends = utcnow() + overlap
    old.expires_at = ends if old.expires_at is None else min(old.expires_at, ends)
    audit.record(
        session,
        actor,
        audit.Action.KEY_ROTATED,
        target=old.prefix,
        tenant_id=tenant.id,
        successor=new.prefix,
        old_expires_at=_iso(old.expires_at),
        new_expires_at=_iso(new.expires_at),
    )
    return Rotation(new, _info(old, tenant.name))


def _issue(session: Session, tenant: Tenant, expires_in: timedelta | None) -> CreatedKey:
    api_key = KEY_PREFIX + secrets.token_urlsafe(32)
    expires_at = None if expires_in is None else utcnow() + expires_in
    session.add(
        ApiKey(
            tenant_id=tenant.id,
            prefix=api_key[:PREFIX_LENGTH],
            key_hash=hash_key(api_key),
            expires_at=expires_at,
        )
    )
    session.flush()
    return CreatedKey(tenant.id, tenant.name, api_key, tenant.webhook_secret, expires_at)


def _one_key(session: Session, prefix: str) -> ApiKey:
    named = ApiKey.prefix.startswith(prefix, autoescape=True)  # "_" in a key is no wildcard
    matches = session.scalars(select(ApiKey).where(named).with_for_update()).all()
    if len(prefix) < len(KEY_PREFIX) + 4 or len(matches) != 1:
        found = "no key" if not matches else f"{len(matches)} keys"
        raise NotFound(f"{found} with prefix {prefix!r}; give the key's first 12 characters")
    return matches[0]


def _info(key: ApiKey, tenant_name: str) -> KeyInfo:
    return KeyInfo(key.prefix, tenant_name, key.created_at, key.revoked_at, key.expires_at)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()
