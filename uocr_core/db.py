"""Database engine and sessions (SQLAlchemy 2). Postgres in the service, SQLite when embedded."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, Dialect, Engine, Text, TypeDecorator, create_engine, event
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.types import TypeEngine

from uocr_core.settings import DatabaseSettings


class Base(DeclarativeBase):
    pass


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware on the way out, on SQLite too (which stores datetimes naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_result_value(self, value: datetime | None, dialect: object) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class SearchDocument(TypeDecorator[str]):
    """Postgres' ``tsvector`` (what full-text search indexes); text elsewhere, where nothing
    searches it (the embedded run's SQLite)."""

    impl = Text
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(TSVECTOR())
        return dialect.type_descriptor(Text())


def make_engine(settings: DatabaseSettings) -> Engine:
    if settings.url.startswith("sqlite"):
        engine = create_engine(settings.url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    # Pre-ping: a connection the server dropped (a restart, a failover) is replaced before use
    # rather than failing the request. A bounded connect: a request answers 503, not hangs.
    return create_engine(
        settings.url,
        pool_size=settings.pool_size,
        pool_pre_ping=True,
        pool_timeout=10,
        connect_args={"connect_timeout": 5},
    )


def _sqlite_pragmas(dbapi_connection: object, _record: object) -> None:
    cursor = dbapi_connection.cursor()  # type: ignore[attr-defined]
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session that commits on success and rolls back on error."""
    with factory() as session, session.begin():
        yield session
