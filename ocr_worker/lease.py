"""Keeps a page group's lease alive while it runs, so a dead worker's group can be taken over."""

from __future__ import annotations

import threading
from datetime import timedelta
from types import TracebackType

import structlog
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from ocr_api.core.db import transaction, utcnow
from ocr_api.core.models import PageGroup

log = structlog.get_logger(__name__)


class LeaseKeeper:
    """Renews ``lease_expires_at`` every third of the lease from a background thread."""

    def __init__(
        self, sessions: sessionmaker[Session], *, group_id: int, owner: str, lease_seconds: int
    ) -> None:
        self.sessions = sessions
        self.group_id = group_id
        self.owner = owner
        self.lease_seconds = lease_seconds
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
        while not self._stop.wait(self.lease_seconds / 3):
            try:
                self.renew()
            except Exception as error:  # a DB blip must not kill the group; the next tick retries
                log.warning("lease.renew_failed", group_id=self.group_id, error=str(error))

    def renew(self) -> None:
        with transaction(self.sessions) as session:
            session.execute(
                update(PageGroup)
                .where(PageGroup.id == self.group_id, PageGroup.lease_owner == self.owner)
                .values(lease_expires_at=utcnow() + timedelta(seconds=self.lease_seconds))
            )
