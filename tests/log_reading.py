"""How the dashboard reads a log: tailed in chunks, record by record (LogReader + Timeline.feed)."""

from __future__ import annotations

from sparktui.domain.logs import LogReader, Timeline, TimelineSnapshot


def read_live(data: bytes, chunk: int) -> TimelineSnapshot:
    """The snapshot of ``data`` fed ``chunk`` bytes at a time, as a live tail sees it."""
    reader, live = LogReader(), Timeline()
    for i in range(0, len(data), chunk):
        for rec in reader.feed(data[i : i + chunk]):
            live.feed(rec)
    for rec in reader.flush():
        live.feed(rec)
    return live.snapshot()
