"""What each container of deploy/k8s runs is what uocr accepts: its commands parse against the
real CLI, its environment loads as the real settings, and the API's probe paths answer the
kubelet as the probes expect."""

from __future__ import annotations

import os
from pathlib import PurePosixPath

import pytest
from fastapi.testclient import TestClient

from ocr_api.main import create_app
from tests.cli.command_lines import parse_uocr, uocr_invocations
from tests.cli.conftest import UNREACHABLE
from tests.conftest import Stack
from tests.deploy.manifests import (
    Container,
    Rendered,
    argv,
    containers,
    environment,
    over_overlays,
    render,
)
from uocr_core.contracts import OCR_QUEUES
from uocr_core.settings import Settings, SettingsError, check_environment, load_settings

# What the kubelet sends with an httpGet probe.
KUBELET = {"User-Agent": "kube-probe/1.30", "Accept": "*/*"}


def settings_of(
    rendered: Rendered, container: Container, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    """The settings `uocr` builds in this container, from the environment Kubernetes gives it."""
    for name in list(os.environ):
        if name.startswith(("UOCR_", "FLOWER_")):
            monkeypatch.delenv(name)
    for name, value in environment(rendered, container).items():
        monkeypatch.setenv(name, value)
    return load_settings()


@over_overlays
def test_every_container_runs_a_uocr_command_the_cli_accepts(overlay: str) -> None:
    for container in containers(render(overlay)):
        invocations = uocr_invocations(argv(container))
        assert invocations, f"{container.label} runs no uocr command"
        for args in invocations:
            assert parse_uocr(args).command_path.startswith("uocr "), container.label


@over_overlays
def test_every_container_environment_is_real_settings(
    overlay: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered = render(overlay)
    for container in containers(rendered):
        check_environment(environment(rendered, container))  # each UOCR_* names a setting
        settings = settings_of(rendered, container, monkeypatch)
        assert settings.environment == "production", container.label
        assert settings.engine == ("unlimited_ocr" if overlay == "gpu" else "rapidocr")
        assert settings.redis.url.startswith("redis://:redis-password@redis:6379/")


def test_a_misspelled_setting_is_refused() -> None:
    """The check can fail: a variable that names no setting stops start-up."""
    with pytest.raises(SettingsError, match="UOCR_WORKER__POOLS"):
        check_environment({"UOCR_WORKER__POOLS": "threads"})


@over_overlays
def test_a_stopped_worker_finishes_the_task_in_hand(
    overlay: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a scale-in or a drain Celery's warm shutdown waits for running tasks: the grace
    period covers the longest page group (OCR pools) or webhook delivery (control)."""
    rendered = render(overlay)
    for container in containers(rendered):
        ctx = parse_uocr(uocr_invocations(argv(container))[0])
        if ctx.command_path != "uocr worker":
            continue
        settings = settings_of(rendered, container, monkeypatch)
        queues = set((ctx.params["queues"] or ",".join(OCR_QUEUES)).split(","))
        longest = (
            settings.max_group_time_limit
            if queues & set(OCR_QUEUES)
            else settings.webhooks.timeout_seconds
        )
        assert container.pod["terminationGracePeriodSeconds"] > longest, container.label


def test_gpu_workers_mount_the_model_they_load(monkeypatch: pytest.MonkeyPatch) -> None:
    rendered = render("gpu")
    for container in containers(rendered):
        if "nvidia.com/gpu" not in container.spec["resources"]["limits"]:
            continue
        model_path = PurePosixPath(str(settings_of(rendered, container, monkeypatch).model_path))
        mounts = [PurePosixPath(m["mountPath"]) for m in container.spec["volumeMounts"]]
        assert any(model_path.is_relative_to(mount) for mount in mounts), container.label


@over_overlays
def test_the_api_is_probed_on_its_port_and_health_routes(
    overlay: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered = render(overlay)
    (api,) = [c for c in containers(rendered) if c.workload["metadata"]["name"] == "uocr-api"]
    params = parse_uocr(uocr_invocations(argv(api))[0]).params
    listening = params["port"] or settings_of(rendered, api, monkeypatch).service_port
    ports = {port["name"]: port["containerPort"] for port in api.spec["ports"]}
    paths = {}
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = api.spec[kind]["httpGet"]
        assert ports[probe["port"]] == listening, kind
        paths[kind] = probe["path"]
    assert paths == {
        "startupProbe": "/readyz",
        "readinessProbe": "/healthz",
        "livenessProbe": "/healthz",
    }
    service_ports = rendered.named("Service", "uocr-api")["spec"]["ports"]
    assert [p["targetPort"] for p in service_ports] == ["http"]


def test_in_an_outage_api_pods_stay_alive_and_in_service_but_new_ones_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Database, broker and object store unreachable: /healthz (liveness, readiness) answers
    200, so running pods keep answering 503 with Retry-After instead of being restarted or
    pulled; /readyz (start-up) answers 503, so a new pod takes no traffic yet."""
    for name, value in UNREACHABLE.items():
        monkeypatch.setenv(name, value)
    with TestClient(create_app(load_settings())) as client:
        assert client.get("/healthz", headers=KUBELET).status_code == 200
        answer = client.get("/readyz", headers=KUBELET)
    assert answer.status_code == 503
    assert answer.json()["ready"] is False


def test_with_its_services_up_a_new_api_pod_starts(stack: Stack) -> None:
    with TestClient(create_app(stack.settings)) as client:
        answer = client.get("/readyz", headers=KUBELET)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "ready": True,
        "checks": {"database": "ok", "broker": "ok", "object_store": "ok"},
    }
