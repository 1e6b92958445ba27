from __future__ import annotations

import os
from pathlib import Path

import pytest

from uocr_core.settings import SettingsError, load_settings


@pytest.fixture(autouse=True)
def _no_deployment_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test stack exports its settings as UOCR_* variables; these tests read the defaults."""
    for name in [n for n in os.environ if n.startswith("UOCR_")]:
        monkeypatch.delenv(name)


def test_defaults_are_the_deployment_guides_values() -> None:
    settings = load_settings()
    assert (settings.service_port, settings.max_concurrency, settings.max_pages_per_request) == (
        8100,
        16,
        300,
    )
    assert (settings.request_timeout_seconds, settings.visual_cache_workspace_gb) == (300, 4)
    assert (settings.queue_max_size, settings.log_level) == (64, "info")


def test_a_bad_value_stops_start_up_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOCR_MAX_CONCURRENCY", "lots")
    with pytest.raises(SettingsError, match="max_concurrency.*UOCR_MAX_CONCURRENCY"):
        load_settings()


def test_a_bad_nested_value_names_its_section(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOCR_WORKER__LEASE_SECONDS", "1")
    with pytest.raises(
        SettingsError, match=r"worker\.lease_seconds \(UOCR_WORKER__LEASE_SECONDS\)"
    ):
        load_settings()


def test_overlap_must_be_smaller_than_the_group() -> None:
    with pytest.raises(SettingsError, match="page_group_overlap"):
        load_settings(page_group_size=2, page_group_overlap=2)


def test_the_gpu_engine_needs_a_model_path() -> None:
    with pytest.raises(SettingsError, match="model_path is required"):
        load_settings(engine="unlimited_ocr")


def test_a_config_file_is_read_and_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "uocr.toml"
    config.write_text('service_port = 9000\nqueue_max_size = 5\n[s3]\nbucket = "scans"\n')
    monkeypatch.setenv("UOCR_CONFIG_FILE", str(config))
    monkeypatch.setenv("UOCR_QUEUE_MAX_SIZE", "7")
    settings = load_settings()
    assert (settings.service_port, settings.queue_max_size, settings.s3.bucket) == (
        9000,
        7,
        "scans",
    )


def test_production_refuses_the_placeholder_secret() -> None:
    with pytest.raises(SettingsError, match="placeholder"):
        load_settings(environment="production")


def test_group_time_limits_grow_with_pages_above_the_request_timeout() -> None:
    settings = load_settings(request_timeout_seconds=300, page_group_size=8)
    assert settings.group_time_limit(1) == 300  # the floor
    assert settings.group_time_limit(8) == 60 + 60 * 8
    assert settings.max_group_time_limit == 540


@pytest.mark.parametrize(
    ("variable", "closest"),
    [
        ("UOCR_PAGE_GROUPSIZE", "UOCR_PAGE_GROUP_SIZE"),
        ("UOCR_S3__ENDPONT_URL", "UOCR_S3__ENDPOINT_URL"),
        ("uocr_log_levle", "UOCR_LOG_LEVEL"),
    ],
)
def test_a_misspelled_variable_stops_start_up_naming_the_closest(
    monkeypatch: pytest.MonkeyPatch, variable: str, closest: str
) -> None:
    monkeypatch.setenv(variable, "3")
    with pytest.raises(SettingsError, match=f"unknown setting {variable}.*did you mean {closest}"):
        load_settings()


def test_variables_read_outside_the_settings_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("UOCR_CONFIG_FILE", "UOCR_GPU_COUNT", "UOCR_REQUIRE_SERVICES", "UOCR_TEST_S3_URL"):
        monkeypatch.setenv(name, "")
    monkeypatch.setenv("UOCR_S3", '{"bucket": "scans"}')  # a whole section as JSON
    assert load_settings().s3.bucket == "scans"


def test_a_missing_config_file_stops_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UOCR_CONFIG_FILE", str(tmp_path / "uocr.toml"))
    with pytest.raises(SettingsError, match=r"uocr\.toml \(UOCR_CONFIG_FILE\) does not exist"):
        load_settings()


def test_a_malformed_config_file_names_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "uocr.toml"
    config.write_text("queue_max_size = 5\npage_group_size =\n")
    monkeypatch.setenv("UOCR_CONFIG_FILE", str(config))
    with pytest.raises(SettingsError, match=r"is not valid TOML: .*line 2") as raised:
        load_settings()
    assert "\n" not in str(raised.value)


def test_an_unknown_key_in_the_config_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "uocr.toml"
    config.write_text("page_groupsize = 4\n")
    monkeypatch.setenv("UOCR_CONFIG_FILE", str(config))
    with pytest.raises(SettingsError, match="unknown setting page_groupsize.*page_group_size"):
        load_settings()


def test_a_gpu_worker_takes_groups_beyond_its_decode_slots_to_render_ahead() -> None:
    """`uocr worker --gpus` starts this many task threads a card: max_concurrency groups in the
    engine and half as many more rendering or storing (at most 32: at 128 groups on the H200
    32 kept every slot decoding), unless the operator says how many."""
    assert load_settings().gpu_worker_threads == 16 + 8
    assert load_settings(max_concurrency=64).gpu_worker_threads == 64 + 32
    assert load_settings(max_concurrency=128).gpu_worker_threads == 128 + 32
    assert load_settings(max_concurrency=2).gpu_worker_threads == 2 + 1
    assert load_settings(worker={"render_ahead_groups": 0}).gpu_worker_threads == 16
    with pytest.raises(SettingsError, match="render_ahead_groups"):
        load_settings(worker={"render_ahead_groups": -1})
