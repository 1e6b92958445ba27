"""Operators' set-up commands: the schema, the bucket, API keys (created, listed, rotated,
revoked; each written to the audit log)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from uocr_cli.durations import parse_duration
from uocr_cli.errors import CliError

if TYPE_CHECKING:
    from uocr_core.tenants import KeyInfo


@click.group()
def db() -> None:
    """Database schema."""


@db.command()
def upgrade() -> None:
    """Apply the Alembic migrations."""
    from uocr_core.migrate import upgrade as apply
    from uocr_core.settings import get_settings

    apply(get_settings().database.url)
    click.echo("database at head")


@click.group()
def storage() -> None:
    """Object storage."""


@storage.command("init")
def storage_init() -> None:
    """Create the bucket if it does not exist."""
    from uocr_core.settings import get_settings
    from uocr_core.storage import S3ObjectStore

    S3ObjectStore(get_settings().s3).ensure_bucket()
    click.echo("bucket ready")


@click.group()
def keys() -> None:
    """API keys."""


@keys.command("create")
@click.option("--tenant", required=True, help="Tenant name; created if new.")
@click.option("--expires-in", default=None, help="Lifetime, like 90d or 12h (default: never).")
def keys_create(tenant: str, expires_in: str | None) -> None:
    """Create an API key (shown once; stored hashed)."""
    from uocr_core.db import transaction
    from uocr_core.tenants import create_key

    lifetime = None if expires_in is None else parse_duration(expires_in, option="--expires-in")
    with transaction(sessions()) as session:
        created = create_key(session, tenant_name=tenant, expires_in=lifetime)
    click.echo(f"tenant_id={created.tenant_id}")
    click.echo(f"api_key={created.api_key}")
    click.echo(f"webhook_secret={created.webhook_secret}")
    click.echo(f"expires_at={_moment(created.expires_at)}")


@keys.command("list")
@click.option("--tenant", default=None, help="Only this tenant's keys.")
def keys_list(tenant: str | None) -> None:
    """List keys by prefix (the keys themselves are not stored), with their expiry."""
    from uocr_core.tenants import list_keys

    with sessions()() as session:
        for key in list_keys(session, tenant_name=tenant):
            created = _moment(key.created_at)
            click.echo(f"{key.prefix}  {key.tenant_name}  {created}  {_state(key)}")


@keys.command("revoke")
@click.argument("prefix")
def keys_revoke(prefix: str) -> None:
    """Revoke the key starting with PREFIX (its first 12 characters, as `keys list` shows)."""
    from uocr_core.db import transaction
    from uocr_core.errors import NotFound
    from uocr_core.tenants import revoke_key

    try:
        with transaction(sessions()) as session:
            key = revoke_key(session, prefix)
    except NotFound as error:
        raise CliError(error.message) from None
    click.echo(f"revoked {key.prefix} of tenant {key.tenant_name}")


@keys.command("rotate")
@click.argument("prefix")
@click.option(
    "--overlap", default="7d", show_default=True, help="How long the old key keeps working."
)
@click.option("--expires-in", default=None, help="The new key's lifetime (default: the old key's).")
def keys_rotate(prefix: str, overlap: str, expires_in: str | None) -> None:
    """Issue a new key for PREFIX's tenant; the old key works until the overlap ends."""
    from uocr_core.db import transaction
    from uocr_core.errors import Conflict, NotFound
    from uocr_core.tenants import rotate_key

    lifetime = None if expires_in is None else parse_duration(expires_in, option="--expires-in")
    window = parse_duration(overlap, option="--overlap")
    try:
        with transaction(sessions()) as session:
            rotation = rotate_key(session, prefix, overlap=window, expires_in=lifetime)
    except (NotFound, Conflict) as error:
        raise CliError(error.message) from None
    click.echo(f"api_key={rotation.new.api_key}")
    click.echo(f"expires_at={_moment(rotation.new.expires_at)}")
    click.echo(f"old_key={rotation.old.prefix}  works until {_moment(rotation.old.expires_at)}")


def _state(key: KeyInfo) -> str:
    from uocr_core.db import utcnow

    if key.revoked_at:
        return f"revoked {_moment(key.revoked_at)}"
    if key.expires_at is None:
        return "active, never expires"
    if key.expires_at <= utcnow():
        return f"expired {_moment(key.expires_at)}"
    return f"active, expires {_moment(key.expires_at)}"


def _moment(moment: datetime | None) -> str:
    return "never" if moment is None else f"{moment.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


def sessions():  # type: ignore[no-untyped-def]
    """Sessions on the configured database (errors reaching it are the group's to explain)."""
    from uocr_core.db import make_engine, make_session_factory
    from uocr_core.settings import get_settings

    return make_session_factory(make_engine(get_settings().database))
