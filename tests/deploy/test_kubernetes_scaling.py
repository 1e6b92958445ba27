"""KEDA scales each worker pool on exactly the Celery queues it consumes, as the code declares
them, through the Redis its workers use; and the messages the code really sends wait in the
lists the triggers measure."""

from __future__ import annotations

from urllib.parse import urlsplit

import redis

from ocr_worker import launcher
from tests.cli.command_lines import parse_uocr, uocr_invocations
from tests.conftest import ServiceUrls, fresh_redis_url
from tests.deploy.manifests import (
    Container,
    Manifest,
    Rendered,
    argv,
    containers,
    environment,
    over_overlays,
    render,
)
from uocr_core.celery_app import make_celery
from uocr_core.contracts import OCR_QUEUES, QUEUE_CONTROL
from uocr_core.dispatch import CeleryDispatcher
from uocr_core.settings import Settings

DECLARED_QUEUES = {queue.name for queue in make_celery(Settings()).conf.task_queues}


def test_the_code_declares_the_ocr_and_control_queues() -> None:
    assert {*OCR_QUEUES, QUEUE_CONTROL} == DECLARED_QUEUES


def worker_spec(rendered: Rendered, container: Container) -> launcher.WorkerSpec | None:
    """The Celery worker `uocr worker ...` in this container starts (its -Q, its node name)."""
    invocations = uocr_invocations(argv(container))
    if not invocations or invocations[0][0] != "worker":
        return None
    params = parse_uocr(invocations[0]).params
    cards_here = int(environment(rendered, container).get("UOCR_GPU_COUNT", "0"))
    chosen = tuple(params["queues"].split(",")) if params["queues"] else launcher.OCR_QUEUES
    (spec,) = launcher.worker_specs(
        launcher.parse_gpus(params["gpus"], cards_here),
        concurrency=params["concurrency"],
        queues=chosen,
        host="$HOSTNAME",
    )
    return spec


def consumed_queues(spec: launcher.WorkerSpec) -> set[str]:
    return set(spec.argv[spec.argv.index("-Q") + 1].split(","))


def worker_pools(rendered: Rendered) -> dict[str, tuple[Container, launcher.WorkerSpec]]:
    pools = {}
    for container in containers(rendered):
        spec = worker_spec(rendered, container)
        if spec is not None:
            pools[container.workload["metadata"]["name"]] = (container, spec)
    return pools


def scaled_object_of(rendered: Rendered, deployment: str) -> Manifest:
    (scaled,) = [
        obj
        for obj in rendered.of_kind("ScaledObject")
        if obj["spec"]["scaleTargetRef"]["name"] == deployment
    ]
    return scaled


@over_overlays
def test_each_pool_scales_on_exactly_the_queues_it_consumes(overlay: str) -> None:
    rendered = render(overlay)
    pools = worker_pools(rendered)
    assert len(pools) >= 3  # the control pool and two OCR pools
    for name, (_, spec) in pools.items():
        triggers = scaled_object_of(rendered, name)["spec"]["triggers"]
        lists = [trigger["metadata"]["listName"] for trigger in triggers]
        assert sorted(lists) == sorted(consumed_queues(spec)), name
        assert set(lists) <= DECLARED_QUEUES, name


@over_overlays
def test_every_declared_queue_has_a_pool(overlay: str) -> None:
    pools = worker_pools(render(overlay))
    consumed = set().union(*(consumed_queues(spec) for _, spec in pools.values()))
    assert consumed == DECLARED_QUEUES


@over_overlays
def test_triggers_read_the_redis_the_workers_use(overlay: str) -> None:
    """KEDA reads the variables it is told of from the target's first container."""
    rendered = render(overlay)
    for name, _ in worker_pools(rendered).items():
        scaled = scaled_object_of(rendered, name)
        target = rendered.named("Deployment", name)
        first = Container(target, target["spec"]["template"]["spec"]["containers"][0])
        env = environment(rendered, first)
        broker = urlsplit(env["UOCR_REDIS__URL"])
        for trigger in scaled["spec"]["triggers"]:
            metadata = trigger["metadata"]
            assert env[metadata["addressFromEnv"]] == broker.netloc.rsplit("@", 1)[1], name
            assert env[metadata["passwordFromEnv"]] == broker.password, name
            assert metadata["databaseIndex"] == broker.path.strip("/"), name


@over_overlays
def test_workers_are_probed_by_the_name_they_answer_to(overlay: str) -> None:
    rendered = render(overlay)
    for name, (container, spec) in worker_pools(rendered).items():
        probe = " ".join(container.spec["livenessProbe"]["exec"]["command"])
        assert f"inspect ping -d {spec.node_name} " in probe, name


def test_gpu_pools_go_to_zero_with_time_for_their_start_up() -> None:
    rendered = render("gpu")
    gpu_pools = {n: c for n, (c, spec) in worker_pools(rendered).items() if "gpu" in spec.node_name}
    assert set(gpu_pools) == {"uocr-gpu-worker", "uocr-gpu-worker-long"}
    for name, container in gpu_pools.items():
        scaled = scaled_object_of(rendered, name)["spec"]
        assert scaled["minReplicaCount"] == 0
        assert scaled["cooldownPeriod"] >= 600  # 15 idle minutes against a 1-12 min start
        assert container.spec["resources"]["limits"]["nvidia.com/gpu"] == 1
        assert container.pod["nodeSelector"] and container.pod["tolerations"]
        startup = container.spec["startupProbe"]  # loading the model before liveness counts
        assert startup["failureThreshold"] * startup["periodSeconds"] >= 600


@over_overlays
def test_control_and_beat_never_scale_to_zero(overlay: str) -> None:
    rendered = render(overlay)
    assert scaled_object_of(rendered, "uocr-control-worker")["spec"]["minReplicaCount"] >= 1
    beat = rendered.named("Deployment", "uocr-beat")["spec"]
    assert beat["replicas"] == 1 and beat["strategy"]["type"] == "Recreate"
    targets = {s["spec"]["scaleTargetRef"]["name"] for s in rendered.of_kind("ScaledObject")}
    assert "uocr-beat" not in targets


@over_overlays
def test_the_messages_the_code_sends_wait_in_the_lists_keda_measures(
    overlay: str, service_urls: ServiceUrls
) -> None:
    """Page groups of every kind and control tasks sent by the real dispatcher through a real
    Redis: each waits in a list some trigger names, and none anywhere else."""
    settings = Settings(redis={"url": fresh_redis_url(service_urls)})  # type: ignore[arg-type]
    client = redis.Redis.from_url(settings.redis.url, decode_responses=True)
    client.flushdb()
    dispatcher = CeleryDispatcher(
        make_celery(settings), settings.group_time_limit, settings.long_document_pages
    )
    short, long = 3, settings.long_document_pages
    for priority in ("interactive", "backlog"):
        for pages in (short, long):
            dispatcher.enqueue_group(
                job_id="job", group_index=0, priority=priority, group_pages=1, document_pages=pages
            )
    dispatcher.enqueue_webhook(delivery_id="delivery")
    dispatcher.enqueue_admission()
    measured = {
        trigger["metadata"]["listName"]
        for scaled in render(overlay).of_kind("ScaledObject")
        for trigger in scaled["spec"]["triggers"]
    }
    lists = [key for key in client.scan_iter() if client.type(key) == "list"]
    waiting = {key: client.llen(key) for key in lists}
    client.close()
    assert set(waiting) <= measured
    assert sum(waiting.values()) == 6  # four page groups, a webhook, an admission round
