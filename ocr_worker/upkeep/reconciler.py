"""The database is the truth, the broker is transport: dispatch again whatever work has no task.

Every unfinished job is compared with the broker on each beat tick. A group that should be
running somewhere but whose message is not waiting in a queue, and was not dispatched in the
last ``redispatch_after_seconds``, is dispatched again:

- a pending group whose message was lost (Redis restarted without persistence, a publish that
  failed after the row committed),
- a pending group whose message a worker took and then died before claiming it (the message is
  in the broker's ``unacked`` hash, where it would sit for the whole visibility timeout),
- a group that should have been dispatched and never was (its predecessor finished, but the
  worker died before queuing it; a crash between a submit's insert and its dispatch),
- a job whose groups are all settled but which never finished (the worker died before
  assembling it): its last group is sent again, and that task only advances the job;
- a webhook delivery still pending long after its next try was due (its delayed message was
  lost): sent again; receivers deduplicate on ``Uocr-Event-Id`` in any case.

Each job is dispatched to the queues of the model version it was given at submit. A job whose
version is no longer in the settings is not lost: it is reported (``job.model_version_unknown``
here, ``uocr_version_unfinished_jobs{configured="false"}`` in the API's metrics) and left
queued for that version, until its workers run it or an operator lists the version again.

A message that turns out to exist after all is harmless: claiming is idempotent, so the second
task finds the group leased or done and only advances the job. Groups that are running with a
lapsed lease are ``recover_stale_groups``'s.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import structlog
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from ocr_worker.broker_queues import WaitingTasks
from uocr_core import job_lifecycle
from uocr_core.db import transaction, utcnow
from uocr_core.dispatch import Dispatcher, queue_group
from uocr_core.models import Job, PageGroup, WebhookAttempt, WebhookDelivery

log = structlog.get_logger(__name__)


@dataclass
class Reconciler:
    sessions: sessionmaker[Session]
    dispatcher: Dispatcher
    waiting: WaitingTasks
    redispatch_after_seconds: int
    parallel_groups: bool  # every group dispatched at submit, or each after its predecessor
    # The same, per engine, where versions of several engines run side by side.
    parallel_by_engine: dict[str, bool] = field(default_factory=dict)
    known_versions: frozenset[str] | None = None  # None: no version check
    # A pending delivery untried for this long lost its message (the longest backoff, plus
    # a try's timeout and the grace).
    webhook_quiet_seconds: float = 3600.0

    def run(self) -> list[str]:
        """One pass; returns '<job>:<group>' for each dispatch. The broker is read before
        Postgres, so a message sent during the pass is never mistaken for a lost one."""
        waiting = self.waiting.task_ids()
        with self.sessions() as session:
            unfinished = session.execute(
                select(Job.id, Job.model_version, Job.admitted_at.is_not(None)).where(
                    Job.status.in_(job_lifecycle.UNFINISHED)
                )
            ).all()
        self._report_unknown_versions(Counter(version for _, version, _ in unfinished))
        # A document still waiting for the feeder has no page group to lose: a backlog of
        # 10^5 waiting documents would otherwise cost 10^5 transactions a pass.
        job_ids = [job_id for job_id, _, admitted in unfinished if admitted]
        dispatched: list[str] = []
        for job_id in job_ids:
            dispatched += self._reconcile_job(job_id, waiting)
        return dispatched + self._redeliver_webhooks()

    def _report_unknown_versions(self, jobs_by_version: Counter[str]) -> None:
        """Jobs whose version was removed from the settings wait for workers nobody runs."""
        if self.known_versions is None:
            return
        for name, count in sorted(jobs_by_version.items()):
            if name not in self.known_versions:
                log.error(
                    "job.model_version_unknown",
                    model_version=name,
                    unfinished_jobs=count,
                    known_versions=sorted(self.known_versions),
                    hint="list the version in models.versions again and run its workers",
                )

    def _redeliver_webhooks(self) -> list[str]:
        cutoff = utcnow() - timedelta(seconds=self.webhook_quiet_seconds)
        last_try = (
            select(func.max(WebhookAttempt.started_at))
            .where(WebhookAttempt.delivery_id == WebhookDelivery.id)
            .scalar_subquery()
        )
        with self.sessions() as session:
            stale = list(
                session.scalars(
                    select(WebhookDelivery.id).where(
                        WebhookDelivery.status == "pending",
                        func.coalesce(last_try, WebhookDelivery.created_at) < cutoff,
                    )
                )
            )
        for delivery_id in stale:
            self.dispatcher.enqueue_webhook(delivery_id=delivery_id)
            log.warning("webhook.redispatched", delivery_id=delivery_id)
        return [f"webhook:{delivery_id}" for delivery_id in stale]

    def _reconcile_job(self, job_id: str, waiting: set[str]) -> list[str]:
        cutoff = utcnow() - timedelta(seconds=self.redispatch_after_seconds)
        with transaction(self.sessions) as session:
            # A worker claiming or recording in this job holds its row: look again next tick.
            job = session.scalar(
                select(Job)
                .where(Job.id == job_id, Job.status.in_(job_lifecycle.UNFINISHED))
                .with_for_update(skip_locked=True)
            )
            if job is None:
                return []
            groups = list(job.groups)
            lost = [g for g in groups if self._is_lost(job, g, groups, waiting, cutoff)]
            for group in lost:
                queue_group(self.dispatcher, group, priority=job.priority)
                log.warning("page_group.redispatched", job_id=job.id, page_group=group.group_index)
            if not lost and (last := _stalled_last_group(groups, cutoff)) is not None:
                self._send_advance(job, last)
                lost = [last]
            return [f"{job.id}:{g.group_index}" for g in lost]

    def _is_lost(
        self,
        job: Job,
        group: PageGroup,
        groups: list[PageGroup],
        waiting: set[str],
        cutoff: datetime,
    ) -> bool:
        if group.status != "pending":
            return False
        previous = groups[group.group_index - 1] if group.group_index > 0 else None
        parallel = self.parallel_by_engine.get(job.engine, self.parallel_groups)
        in_order = not parallel and previous is not None
        if in_order and previous is not None and previous.status not in job_lifecycle.GROUP_SETTLED:
            return False  # its predecessor queues it when it finishes
        if group.enqueued_at is None:  # due since the job was created or its predecessor ended
            due_since = (previous.finished_at if in_order and previous else None) or job.created_at
            return due_since < cutoff
        return group.task_id not in waiting and group.enqueued_at < cutoff

    def _send_advance(self, job: Job, group: PageGroup) -> None:
        """The group is settled: its task only advances (here: finishes) the job."""
        self.dispatcher.enqueue_group(
            job_id=job.id,
            group_index=group.group_index,
            priority=job.priority,
            group_pages=group.num_pages,
            document_pages=job.page_count,
            model_version=job.model_version,
        )
        log.warning("job.resumed", job_id=job.id, page_group=group.group_index)


def _stalled_last_group(groups: list[PageGroup], cutoff: datetime) -> PageGroup | None:
    """Every group settled a while ago but the job is unfinished: the last one settled."""
    if not groups or any(g.status not in job_lifecycle.GROUP_SETTLED for g in groups):
        return None
    last = max(groups, key=lambda g: g.finished_at or cutoff)
    return last if (last.finished_at or cutoff) <= cutoff else None
