"""Named model versions resolve to the settings a worker or `uocr eval` builds its engine from."""

import uuid

import pytest
from pydantic import ValidationError

from uocr_core import contracts, model_versions
from uocr_core.settings import Settings, SettingsError, load_settings


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


# -- routing new jobs ----------------------------------------------------------------------


def _canary(percent: float = 0.0, tenants: tuple[str, ...] = ()) -> Settings:
    return Settings(
        models={
            "versions": {"v1": {}, "v2": {}},
            "serve": "v1",
            "canary": "v2",
            "canary_percent": percent,
            "canary_tenants": tenants,
        }
    )


def _job_ids(count: int) -> list[str]:
    return [str(uuid.UUID(int=n * 7919 + 1)) for n in range(count)]


def test_a_jobs_share_is_stable_and_the_canary_gets_about_its_percent() -> None:
    models = _canary(percent=5).models
    ids = _job_ids(4000)
    first = [model_versions.route(models, job_id=i, tenant=("t",)) for i in ids]
    again = [model_versions.route(models, job_id=i, tenant=("t",)) for i in ids]
    assert first == again  # every API replica, every retry: the same answer for a job
    share = first.count("v2") / len(ids)
    assert 0.035 < share < 0.065, share
    assert set(first) == {"v1", "v2"}


def test_zero_and_hundred_percent_are_never_and_always() -> None:
    ids = _job_ids(500)
    never, always = _canary(percent=0).models, _canary(percent=100).models
    assert {model_versions.route(never, job_id=i, tenant=("t",)) for i in ids} == {"v1"}
    assert {model_versions.route(always, job_id=i, tenant=("t",)) for i in ids} == {"v2"}


def test_a_chosen_tenant_always_gets_the_canary_by_name_or_id() -> None:
    models = _canary(percent=0, tenants=("acme", "id-of-globex")).models
    for job_id in _job_ids(50):
        assert model_versions.route(models, job_id=job_id, tenant=("id-1", "acme")) == "v2"
        assert model_versions.route(models, job_id=job_id, tenant=("id-of-globex",)) == "v2"
        assert model_versions.route(models, job_id=job_id, tenant=("id-2", "initech")) == "v1"


def test_without_a_canary_every_job_goes_to_serve() -> None:
    models = Settings(models={"versions": {"v1": {}, "v2": {}}, "serve": "v2"}).models
    assert {model_versions.route(models, job_id=i, tenant=("t",)) for i in _job_ids(100)} == {"v2"}
    assert model_versions.route(Settings().models, job_id="j", tenant=("t",)) == "default"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"UOCR_MODELS__SERVE": "v9"}, "models.serve names 'v9'"),
        ({"UOCR_MODELS__CANARY": "v3"}, "models.canary names 'v3'"),
        ({"UOCR_MODELS__CANARY_PERCENT": "5"}, "canary_percent and canary_tenants need"),
        ({"UOCR_WORKER__MODEL_VERSION": "v7"}, "worker.model_version names 'v7'"),
        ({"UOCR_MODELS__VERSIONS": '{"v 1": {}}'}, "must be letters, digits"),
        ({"UOCR_MODELS__CANARY_PERCENT": "150"}, "canary_percent"),
    ],
)
def test_unknown_versions_and_bad_routing_are_refused_at_start_up(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], message: str
) -> None:
    monkeypatch.setenv("UOCR_MODELS__VERSIONS", '{"v1": {}, "v2": {}}')
    monkeypatch.setenv("UOCR_MODELS__SERVE", "v1")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=message):
        load_settings()


def test_each_version_has_its_own_queues_and_default_keeps_todays_names() -> None:
    assert contracts.ocr_queues() == contracts.OCR_QUEUES
    assert contracts.ocr_queues("v2") == ("ocr.interactive.v2", "ocr.long.v2", "ocr.backlog.v2")
    route = contracts.page_group_queue
    assert route("interactive", document_pages=3, long_document_pages=50) == "ocr.interactive"
    assert (
        route("backlog", document_pages=80, long_document_pages=50, model_version="v2")
        == "ocr.long.v2"
    )
    assert contracts.versioned_queue(contracts.QUEUE_CONTROL, "v2") == "control"


def test_reuse_never_mixes_versions_and_default_keeps_older_digests() -> None:
    assert model_versions.result_identity("rapidocr", "default") == "rapidocr"
    assert model_versions.result_identity("rapidocr", "v2") == "rapidocr@v2"
