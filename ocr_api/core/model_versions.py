"""Named model versions: the settings one version runs with.

A version is an engine, its weights and its options (``models.versions``). A process that serves
or evaluates a version builds the engine from ``settings_for(settings, name)``, an ordinary
Settings whose top-level engine fields are the version's, so the engine factory needs no change.
"""

from __future__ import annotations

from ocr_api.core.settings import ModelVersionSettings, Settings, UnlimitedOcrSettings

DEFAULT_VERSION = "default"


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
