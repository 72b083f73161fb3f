"""A moment as every ``--json`` writes it: ISO 8601 with its UTC offset (``datetime.fromisoformat`` and jq
read it), in the local time of the machine that writes it."""

from __future__ import annotations

import datetime as dt


def iso(epoch: float) -> str:
    """``epoch`` (seconds) as ``2026-12-04T12:47:03+00:00``."""
    return dt.datetime.fromtimestamp(epoch).astimezone().isoformat(timespec="seconds")
