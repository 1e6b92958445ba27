"""One worker per card, pinned and named after it; the GPU count is faked through configuration."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from ocr_worker.launcher import detect_gpu_count, parse_gpus, worker_specs


def test_gpu_count_comes_from_configuration_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOCR_GPU_COUNT", "4")
    assert detect_gpu_count() == 4


def test_all_cards_get_one_pinned_worker_each() -> None:
    specs = worker_specs(parse_gpus("all", 2), concurrency=8, host="box")
    assert [s.node_name for s in specs] == ["gpu0@box", "gpu1@box"]
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in specs] == ["0", "1"]
    for spec in specs:
        argv = " ".join(spec.argv)
        assert f"-n {spec.node_name}" in argv and "--concurrency 16" in argv
        assert "--pool threads" in argv and spec.env["UOCR_WORKER__POOL"] == "threads"
        assert "-Q ocr.interactive,ocr.long,ocr.backlog" in argv


def test_chosen_cards_and_no_gpu() -> None:
    assert [s.env for s in worker_specs(parse_gpus("1,3", 4), concurrency=1, host="h")] == [
        {
            "CUDA_VISIBLE_DEVICES": "1",
            "UOCR_WORKER__POOL": "threads",
            "UOCR_WORKER__RENDER_PROCESSES": "2",
        },
        {
            "CUDA_VISIBLE_DEVICES": "3",
            "UOCR_WORKER__POOL": "threads",
            "UOCR_WORKER__RENDER_PROCESSES": "2",
        },
    ]
    (cpu,) = worker_specs(parse_gpus("none", 4), concurrency=2, host="h")
    assert cpu.node_name == "cpu@h" and "--concurrency 2" in " ".join(cpu.argv)


def test_each_card_serves_its_metrics_on_its_own_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOCR_WORKER__METRICS_PORT", "9400")
    specs = worker_specs(parse_gpus("1,3", 4), concurrency=1, host="h")
    assert [s.env["UOCR_WORKER__METRICS_PORT"] for s in specs] == ["9400", "9401"]


@pytest.mark.parametrize(("spec", "message"), [("2", "has 2 GPU"), ("x", "--gpus takes")])
def test_bad_card_lists_are_refused(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_gpus(spec, 2)


def test_uocr_worker_starts_one_process_per_faked_card(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The launcher really starts the per-card processes with their own environment."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os, sys\n"
        "name = sys.argv[sys.argv.index('-n') + 1]\n"
        f"open(r'{tmp_path}/' + name, 'w').write(os.environ['CUDA_VISIBLE_DEVICES'])\n"
    )
    code = (
        "import sys; from ocr_worker import launcher\n"
        "specs = launcher.worker_specs(launcher.parse_gpus('all', launcher.detect_gpu_count()),"
        " concurrency=1, host='t')\n"
        f"specs = [s.__class__(s.node_name, s.env, [sys.executable, r'{probe}', *s.argv[3:]])"
        " for s in specs]\n"
        "sys.exit(launcher.run_workers(specs))\n"
    )
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        timeout=60,
        env={**os.environ, "UOCR_GPU_COUNT": "3"},
    )
    assert time.monotonic() - started < 60
    assert {p.name: p.read_text() for p in tmp_path.glob("gpu*")} == {
        "gpu0@t": "0",
        "gpu1@t": "1",
        "gpu2@t": "2",
    }


def test_a_worker_without_ocr_queues_loads_no_model() -> None:
    """The control worker (webhooks, recovery, admission) runs no OCR task: a model loaded in
    each of its prefork children took ~39 GB of the card apiece on the H200 and a minute to
    load again whenever a child was recycled, while recovery and admission waited."""
    (control,) = worker_specs([], concurrency=4, host="h", queues=("control",), model_version="v2")
    assert control.env["UOCR_WORKER__PRELOAD_ENGINE"] == "false"
    assert control.env["UOCR_WORKER__MODEL_VERSION"] == "v2"
    (ocr,) = worker_specs([], concurrency=4, host="h")
    assert "UOCR_WORKER__PRELOAD_ENGINE" not in ocr.env
