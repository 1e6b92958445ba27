"""Named model versions resolve to the settings a worker or `uocr eval` builds its engine from."""

import pytest
from pydantic import ValidationError

from ocr_api.core import model_versions
from ocr_api.core.settings import Settings


def _two_versions() -> Settings:
    return Settings(
        models={
            "versions": {
                "v1": {"engine": "rapidocr"},
                "v2": {
                    "engine": "unlimited_ocr",
                    "model_path": "/models/v2",
                    "unlimited_ocr": {"max_tokens_per_page": 900},
                },
            },
            "serve": "v1",
            "canary": "v2",
        }
    )


def test_a_version_brings_its_engine_weights_and_options() -> None:
    v2 = model_versions.settings_for(_two_versions(), "v2")
    assert (v2.engine, str(v2.model_path)) == ("unlimited_ocr", "/models/v2")
    assert v2.unlimited_ocr.max_tokens_per_page == 900
    assert v2.unlimited_ocr.block_size == Settings().unlimited_ocr.block_size


def test_without_versions_the_top_level_engine_is_the_default_version() -> None:
    settings = Settings()
    assert model_versions.version_names(settings) == ["default"]
    assert model_versions.settings_for(settings, "default").engine == settings.engine


def test_unknown_names_and_options_are_refused_with_the_name() -> None:
    with pytest.raises(KeyError, match="'v3'"):
        model_versions.settings_for(_two_versions(), "v3")
    with pytest.raises(ValidationError, match="models.canary names 'v9'"):
        Settings(models={"versions": {"v1": {}}, "serve": "v1", "canary": "v9"})
    with pytest.raises(ValidationError, match="max_tokens_per_pag"):
        Settings(models={"versions": {"v1": {"unlimited_ocr": {"max_tokens_per_pag": 5}}}})
