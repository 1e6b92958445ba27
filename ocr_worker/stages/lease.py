"""Keeps a page group's lease alive while it runs, so a dead worker's group can be taken over.

A lease is held by a token unique to one claim (``<worker>/<random>``), not by the worker: two
tasks of the same group in one process (a redelivered message on a threads pool) never renew,
record or release each other's claim. Renewal runs in a thread, so whatever the task does
must not hold the GIL for long (renders run in a process: see ``imaging.ProcessRasterizer``).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from types import TracebackType

import structlog
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from uocr_core.db import transaction, utcnow
from uocr_core.job_lifecycle import GROUP_SETTLED
from uocr_core.models import Page, PageGroup
from uocr_core.transient import is_transient

log = structlog.get_logger(__name__)


def new_lease_token(worker_id: str) -> str:
    return f"{worker_id}/{secrets.token_hex(4)}"


class LeaseKeeper:
    """Renews ``lease_expires_at`` every third of the lease from a background thread, for at
    most ``deadline_seconds`` (the group's time limit). Past it the lease lapses even though
    the task is still alive: a group stuck in a thread (a hung render or engine call on a GPU
    worker's threads pool, where Celery's time limits do nothing) goes to another worker,
    counting an attempt, instead of holding its document forever."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        *,
        group_id: int,
        owner: str,
        lease_seconds: float,
        deadline_seconds: float | None = None,
    ) -> None:
        self.sessions = sessions
        self.group_id = group_id
        self.owner = owner
        self.lease_seconds = lease_seconds
        self.deadline_seconds = deadline_seconds
        self.renewals = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="lease-keeper", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        started = time.monotonic()
        while not self._stop.wait(self.lease_seconds / 3):
            if self._overran(started):
                return
            try:
                if not self.renew():
                    if self.lost():
                        log.warning("lease.lost", group_id=self.group_id, owner=self.owner)
                    return  # nothing of ours left to renew
            except Exception as error:  # a DB blip must not kill the group; the next tick retries
                log.warning("lease.renew_failed", group_id=self.group_id, error=str(error))

    def _overran(self, started: float) -> bool:
        if self.deadline_seconds is None or time.monotonic() - started < self.deadline_seconds:
            return False
        log.error(
            "page_group.overran",
            group_id=self.group_id,
            seconds=self.deadline_seconds,
            action="lease left to lapse: another worker takes the group",
        )
        return True

    def renew(self) -> bool:
        """False when the lease is no longer ours (it lapsed and the group was taken over)."""
        with transaction(self.sessions) as session:
            renewed = session.execute(
                update(PageGroup)
                .where(PageGroup.id == self.group_id, PageGroup.lease_owner == self.owner)
                .values(lease_expires_at=utcnow() + timedelta(seconds=self.lease_seconds))
            )
        self.renewals += 1
        return bool(getattr(renewed, "rowcount", 1))

    def lost(self) -> bool:
        """Whether a failed renewal means the group was taken over: not when it is settled
        (its task recorded it just before stopping this keeper, a race seen at 128 groups)."""
        with self.sessions() as session:
            status = session.scalar(select(PageGroup.status).where(PageGroup.id == self.group_id))
        return status not in GROUP_SETTLED


class HeldClaims:
    """A worker's claims while their groups run: each one's lease renewed (LeaseKeeper), and
    given back at once when its task fails in a way that is retried. A claim whose release
    failed (the database was down) is given back by the next task here, rather than held until
    its lease lapses; releases are token-fenced, so a late one is harmless."""

    def __init__(self, sessions: sessionmaker[Session], *, lease_seconds: float) -> None:
        self.sessions = sessions
        self.lease_seconds = lease_seconds
        self._unreleased: list[tuple[int, str]] = []  # (group id, lease token)
        self._lock = threading.Lock()

    @contextmanager
    def held(self, *, group_id: int, owner: str, deadline_seconds: float) -> Iterator[None]:
        """The claim's lease kept alive while the group runs (for ``deadline_seconds`` at
        most: its time limit), and given back if the task fails and will be retried."""
        try:
            with LeaseKeeper(
                self.sessions,
                group_id=group_id,
                owner=owner,
                lease_seconds=self.lease_seconds,
                deadline_seconds=deadline_seconds,
            ):
                yield
        except Exception as error:
            if is_transient(error):  # the task is retried: give the group back now
                self.release(group_id, owner)
            raise

    def release(self, group_id: int, owner: str) -> None:
        try:
            release_claim(self.sessions, group_id=group_id, owner=owner)
        except Exception as error:  # the database is still down: the task's retry releases it
            log.warning("page_group.release_failed", error=str(error))
            with self._lock:
                self._unreleased.append((group_id, owner))

    def release_waiting(self) -> None:
        """The claims whose release failed before, given back now."""
        with self._lock:
            waiting, self._unreleased = self._unreleased, []
        for group_id, owner in waiting:
            self.release(group_id, owner)


def release_claim(sessions: sessionmaker[Session], *, group_id: int, owner: str) -> bool:
    """Give a claimed group back at once (a transient failure: the task will be retried),
    rather than let its lease lapse. The attempt is not counted against the document."""
    with transaction(sessions) as session:
        group = session.scalar(
            select(PageGroup)
            .where(PageGroup.id == group_id, PageGroup.lease_owner == owner)
            .with_for_update()
        )
        if group is None or group.status != "running":
            return False
        group.attempts = max(0, group.attempts - 1)
        return_to_pending(session, group)
        return True


def return_to_pending(session: Session, group: PageGroup) -> None:
    """The group and its running pages back to pending, no longer leased: claimable again."""
    group.status, group.lease_owner, group.lease_expires_at = "pending", None, None
    pages = session.scalars(
        select(Page).where(
            Page.job_id == group.job_id,
            Page.position.between(group.first_position, group.last_position),
            Page.status == "running",
        )
    )
    for page in pages:
        page.status = "pending"


def cancel_group(session: Session, group: PageGroup) -> None:
    """A group of a job that ended without it: it and its unsettled pages say canceled."""
    group.status, group.lease_owner, group.lease_expires_at = "canceled", None, None
    pages = session.scalars(
        select(Page).where(
            Page.job_id == group.job_id,
            Page.position.between(group.first_position + group.overlap, group.last_position),
            Page.status.in_(("pending", "running")),
        )
    )
    for page in pages:
        page.status = "canceled"
