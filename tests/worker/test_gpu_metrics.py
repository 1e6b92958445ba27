"""A GPU worker reports its card's memory, utilisation and temperature; without the card (or
NVML) it reports nothing rather than failing, so CPU workers and the rules stay quiet."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ocr_worker.gpu_metrics import GpuCollector


def test_a_card_that_is_not_there_reports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "99")  # no NVML here, or no such card there
    assert GpuCollector.open() is None


@pytest.mark.gpu
def test_the_visible_card_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    collector = GpuCollector.open()
    assert collector is not None
    registry = CollectorRegistry()
    registry.register(collector)
    samples = {
        s.name: s
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
    }
    assert {s.labels["gpu"] for s in samples.values()} == {"0"}  # the worker's card only
    total = samples["uocr_gpu_memory_total_bytes"].value
    assert total > 8e9 and 0 < samples["uocr_gpu_memory_used_bytes"].value <= total
    assert 0 <= samples["uocr_gpu_utilization_ratio"].value <= 1
    assert 10 <= samples["uocr_gpu_temperature_celsius"].value <= 110
