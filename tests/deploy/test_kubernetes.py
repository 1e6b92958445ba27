"""deploy/k8s builds with `kubectl kustomize`, every object it renders is one Kubernetes (or
KEDA) accepts, and every name an object refers to exists: a ConfigMap, the Secret's keys, a
Deployment a ScaledObject scales."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import kubernetes_validate

from tests.deploy.manifests import (
    DEPLOY,
    OVERLAYS,
    SECRET_VALUES,
    Manifest,
    containers,
    over_overlays,
    render,
    secret_refs,
)

# The oldest Kubernetes the manifests are for (README.md), and the newest the validator knows.
KUBERNETES_VERSIONS = ("1.29.0", kubernetes_validate.latest_version())
# KEDA's CRDs are not among kubernetes-validate's schemas: ScaledObjects are checked against one
# written from KEDA's documented fields instead.
KEDA_SCHEMA = json.loads(
    (Path(__file__).parent / "keda_scaledobject.schema.json").read_text(encoding="utf-8")
)


def validation_errors(obj: Manifest) -> list[str]:
    """What Kubernetes (strict: unknown fields too) or KEDA would refuse in ``obj``."""
    if obj["apiVersion"].startswith("keda.sh/"):
        validator = jsonschema.Draft202012Validator(KEDA_SCHEMA)
        return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(obj)]
    errors = []
    for version in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            errors.append(f"k8s {version} {list(error.absolute_path)}: {error.message}")
    return errors


def test_the_overlays_are_cpu_and_gpu() -> None:
    assert sorted(p.name for p in (DEPLOY / "overlays").iterdir()) == sorted(OVERLAYS)


@over_overlays
def test_every_rendered_object_is_valid(overlay: str) -> None:
    rendered = render(overlay)
    kinds = {obj["kind"] for obj in rendered.objects}
    assert {"Deployment", "Service", "PodDisruptionBudget", "Job", "ScaledObject"} <= kinds
    for obj in rendered.objects:
        label = f"{obj['kind']}/{obj['metadata']['name']}"
        assert validation_errors(obj) == [], label
        assert obj["metadata"]["namespace"] == "uocr", label


def test_the_validation_refuses_what_a_cluster_would() -> None:
    """The checks can fail: a misspelled probe field, a KEDA metadata value that is not a
    string (the CRD declares a map of strings), a trigger KEDA does not document."""
    rendered = render("cpu")
    api = copy.deepcopy(rendered.named("Deployment", "uocr-api"))
    api["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    assert validation_errors(api)
    scaled = copy.deepcopy(rendered.named("ScaledObject", "uocr-cpu-worker"))
    scaled["spec"]["triggers"][0]["metadata"]["listLength"] = 4
    assert validation_errors(scaled)
    scaled["spec"]["triggers"][0]["metadata"] = {"listName": "ocr.backlog", "queueLength": "4"}
    assert validation_errors(scaled)


@over_overlays
def test_every_config_map_a_container_reads_is_rendered(overlay: str) -> None:
    """A generated ConfigMap's hashed name must reach every Deployment, the base's too."""
    rendered = render(overlay)
    names = {obj["metadata"]["name"] for obj in rendered.of_kind("ConfigMap")}
    for container in containers(rendered):
        for source in container.spec.get("envFrom", []):
            assert source["configMapRef"]["name"] in names, container.label


@over_overlays
def test_secrets_are_only_referenced_and_documented(overlay: str) -> None:
    rendered = render(overlay)
    assert rendered.of_kind("Secret") == []  # never a literal secret in the manifests
    used = set()
    for container in containers(rendered):
        for ref in secret_refs(container):
            assert ref["name"] == "uocr-secrets", container.label
            used.add(ref["key"])
    readme = (DEPLOY / "README.md").read_text(encoding="utf-8")
    assert used == set(SECRET_VALUES)
    assert all(f"`{key}`" in readme for key in used)


@over_overlays
def test_every_scaled_object_scales_a_rendered_deployment(overlay: str) -> None:
    rendered = render(overlay)
    deployments = {obj["metadata"]["name"] for obj in rendered.of_kind("Deployment")}
    for scaled in rendered.of_kind("ScaledObject"):
        assert scaled["spec"]["scaleTargetRef"]["name"] in deployments


@over_overlays
def test_every_pod_asks_for_resources_and_has_a_disruption_budget_or_a_reason(
    overlay: str,
) -> None:
    rendered = render(overlay)
    budgets = [
        pdb["spec"]["selector"]["matchLabels"] for pdb in rendered.of_kind("PodDisruptionBudget")
    ]
    for container in containers(rendered):
        resources = container.spec["resources"]
        assert {"cpu", "memory"} <= set(resources["requests"]), container.label
        assert "memory" in resources["limits"], container.label
        workload = container.workload
        labels = workload["spec"]["template"]["metadata"]["labels"]
        covered = any(selector.items() <= labels.items() for selector in budgets)
        # beat (a singleton whose budget would block every drain), Flower (the console) and the
        # migrations Job have none; every serving pool has one.
        alone = workload["kind"] == "Job" or labels["app.kubernetes.io/component"] in {
            "beat",
            "flower",
        }
        assert covered != alone, container.label
