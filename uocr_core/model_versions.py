"""Named model versions: the settings one version runs with, and which version a new job gets.

A version is an engine, its weights and its options (``models.versions``). A process that serves
or evaluates a version builds the engine from ``settings_for(settings, name)``, an ordinary
Settings whose top-level engine fields are the version's, so the engine factory needs no change.

Routing is decided once, when a job is created, and recorded on the job: the job's page groups
go to that version's queues until it ends, whatever ``models.serve`` or ``models.canary`` say
later. So a promotion or a rollback is a change of settings that only moves new jobs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from uocr_core.contracts import DEFAULT_MODEL_VERSION
from uocr_core.settings import ModelsSettings, ModelVersionSettings, Settings, UnlimitedOcrSettings

DEFAULT_VERSION = DEFAULT_MODEL_VERSION


def version_names(settings: Settings) -> list[str]:
    return sorted(settings.models.versions) or [DEFAULT_VERSION]


def version(settings: Settings, name: str) -> ModelVersionSettings:
    """The named version; "default" is the top-level engine when no versions are listed."""
    versions = settings.models.versions
    if not versions and name == DEFAULT_VERSION:
        return ModelVersionSettings(engine=settings.engine, model_path=settings.model_path)
    if name not in versions:
        raise KeyError(f"unknown model version {name!r}; versions are {version_names(settings)}")
    return versions[name]


def is_known(settings: Settings, name: str) -> bool:
    return name in version_names(settings)


def settings_for(settings: Settings, name: str) -> Settings:
    """Settings whose engine, model_path and unlimited_ocr options are those of version ``name``."""
    chosen = version(settings, name)
    options = {**settings.unlimited_ocr.model_dump(), **chosen.unlimited_ocr}
    return settings.model_copy(
        update={
            "engine": chosen.engine,
            "model_path": chosen.model_path,
            "unlimited_ocr": UnlimitedOcrSettings.model_validate(options),
        }
    )


def served_version(settings: Settings) -> str:
    """The version a worker process serves: ``worker.model_version``, else ``models.serve``."""
    return settings.worker.model_version or settings.models.serve


def canary_share(job_id: str) -> float:
    """Where a job falls in [0, 100): a hash of its id, so the same job always gets the same
    answer (a retried submit, every API replica) and the share is spread evenly."""
    head = hashlib.sha256(job_id.encode()).digest()[:8]
    return int.from_bytes(head, "big") / 2**64 * 100


def route(models: ModelsSettings, *, job_id: str, tenant: Iterable[str]) -> str:
    """The version a new job runs on: the canary for a chosen tenant (named by id or name) or
    for the job's share of ``canary_percent``; otherwise the stable version."""
    if models.canary is not None:
        if set(tenant) & set(models.canary_tenants):
            return models.canary
        if canary_share(job_id) < models.canary_percent:
            return models.canary
    return models.serve


def result_identity(engine: str, name: str) -> str:
    """What two jobs' results must share to be interchangeable (content reuse): the engine, and
    the version when one is named; "default" keeps the bare engine name of older digests."""
    return engine if name == DEFAULT_VERSION else f"{engine}@{name}"


def groups_in_parallel(settings: Settings, engine: str) -> bool:
    """Whether a job on ``engine`` may run its page groups at once (see Settings)."""
    return settings.model_copy(update={"engine": engine}).page_groups_in_parallel
