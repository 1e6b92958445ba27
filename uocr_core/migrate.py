"""Applying the Alembic migrations programmatically (``uocr db upgrade``, embedded runs, tests),
and telling whether a database is at the code's head (``uocr api`` and ``uocr worker`` refuse to
start on one that is not)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class SchemaState:
    """The database's revisions against the migrations shipped with this code."""

    current: tuple[str, ...]  # empty: never migrated
    heads: tuple[str, ...]

    @property
    def at_head(self) -> bool:
        return set(self.current) == set(self.heads)


def _config(database_url: str) -> Config:
    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "migrations"))
    config.attributes["database_url"] = database_url
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    command.upgrade(_config(database_url), revision)


def schema_state(database_url: str, *, connect_timeout: int = 10) -> SchemaState:
    """Connects (a database that does not answer raises SQLAlchemy's OperationalError)."""
    heads = ScriptDirectory.from_config(_config(database_url)).get_heads()
    postgres = database_url.startswith("postgresql")
    engine = create_engine(
        database_url, connect_args={"connect_timeout": connect_timeout} if postgres else {}
    )
    try:
        with engine.connect() as connection:
            current = MigrationContext.configure(connection).get_current_heads()
    finally:
        engine.dispose()
    return SchemaState(current=tuple(current), heads=tuple(heads))
