"""Which model version a new job runs on, and what that fixes about it (engine, reuse digest).

Decided once, when the job is created (a submit, or a document added to a batch), and recorded
on the job; see uocr_core/model_versions.py for the rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from uocr_core import model_versions
from uocr_core.models import Tenant
from uocr_core.settings import Settings


@dataclass(frozen=True)
class Routed:
    model_version: str
    engine: str
    result_identity: str  # what the content digest names (reuse across one version only)
    parallel_groups: bool  # whether the job's groups may run at once


def route_job(session: Session, settings: Settings, *, job_id: str, tenant_id: str) -> Routed:
    tenant: tuple[str, ...] = (tenant_id,)
    if settings.models.canary_tenants:  # chosen by name or id: the name needs a lookup
        name = session.scalar(select(Tenant.name).where(Tenant.id == tenant_id))
        tenant = (tenant_id, name) if name else tenant
    chosen = model_versions.route(settings.models, job_id=job_id, tenant=tenant)
    return routed(settings, chosen)


def routed(settings: Settings, name: str) -> Routed:
    engine = model_versions.version(settings, name).engine
    return Routed(
        model_version=name,
        engine=engine,
        result_identity=model_versions.result_identity(engine, name),
        parallel_groups=model_versions.groups_in_parallel(settings, engine),
    )
