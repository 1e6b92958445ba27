"""Durations as operators type them: ``90d``, ``12h``, ``30m``, ``2w``, ``45s``."""

from __future__ import annotations

import re
from datetime import timedelta

from uocr_cli.errors import CliError

_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_DURATION = re.compile(r"(\d+)([smhdw])")


def parse_duration(text: str, *, option: str) -> timedelta:
    """A positive duration, or a one-line error naming the option and the accepted form."""
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None or int(match.group(1)) == 0:
        raise CliError(
            f"{option} takes a positive number and a unit (s, m, h, d, w), like 90d or 12h; "
            f"got {text!r}"
        )
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
