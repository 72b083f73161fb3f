"""Log bytes in, records and a stage timeline out: the demo's use of the real parser and stage machine.

It is the same path a real head's log takes (``LogReader`` → ``LogRecord`` → ``Timeline``); the only thing
added is naming nodes: Ray prints a worker node's IP, the dashboard shows the node's name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from sparktui.domain.logs import LogReader, LogRecord
from sparktui.domain.logs.stages import Timeline, TimelineSnapshot


class TimelineFeed:
    def __init__(
        self, node_names: Mapping[str, str] | None = None, expected_nodes: int | None = None
    ) -> None:
        self.reader = LogReader()
        self.node_names = dict(node_names or {})
        self.timeline = Timeline(expected_nodes=expected_nodes)
        self._last_snapshot: TimelineSnapshot = self.timeline.snapshot()

    def feed(self, lines: Sequence[str], now: float) -> list[LogRecord]:
        data = ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
        records = [self._named(r) for r in self.reader.feed(data)]
        for record in records:
            self.timeline.feed(record, now)
        # At ``now``: a running stage's seconds are the clock's since it began, as a live dashboard counts
        # them (not up to its last stamped line: a progress bar's lines carry no stamp).
        self._last_snapshot = self.timeline.snapshot(now)
        return records

    @property
    def ready(self) -> bool:
        return self._last_snapshot.outcome == "ready"

    @property
    def failed(self) -> bool:
        return self._last_snapshot.outcome == "failed"

    @property
    def vllm_version(self) -> str | None:
        return self._last_snapshot.vllm_version

    def _named(self, record: LogRecord) -> LogRecord:
        if record.node and record.node in self.node_names:
            return dataclasses.replace(record, node=self.node_names[record.node])
        return record

    def snapshot(self) -> TimelineSnapshot:
        return self._last_snapshot

    def running_stage(self) -> str | None:
        return self._last_snapshot.current

    def detail(self) -> str:
        """``weights 7/30`` for the running stage when it has a count."""
        current = self._last_snapshot.current
        if current is None:
            return ""
        progress = self._last_snapshot.stage(current).progress
        return f"{current} {progress.done}/{progress.total}" if progress else ""
