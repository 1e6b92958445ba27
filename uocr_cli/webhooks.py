"""``uocr webhooks``: dead letters, deliveries that ran out of retries or were refused."""

from __future__ import annotations

import click

from uocr_cli.errors import CliError


@click.group()
def webhooks() -> None:
    """Webhook dead letters: deliveries that ran out of retries or were refused."""


@webhooks.command("failed")
@click.option("--tenant", default=None, help="Only this tenant's deliveries.")
def webhooks_failed(tenant: str | None) -> None:
    """List failed deliveries with their last answer."""
    from uocr_core.db import make_engine, make_session_factory
    from uocr_core.settings import get_settings
    from uocr_core.webhooks.dead_letters import dead_letters

    with make_session_factory(make_engine(get_settings().database))() as session:
        for letter in dead_letters(session, tenant_name=tenant):
            answer = letter.last_status_code or letter.last_error
            click.echo(
                f"{letter.delivery_id}  job={letter.job_id}  {letter.tenant_name}  "
                f"{letter.event_type}  attempts={letter.attempts}  last={answer}  {letter.url}"
            )


@webhooks.command("resend")
@click.argument("delivery_ids", nargs=-1)
@click.option("--all-failed", is_flag=True, help="Every failed delivery (of --tenant).")
@click.option("--tenant", default=None, help="With --all-failed: only this tenant's.")
def webhooks_resend(delivery_ids: tuple[str, ...], all_failed: bool, tenant: str | None) -> None:
    """Send failed deliveries again: the same event, a fresh set of retries."""
    from uocr_cli.preflight import require_broker
    from uocr_core.celery_app import make_celery
    from uocr_core.db import make_engine, make_session_factory, transaction
    from uocr_core.dispatch import CeleryDispatcher
    from uocr_core.errors import InvalidRequest
    from uocr_core.settings import get_settings
    from uocr_core.webhooks.dead_letters import dead_letters, mark_for_resend

    settings = get_settings()
    if bool(delivery_ids) == all_failed:
        raise click.UsageError("give delivery ids or --all-failed, not both or neither")
    require_broker(settings)  # before marking: a delivery marked but never sent would wait
    sessions = make_session_factory(make_engine(settings.database))
    try:
        with transaction(sessions) as session:
            ids = list(delivery_ids) or [
                d.delivery_id for d in dead_letters(session, tenant_name=tenant)
            ]
            resent = mark_for_resend(session, ids)
    except InvalidRequest as error:
        raise CliError(str(error)) from None
    dispatcher = CeleryDispatcher(make_celery(settings), settings.group_time_limit)
    for delivery_id in resent:
        dispatcher.enqueue_webhook(delivery_id=delivery_id)
        click.echo(f"resent {delivery_id}")
