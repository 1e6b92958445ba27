"""Real Prometheus and Alertmanager for end-to-end tests, run from the shipped ops/ configs.

What changes from production is only what a test cannot wait for or must point elsewhere:
scrape and evaluation every second, `for:` durations and Alertmanager's grouping waits cut to
seconds, targets and receivers on loopback. Rule expressions and routes are the shipped ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.e2e.processes import Process, free_port, wait_http, wait_until
from tests.ops.test_alert_rules import OPS, RULES, ops_binary

SHORT_FOR = "2s"


def shortened_rules(path: Path) -> Path:
    """The shipped rules with every `for:` cut to SHORT_FOR; expressions untouched."""
    document = yaml.safe_load(RULES.read_text())
    for group in document["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = SHORT_FOR
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def alertmanager_config(path: Path, receiver_url: str) -> Path:
    """ops/alertmanager.yml with each receiver posting to ``receiver_url``/<its name>."""
    config = yaml.safe_load((OPS / "alertmanager.yml").read_text())
    for route in [config["route"], *config["route"].get("routes", [])]:
        route.update(group_wait="1s", group_interval="1s")
    for receiver in config["receivers"]:
        for webhook in receiver["webhook_configs"]:
            webhook["url"] = f"{receiver_url}/{receiver['name']}"
    path.write_text(yaml.safe_dump(config))
    return path


def prometheus_config(
    path: Path, *, rules: Path, alertmanager: str, targets: dict[str, str]
) -> Path:
    """ops/prometheus.yml scraping ``targets`` (job name -> host:port) every second."""
    config = yaml.safe_load((OPS / "prometheus.yml").read_text())
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(rules)]
    config["alerting"]["alertmanagers"][0]["static_configs"] = [{"targets": [alertmanager]}]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == set(targets), f"ops/prometheus.yml scrapes {sorted(jobs)}"
    for name, target in targets.items():
        jobs[name]["static_configs"] = [{"targets": [target]}]
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass
class Monitoring:
    prometheus_url: str
    processes: list[Process]

    def query(self, promql: str) -> list[dict[str, Any]]:
        answer = httpx.get(f"{self.prometheus_url}/api/v1/query", params={"query": promql})
        return list(answer.raise_for_status().json()["data"]["result"])

    def wait_for_value(self, promql: str, timeout: float = 30) -> float:
        """The first sample of ``promql``'s result, once it has one."""
        found = wait_until(lambda: self.query(promql), timeout, what=f"Prometheus: {promql}")
        return float(found[0]["value"][1])

    def stop(self) -> None:
        for process in self.processes:
            process.stop()


def start_monitoring(logs: Path, *, receiver_url: str, targets: dict[str, str]) -> Monitoring:
    am_port, prom_port = free_port(), free_port()
    alertmanager = Process(
        [
            ops_binary("prometheus-alertmanager"),
            f"--config.file={alertmanager_config(logs / 'alertmanager.yml', receiver_url)}",
            f"--storage.path={logs / 'alertmanager-data'}",
            f"--web.listen-address=127.0.0.1:{am_port}",
            "--cluster.listen-address=",  # one instance: no gossip port
        ],
        {},
        logs / "alertmanager.log",
    ).start()
    config = prometheus_config(
        logs / "prometheus.yml",
        rules=shortened_rules(logs / "rules.yml"),
        alertmanager=f"127.0.0.1:{am_port}",
        targets=targets,
    )
    prometheus = Process(
        [
            ops_binary("prometheus"),
            f"--config.file={config}",
            f"--storage.tsdb.path={logs / 'prometheus-data'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ],
        {},
        logs / "prometheus.log",
    ).start()
    monitoring = Monitoring(f"http://127.0.0.1:{prom_port}", [prometheus, alertmanager])
    try:
        wait_http(f"http://127.0.0.1:{am_port}/-/ready")
        wait_http(f"{monitoring.prometheus_url}/-/ready")
    except TimeoutError:  # neither is left running behind a failed start (see their logs)
        monitoring.stop()
        raise
    return monitoring
