"""The year of a log's stage times when its lines carry none.

vLLM prints ``MM-DD hh:mm:ss``: without a year, ISO 8601 can only say ``--MM-DDThh:mm:ss``, which neither
``datetime.fromisoformat`` nor jq reads. Every line of a file was written before the file's last change,
and a start-up spans days, not a year: so each time is the latest date with its month and day that is not
after the file's date (a day of slack for node clocks in other time zones). A Dec 31 -> Jan 1 rollover
inside the log falls out of that by itself.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

#: Where a timeline's years came from: the log's own lines, the file's modification time, or the time
#: the input was read (stdin from a pipe has no file date).
YearSource = Literal["log", "file_mtime", "read_time"]

_SLACK = dt.timedelta(days=1)


def dated(year_less: str, reference: dt.datetime) -> str:
    """``--MM-DDThh:mm:ss`` as the latest such date not after ``reference`` (plus a day's slack)."""
    limit = reference + _SLACK
    md_hms = year_less.removeprefix("--")
    for year in range(limit.year, limit.year - 9, -1):   # back to a leap year for a Feb 29
        try:
            when = dt.datetime.fromisoformat(f"{year:04d}-{md_hms}")
        except ValueError:
            continue
        if when <= limit:
            return when.isoformat()
    return year_less   # not a year-less time after all: left as it was


def date_stage_times(timeline_json: dict[str, Any], year_known: bool, reference_time: float,
                     source: YearSource) -> dict[str, Any]:
    """``TimelineSnapshot.to_json()`` with every year-less stage time given a year from ``reference_time``
    (epoch seconds: the file's mtime, or when it was read), and ``year_source`` saying which."""
    if year_known:
        return {**timeline_json, "year_source": "log"}
    reference = dt.datetime.fromtimestamp(reference_time)
    stages = [
        {**stage, **{key: dated(stage[key], reference) for key in ("started", "ended")
                     if isinstance(stage.get(key), str) and stage[key].startswith("--")}}
        for stage in timeline_json.get("stages", [])
    ]
    return {**timeline_json, "stages": stages, "year_source": source}
