"""The GPU a worker runs on, read through NVML at scrape time: memory, utilisation, temperature.

NVML and not torch.cuda: it reads the whole card (other processes' memory included) without
creating a CUDA context, so the worker's main process may serve it while a child or a thread
owns the model. Nothing is reported without NVML or a GPU: the alert rules then see no series
and stay silent, never firing on absence.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import structlog
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = structlog.get_logger(__name__)


class GpuCollector(Collector):
    def __init__(self, nvml: Any, handles: list[tuple[str, Any]]) -> None:
        self.nvml = nvml
        self.handles = handles  # (the card's index as nvidia-smi numbers it, its NVML handle)

    @classmethod
    def open(cls) -> GpuCollector | None:
        """The cards this process may use (``CUDA_VISIBLE_DEVICES``), or None without NVML."""
        try:
            import pynvml  # type: ignore[import-untyped]

            pynvml.nvmlInit()
            handles = [(card, _handle(pynvml, card)) for card in _visible_cards(pynvml)]
        except Exception as error:  # no package (ImportError), no driver, no such card
            log.warning("worker.gpu_metrics_unavailable", error=str(error))
            return None
        return cls(pynvml, handles)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        used = _family("uocr_gpu_memory_used_bytes", "GPU memory in use (all processes)")
        total = _family("uocr_gpu_memory_total_bytes", "GPU memory on the card")
        busy = _family("uocr_gpu_utilization_ratio", "Share of the last sample period a kernel ran")
        temperature = _family("uocr_gpu_temperature_celsius", "GPU core temperature")
        nvml = self.nvml
        for card, handle in self.handles:
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            used.add_metric([card], float(memory.used))
            total.add_metric([card], float(memory.total))
            busy.add_metric([card], nvml.nvmlDeviceGetUtilizationRates(handle).gpu / 100.0)
            celsius = nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
            temperature.add_metric([card], float(celsius))
        yield from (used, total, busy, temperature)


def _family(name: str, doc: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=["gpu"])


def _visible_cards(nvml: Any) -> list[str]:
    """NVML sees every card whatever ``CUDA_VISIBLE_DEVICES`` says: keep the worker's own."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return [str(index) for index in range(nvml.nvmlDeviceGetCount())]
    return [card.strip() for card in visible.split(",") if card.strip()]


def _handle(nvml: Any, card: str) -> Any:
    if card.isdigit():
        return nvml.nvmlDeviceGetHandleByIndex(int(card))
    return nvml.nvmlDeviceGetHandleByUUID(card)  # CUDA_VISIBLE_DEVICES=GPU-<uuid>
