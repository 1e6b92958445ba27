"""deploy/k8s rendered by the real `kubectl kustomize`, and read as Kubernetes reads it: each
container's command and the environment the kubelet gives it."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "k8s"
OVERLAYS = ("cpu", "gpu")
# Tests over each overlay. Not ids "cpu"/"gpu": tests/conftest.py skips, off CUDA, every test
# with "gpu" among its keywords, a parameter id included.
over_overlays = pytest.mark.parametrize(
    "overlay", OVERLAYS, ids=[f"overlays/{name}" for name in OVERLAYS]
)
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job")

# What an operator puts in the Secret uocr-secrets (deploy/k8s/README.md), as example values.
SECRET_VALUES = {
    "database-url": "postgresql+psycopg://uocr:pg-password@postgres:5432/uocr",
    "redis-password": "redis-password",
    "s3-access-key-id": "uocr",
    "s3-secret-access-key": "s3-secret",
    "flower-basic-auth": "operator:flower-password",
}

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Rendered:
    overlay: str
    objects: tuple[Manifest, ...]

    def of_kind(self, kind: str) -> list[Manifest]:
        return [obj for obj in self.objects if obj["kind"] == kind]

    def named(self, kind: str, name: str) -> Manifest:
        found = [obj for obj in self.of_kind(kind) if obj["metadata"]["name"] == name]
        assert found, f"{self.overlay}: no {kind} named {name}"
        return found[0]


@dataclass(frozen=True)
class Container:
    workload: Manifest  # the Deployment or Job running it
    spec: Manifest

    @property
    def label(self) -> str:
        return f"{self.workload['kind']}/{self.workload['metadata']['name']}/{self.spec['name']}"

    @property
    def pod(self) -> Manifest:
        return self.workload["spec"]["template"]["spec"]


def kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        pytest.fail(
            "kubectl is not installed, so deploy/k8s cannot be rendered: run `bash .ci/setup` "
            "(it installs Debian's kubernetes-client) or install kubectl"
        )
    return path


@cache
def render(overlay: str) -> Rendered:
    """`kubectl kustomize deploy/k8s/overlays/OVERLAY`, parsed; fails the test naming kubectl's
    complaint when the overlay does not build."""
    done = subprocess.run(
        [kubectl(), "kustomize", str(DEPLOY / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        pytest.fail(f"kubectl kustomize overlays/{overlay} failed:\n{done.stderr}")
    objects = tuple(obj for obj in yaml.safe_load_all(done.stdout) if obj)
    return Rendered(overlay, objects)


def containers(rendered: Rendered) -> list[Container]:
    found = []
    for workload in rendered.objects:
        if workload["kind"] in WORKLOAD_KINDS:
            pod = workload["spec"]["template"]["spec"]
            for spec in pod.get("initContainers", []) + pod["containers"]:
                found.append(Container(workload, spec))
    return found


def argv(container: Container) -> list[str]:
    return [*container.spec.get("command", []), *container.spec.get("args", [])]


def environment(rendered: Rendered, container: Container) -> dict[str, str]:
    """The variables the kubelet sets: envFrom's ConfigMaps and Secrets first, then each env
    entry in order, with $(NAME) replaced by a variable defined before it (kept as written
    otherwise, as the kubelet does); secrets take the values of SECRET_VALUES."""
    env: dict[str, str] = {}
    for source in container.spec.get("envFrom", []):
        if "configMapRef" in source:
            name = source["configMapRef"]["name"]
            env.update(rendered.named("ConfigMap", name).get("data", {}))
        else:
            raise AssertionError(f"{container.label}: envFrom {source} hides its variables")
    for entry in container.spec.get("env", []):
        env[entry["name"]] = _value(entry, env)
    return env


def _value(entry: Manifest, defined: dict[str, str]) -> str:
    if "value" in entry:
        return re.sub(
            r"\$\((\w+)\)", lambda m: defined.get(m.group(1), m.group(0)), str(entry["value"])
        )
    secret = entry["valueFrom"]["secretKeyRef"]
    return SECRET_VALUES[secret["key"]]


def secret_refs(container: Container) -> list[Manifest]:
    return [
        entry["valueFrom"]["secretKeyRef"]
        for entry in container.spec.get("env", [])
        if "secretKeyRef" in entry.get("valueFrom", {})
    ]
