"""Shared clients for the API process, built once in the lifespan, and the dependency aliases."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import redis
from celery import Celery
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session, sessionmaker

from ocr_api.web.request_id import request_id_of
from uocr_core.audit import Actor
from uocr_core.celery_app import make_celery
from uocr_core.db import make_engine, make_session_factory
from uocr_core.dispatch import CeleryDispatcher
from uocr_core.errors import Unauthorized
from uocr_core.models import Tenant
from uocr_core.settings import Settings
from uocr_core.storage import ObjectStore, make_object_store
from uocr_core.tenants import KeyHolder, authenticate


@dataclass
class AppState:
    settings: Settings
    sessions: sessionmaker[Session]
    store: ObjectStore
    celery: Celery
    dispatcher: CeleryDispatcher
    redis: redis.Redis

    @classmethod
    def build(cls, settings: Settings) -> AppState:
        celery = make_celery(settings)
        return cls(
            settings=settings,
            sessions=make_session_factory(make_engine(settings.database)),
            store=make_object_store(settings.s3),
            celery=celery,
            dispatcher=CeleryDispatcher(
                celery, settings.group_time_limit, settings.long_document_pages
            ),
            redis=redis.Redis.from_url(settings.redis.url, socket_timeout=2),
        )


def get_state(request: Request) -> AppState:
    return request.app.state.uocr  # type: ignore[no-any-return]


StateDep = Annotated[AppState, Depends(get_state)]
_bearer = HTTPBearer(auto_error=False)


def current_key(
    state: StateDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> KeyHolder:
    if credentials is None:
        raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
    with state.sessions() as session:
        return authenticate(session, credentials.credentials)


KeyDep = Annotated[KeyHolder, Depends(current_key)]


def current_tenant(key: KeyDep) -> Tenant:
    return key.tenant


TenantDep = Annotated[Tenant, Depends(current_tenant)]


def current_actor(request: Request, key: KeyDep) -> Actor:
    """Who the audit log names for this request: the tenant, its key and the request id."""
    return Actor.tenant_key(
        tenant_id=key.tenant.id,
        tenant_name=key.tenant.name,
        key_prefix=key.key_prefix,
        request_id=request_id_of(request),
    )


ActorDep = Annotated[Actor, Depends(current_actor)]
