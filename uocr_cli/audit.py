"""``uocr audit``: the audit log, for operators. It reads the database directly, as the other
admin commands do; no API route serves it, so no tenant key can read it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click

from uocr_cli.admin import sessions
from uocr_cli.errors import CliError


@click.command("audit")
@click.option("--tenant", default=None, help="Only this tenant's events (by name).")
@click.option("--action", default=None, help="Only this action, like key.rotated.")
@click.option("--since", default=None, help="From this time on (ISO 8601; UTC if no zone).")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def audit(
    tenant: str | None, action: str | None, since: str | None, limit: int, as_json: bool
) -> None:
    """The newest audit events, oldest first: keys, submits, cancels, deletes, downloads,
    webhook resends, worker starts."""
    from uocr_core.audit import AuditFilter, events

    with sessions()() as session:
        query = AuditFilter(
            tenant_id=_tenant_id(session, tenant),
            action=_action(action),
            since=_since(since),
            limit=limit,
        )
        for event in events(session, query):
            row = _as_dict(event)
            click.echo(json.dumps(row, sort_keys=True) if as_json else _as_line(row))


def _tenant_id(session: Any, name: str | None) -> str | None:
    from sqlalchemy import select

    from uocr_core.models import Tenant

    if name is None:
        return None
    tenant_id = session.scalar(select(Tenant.id).where(Tenant.name == name))
    if tenant_id is None:
        raise CliError(f"--tenant: no tenant named {name!r} (uocr keys list shows them)")
    return str(tenant_id)


def _action(name: str | None) -> str | None:
    from uocr_core.audit import Action

    known = [action.value for action in Action]
    if name is not None and name not in known:
        raise CliError(f"--action: unknown action {name!r}; one of {', '.join(known)}")
    return name


def _since(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"--since takes an ISO 8601 time like 2026-12-01T08:00Z, got {text!r}"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _as_dict(event: Any) -> dict[str, Any]:
    return {
        "id": event.id,
        "occurred_at": event.occurred_at.astimezone(UTC).isoformat(),
        "actor": event.actor,
        "tenant_id": event.tenant_id,
        "action": event.action,
        "target": event.target,
        "request_id": event.request_id,
        "detail": event.detail,
    }


def _as_line(row: dict[str, Any]) -> str:
    detail = dict(row["detail"])
    detail.pop("settings", None)  # a worker's whole settings: read them with --json
    parts = [
        row["occurred_at"][:19] + "Z",
        row["action"],
        row["target"] or "-",
        row["actor"],
        f"request={row['request_id']}" if row["request_id"] else "",
        json.dumps(detail, sort_keys=True) if detail else "",
    ]
    return "  ".join(part for part in parts if part)
