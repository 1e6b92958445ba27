"""Results handed to a client, written to the audit log before the bytes leave: a download
the log cannot record is answered with the database's error (503), never sent unrecorded."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from uocr_core import audit
from uocr_core.db import transaction


def record_download(
    sessions: sessionmaker[Session], *, actor: audit.Actor, target: str, item: str, **detail: Any
) -> None:
    """``item``: result, result_link, page, page_image or batch_manifest."""
    with transaction(sessions) as session:
        audit.record(
            session, actor, audit.Action.RESULT_DOWNLOADED, target=target, item=item, **detail
        )
