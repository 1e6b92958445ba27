"""Tenants and their API keys. A key is shown once and stored only as its SHA-256 hash."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from ocr_api.core.models import ApiKey, Tenant

KEY_PREFIX = "uocr_"


@dataclass(frozen=True)
class CreatedKey:
    tenant_id: str
    tenant_name: str
    api_key: str
    webhook_secret: str


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
