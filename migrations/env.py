"""Alembic environment: the URL comes from uocr's settings (or the caller), never from the ini."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from uocr_core import models  # noqa: F401 - registers the tables on Base.metadata
from uocr_core.db import Base
from uocr_core.settings import get_settings

config = context.config
url = config.attributes.get("database_url") or get_settings().database.url


def run_migrations_offline() -> None:
    context.configure(url=url, target_metadata=Base.metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = create_engine(url)
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=Base.metadata,
            render_as_batch=url.startswith("sqlite"),
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
