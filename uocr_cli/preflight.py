"""Checks a long-running process makes before it starts: a server that cannot reach its
database or broker should say so once and exit, not start and fail every request."""

from __future__ import annotations

from uocr_cli.errors import CliError, broker_unreachable, database_unreachable, redact
from uocr_core.settings import Settings

CONNECT_TIMEOUT_SECONDS = 5


def require_database(settings: Settings) -> None:
    """The database answers and is migrated to this code's head."""
    from sqlalchemy import exc

    from uocr_core.migrate import schema_state

    url = settings.database.url
    try:
        state = schema_state(url, connect_timeout=CONNECT_TIMEOUT_SECONDS)
    except exc.OperationalError as error:
        raise CliError(database_unreachable(url, error.orig or error)) from error
    if not state.at_head:
        current = ", ".join(state.current) or "none (an empty database)"
        raise CliError(
            f"the database at {redact(url)} (UOCR_DATABASE__URL) is at revision {current}, "
            f"not {', '.join(state.heads)}: run `uocr db upgrade`"
        )
    _require_search_language(settings)


def _require_search_language(settings: Settings) -> None:
    """search.language names a text-search configuration of this Postgres: a misspelt one
    would fail every page's recording (the index is written in its transaction)."""
    from uocr_core.search.index import known_languages

    if not settings.database.url.startswith("postgresql"):
        return
    known = known_languages(settings.database.url)
    if settings.search.language not in known:
        raise CliError(
            f"search.language {settings.search.language!r} (UOCR_SEARCH__LANGUAGE) is no "
            f"text-search configuration of the database; it has {', '.join(sorted(known))}"
        )


def require_broker(settings: Settings) -> None:
    """The broker (Redis) answers a ping."""
    import redis

    url = settings.redis.url
    client = redis.Redis.from_url(
        url, socket_connect_timeout=CONNECT_TIMEOUT_SECONDS, socket_timeout=CONNECT_TIMEOUT_SECONDS
    )
    try:
        client.ping()
    except redis.RedisError as error:
        raise CliError(broker_unreachable(url, error)) from error
    finally:
        client.close()
