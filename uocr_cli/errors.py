"""What an operator sees when a command fails: one line naming what could not be reached and
the setting that names it, exit code 1, no traceback (``uocr --debug`` shows it)."""

from __future__ import annotations

import re
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

import click


class CliError(click.ClickException):
    """A command refused or failed for a reason the operator can act on."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True, file=file)


def redact(url: str) -> str:
    """The URL without its password: it goes to terminals and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.netloc.rsplit("@", 1)[0].split(":", 1)[0]
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def reason(error: BaseException) -> str:
    """The useful end of a driver's message: 'connection refused', not three lines of it."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    # psycopg: 'connection to server at "127.0.0.1", port 1 failed: Connection refused'
    text = text.rsplit(" failed: ", 1)[-1].strip()
    # redis: 'Error 111 connecting to 127.0.0.1:2. Connection refused.'
    if connecting := re.fullmatch(r"Error -?\d+ connecting to \S+?\. (.+?)\.?", text):
        text = connecting.group(1)
    return text[:1].lower() + text[1:]


def database_unreachable(url: str, error: BaseException) -> str:
    return f"cannot reach the database at {redact(url)} (UOCR_DATABASE__URL): {reason(error)}"


def broker_unreachable(url: str, error: BaseException) -> str:
    return f"cannot reach the broker at {redact(url)} (UOCR_REDIS__URL): {reason(error)}"


def describe_failure(error: Exception) -> str:
    """One line for an exception that escaped a command."""
    from uocr_core.settings import SettingsError, get_settings

    if isinstance(error, SettingsError):
        return str(error)
    try:
        settings = get_settings()  # loaded already: the command got this far
        for describe in (_database, _broker, _object_store):
            if message := describe(error, settings):
                return message
    except Exception:  # explaining must never hide the failure itself
        pass
    if isinstance(error, OSError) and error.strerror:
        where = f" {error.filename}" if error.filename else ""
        return f"{error.strerror}:{where}"
    return f"{type(error).__name__}: {error} (uocr --debug ... shows the traceback)"


def _database(error: Exception, settings: Any) -> str | None:
    import psycopg
    from sqlalchemy import exc

    if not isinstance(error, exc.DBAPIError):
        return None
    url = settings.database.url
    if isinstance(error.orig, psycopg.OperationalError):
        return database_unreachable(url, error.orig)
    if isinstance(error.orig, psycopg.errors.UndefinedTable):
        return (
            f"the database at {redact(url)} (UOCR_DATABASE__URL) has no uocr tables "
            f"({reason(error.orig)}): run `uocr db upgrade`"
        )
    return None


def _broker(error: Exception, settings: Any) -> str | None:
    import kombu.exceptions
    import redis.exceptions

    broken = (
        kombu.exceptions.OperationalError,
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
    )
    if isinstance(error, broken):
        return broker_unreachable(settings.redis.url, error)
    return None


def _object_store(error: Exception, settings: Any) -> str | None:
    from botocore import exceptions

    from uocr_core.storage import StorageUnavailable

    if isinstance(error, StorageUnavailable) and isinstance(error.__cause__, Exception):
        error = error.__cause__  # botocore's own error says what failed
    s3 = settings.s3
    where = f"the object store at {s3.endpoint_url or 'AWS S3'}"
    unreachable = (exceptions.ConnectionError, exceptions.HTTPClientError)
    if isinstance(error, unreachable):
        return f"cannot reach {where} (UOCR_S3__ENDPOINT_URL): {reason(error)}"
    if isinstance(error, exceptions.NoCredentialsError):
        return f"{where} needs credentials (UOCR_S3__ACCESS_KEY_ID, UOCR_S3__SECRET_ACCESS_KEY)"
    if isinstance(error, exceptions.ClientError):
        detail = error.response.get("Error", {})
        return (
            f"{where} (UOCR_S3__ENDPOINT_URL, bucket {s3.bucket!r} UOCR_S3__BUCKET) refused: "
            f"{detail.get('Code', '?')}: {detail.get('Message', error)}"
        )
    return None
