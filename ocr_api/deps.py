"""Shared clients for the API process, built once in the lifespan, and the dependency aliases."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import redis
from celery import Celery
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session, sessionmaker

from ocr_api.core.celery_app import make_celery
from ocr_api.core.db import make_engine, make_session_factory
from ocr_api.core.dispatch import CeleryDispatcher
from ocr_api.core.errors import Unauthorized
from ocr_api.core.models import Tenant
from ocr_api.core.settings import Settings
from ocr_api.core.storage import ObjectStore, make_object_store
from ocr_api.core.tenants import tenant_for_key


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


def current_tenant(
    state: StateDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Tenant:
    if credentials is None:
        raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
    with state.sessions() as session:
        tenant = tenant_for_key(session, credentials.credentials)
    if tenant is None:
        raise Unauthorized("invalid or revoked API key")
    return tenant


TenantDep = Annotated[Tenant, Depends(current_tenant)]
