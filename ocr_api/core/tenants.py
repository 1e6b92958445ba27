"""Tenants and their API keys. A key is shown once and stored only as its SHA-256 hash."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from ocr_api.core.db import utcnow
from ocr_api.core.errors import NotFound
from ocr_api.core.models import ApiKey, Tenant

KEY_PREFIX = "uocr_"


@dataclass(frozen=True)
class CreatedKey:
    tenant_id: str
    tenant_name: str
    api_key: str
    webhook_secret: str


@dataclass(frozen=True)
class KeyInfo:
    prefix: str  # the key's first 12 characters: enough to name it, useless to use it
    tenant_name: str
    created_at: datetime
    revoked_at: datetime | None


def hash_key(api_key: str) -> str:
    # Keys are 256 random bits, so a fast hash is enough: there is nothing to brute-force.
    return hashlib.sha256(api_key.encode()).hexdigest()


def create_key(session: Session, *, tenant_name: str) -> CreatedKey:
    tenant = session.scalar(select(Tenant).where(Tenant.name == tenant_name))
    if tenant is None:
        tenant = Tenant(name=tenant_name, webhook_secret="whsec_" + secrets.token_urlsafe(32))
        session.add(tenant)
        session.flush()
    api_key = KEY_PREFIX + secrets.token_urlsafe(32)
    session.add(ApiKey(tenant_id=tenant.id, prefix=api_key[:12], key_hash=hash_key(api_key)))
    return CreatedKey(tenant.id, tenant.name, api_key, tenant.webhook_secret)


def tenant_for_key(session: Session, api_key: str) -> Tenant | None:
    row = session.scalar(
        select(ApiKey).where(ApiKey.key_hash == hash_key(api_key), ApiKey.revoked_at.is_(None))
    )
    return None if row is None else session.get(Tenant, row.tenant_id)


def list_keys(session: Session, *, tenant_name: str | None = None) -> list[KeyInfo]:
    query = select(ApiKey, Tenant.name).join(Tenant).order_by(Tenant.name, ApiKey.created_at)
    if tenant_name is not None:
        query = query.where(Tenant.name == tenant_name)
    return [
        KeyInfo(key.prefix, name, key.created_at, key.revoked_at)
        for key, name in session.execute(query).all()
    ]


def revoke_key(session: Session, prefix: str) -> KeyInfo:
    """Revoke the key whose first characters are ``prefix``; it stops working at once."""
    named = ApiKey.prefix.startswith(prefix, autoescape=True)  # "_" in a key is no wildcard
    matches = session.scalars(select(ApiKey).where(named)).all()
    if len(prefix) < len(KEY_PREFIX) + 4 or len(matches) != 1:
        found = "no key" if not matches else f"{len(matches)} keys"
        raise NotFound(f"{found} with prefix {prefix!r}; give the key's first 12 characters")
    key = matches[0]
    key.revoked_at = key.revoked_at or utcnow()
    tenant = session.get(Tenant, key.tenant_id)
    assert tenant is not None
    return KeyInfo(key.prefix, tenant.name, key.created_at, key.revoked_at)
