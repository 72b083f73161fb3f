"""Every time a verb writes to JSON must be read back by ``datetime.fromisoformat`` (or be a number of
seconds): a walker that finds each one and says where a time is not."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

#: A value that looks like a date or a time of day: ISO 8601 (with or without a year) or ``MM-DD hh:mm``.
_TIME_LIKE = re.compile(r"(?:\d{4}-|--)?\d\d-\d\d[T ]\d\d:\d\d|^\d\d:\d\d:\d\d")
#: Keys that name a moment: their values are ISO 8601 text or seconds.
_TIME_KEY = re.compile(r"(?:^|_)(?:at|time|started|ended|since|when|timestamp)$")


def bad_times(value: Any, where: str = "$") -> list[str]:
    """The paths of every time in ``value`` that ``fromisoformat`` does not read (empty: all good)."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{where}.{key}"
            if _TIME_KEY.search(str(key)) and isinstance(item, str) and not _parses(item):
                found.append(f"{path} = {item!r}")
            else:
                found += bad_times(item, path)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += bad_times(item, f"{where}[{i}]")
    elif isinstance(value, str) and _TIME_LIKE.search(value) and len(value) <= 40 and not _parses(value):
        found.append(f"{where} = {value!r}")
    return found


def times_in(value: Any) -> list[str]:
    """Every ISO 8601 time in ``value`` (to show a test found some)."""
    if isinstance(value, dict):
        return [t for item in value.values() for t in times_in(item)]
    if isinstance(value, list):
        return [t for item in value for t in times_in(item)]
    return [value] if isinstance(value, str) and _TIME_LIKE.search(value) and _parses(value) else []


def _parses(text: str) -> bool:
    try:
        dt.datetime.fromisoformat(text)
    except ValueError:
        return False
    return True
