"""Operators' set-up commands: the schema, the bucket, API keys."""

from __future__ import annotations

import click

from uocr_cli.errors import CliError


@click.group()
def db() -> None:
    """Database schema."""


@db.command()
def upgrade() -> None:
    """Apply the Alembic migrations."""
    from ocr_api.core.migrate import upgrade as apply
    from ocr_api.core.settings import get_settings

    apply(get_settings().database.url)
    click.echo("database at head")


@click.group()
def storage() -> None:
    """Object storage."""


@storage.command("init")
def storage_init() -> None:
    """Create the bucket if it does not exist."""
    from ocr_api.core.settings import get_settings
    from ocr_api.core.storage import S3ObjectStore

    S3ObjectStore(get_settings().s3).ensure_bucket()
    click.echo("bucket ready")


@click.group()
def keys() -> None:
    """API keys."""


@keys.command("create")
@click.option("--tenant", required=True, help="Tenant name; created if new.")
def keys_create(tenant: str) -> None:
    """Create an API key (shown once; stored hashed)."""
    from ocr_api.core.db import transaction
    from ocr_api.core.tenants import create_key

    with transaction(_sessions()) as session:
        created = create_key(session, tenant_name=tenant)
    click.echo(f"tenant_id={created.tenant_id}")
    click.echo(f"api_key={created.api_key}")
    click.echo(f"webhook_secret={created.webhook_secret}")


@keys.command("list")
@click.option("--tenant", default=None, help="Only this tenant's keys.")
def keys_list(tenant: str | None) -> None:
    """List keys by prefix (the keys themselves are not stored)."""
    from ocr_api.core.tenants import list_keys

    with _sessions()() as session:
        for key in list_keys(session, tenant_name=tenant):
            state = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "active"
            click.echo(f"{key.prefix}  {key.tenant_name}  {key.created_at:%Y-%m-%d %H:%M}  {state}")


@keys.command("revoke")
@click.argument("prefix")
def keys_revoke(prefix: str) -> None:
    """Revoke the key starting with PREFIX (its first 12 characters, as `keys list` shows)."""
    from ocr_api.core.db import transaction
    from ocr_api.core.errors import NotFound
    from ocr_api.core.tenants import revoke_key

    try:
        with transaction(_sessions()) as session:
            key = revoke_key(session, prefix)
    except NotFound as error:
        raise CliError(error.message) from None
    click.echo(f"revoked {key.prefix} of tenant {key.tenant_name}")


def _sessions():  # type: ignore[no-untyped-def]
    """Sessions on the configured database (errors reaching it are the group's to explain)."""
    from ocr_api.core.db import make_engine, make_session_factory
    from ocr_api.core.settings import get_settings

    return make_session_factory(make_engine(get_settings().database))
