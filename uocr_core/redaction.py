"""Settings as they may be written down (the audit log, a support ticket): every secret
replaced, every URL without its password, everything else as it is."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from uocr_core.settings import Settings

REDACTED = "[redacted]"
# A field whose name says it holds a credential; its value is never written down.
_SECRET_WORDS = ("secret", "password", "token", "access_key", "api_key", "private_key")


def redacted_settings(settings: Settings) -> dict[str, Any]:
    return _redact(settings.model_dump(mode="json"))  # type: ignore[no-any-return]


def _redact(value: Any, name: str = "") -> Any:
    if isinstance(value, dict):
        return {key: _redact(item, key) for key, item in value.items()}
    if isinstance(value, list):
        return [_redact(item, name) for item in value]
    if isinstance(value, str):
        if any(word in name.lower() for word in _SECRET_WORDS):
            return REDACTED
        return url_without_password(value)
    return value


def url_without_password(text: str) -> str:
    """``scheme://user:***@host/...`` for a URL with a password; anything else unchanged."""
    if "://" not in text or "@" not in text:
        return text
    try:
        parts = urlsplit(text)
        password = parts.password
    except ValueError:  # not a URL after all
        return text
    if password is None:
        return text
    user, host = parts.netloc.rsplit("@", 1)
    return urlunsplit(parts._replace(netloc=f"{user.split(':', 1)[0]}:***@{host}"))
