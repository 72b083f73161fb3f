"""Node-clock alignment: each record's ``MM-DD hh:mm:ss`` placed on one continuous time axis.

vLLM prints times without a year, in the emitting node's clock and time zone (reference §1.1: a worker
container on UTC, the head's ``vllm serve`` on local time). :class:`NodeClock` turns a record's
seconds-into-an-unknown-year into seconds on the head's axis: a node's time-zone step (whole half hours)
is learnt from its first line after the head has shown a time, and a jump back of more than half a year is
a year rollover (Dec 31 -> Jan 1). A calendar year seen on any line (a ``docker logs -t`` stamp, Ray's
logger, a JSON asctime) anchors the axis, so stage times can be written as ISO 8601 with their year.

The stage machine (:mod:`.stages`) owns "the last time seen"; this class only converts.
"""

from __future__ import annotations

import time as _time

from sparktui.domain.logs.line import LogRecord, md_hms

YEAR_SECONDS = 366 * 86400.0


class NodeClock:
    def __init__(self) -> None:
        # (calendar year, axis seconds) of the first line that carried a year: kept across restarts.
        self.year_base: tuple[int, float] | None = None
        self.reset()

    def reset(self) -> None:
        """A new start in the same log: node offsets and the rollover count are learnt again."""
        self._head_clock = False  # a head-node line has given a time
        self._tz_offsets: dict[str, float] = {}  # node -> its clock minus the head's (half hours)
        self._year_offset = 0.0

    @property
    def year_known(self) -> bool:
        return self.year_base is not None

    def place(self, rec: LogRecord, seconds: float, last_s: float | None) -> tuple[float, str]:
        """``rec``'s time (``seconds``, its own clock) as (axis seconds, ``MM-DD hh:mm:ss`` in the head's
        clock). ``last_s`` is the latest axis time seen so far (None: none yet)."""
        offset = self._node_offset(rec, seconds, last_s)
        t_axis = self._axis(seconds - offset, last_s)
        t = rec.time or ""
        t = t[5:] if len(t) == 19 else t  # Ray's "YYYY-MM-DD hh:mm:ss" -> "MM-DD hh:mm:ss"
        if offset:
            t = md_hms(seconds - offset)  # shown in the head's clock
        if rec.year is not None and self.year_base is None:
            self.year_base = (rec.year, t_axis)
        return t_axis, t

    def _node_offset(self, rec: LogRecord, seconds: float, last_s: float | None) -> float:
        """A node's line after the head has shown a time gives its offset in whole half hours (time zones)
        when it is within 5 min of one: clocks that agree to within minutes, and Ray's dedup delays, give 0;
        a copy held back longer is no estimate."""
        node = rec.node
        if node is None:
            self._head_clock = True
            return 0.0
        offset = self._tz_offsets.get(node)
        if offset is None:
            if not self._head_clock or last_s is None:
                return 0.0
            skew = seconds + self._year_offset - last_s
            offset = round(skew / 1800) * 1800.0
            if abs(skew - offset) > 300:
                return 0.0  # not a clean time-zone step (a copy Ray held back for long): ask the next line
            self._tz_offsets[node] = offset
        return offset

    def _axis(self, sec: float, last_s: float | None) -> float:
        """Place a year-free time on a continuous axis (handles Dec 31 -> Jan 1)."""
        t = sec + self._year_offset
        if last_s is not None:
            if t < last_s - YEAR_SECONDS / 2:
                self._year_offset += YEAR_SECONDS
                t += YEAR_SECONDS
            elif t > last_s + YEAR_SECONDS / 2:
                t -= YEAR_SECONDS  # a late line from before the rollover
        return t

    def iso(self, md: str | None, axis: float | None, wall: float | None) -> str | None:
        """ISO 8601 for a stage time: with the year where the log gave one, else year-less."""
        if md is not None and len(md) == 14:
            date, hms = md[:5], md[6:]
            if self.year_base is not None and axis is not None:
                year0, axis0 = self.year_base
                year = year0 + int(axis // YEAR_SECONDS) - int(axis0 // YEAR_SECONDS)
                return f"{year:04d}-{date}T{hms}"
            return f"--{date}T{hms}"
        if wall is not None:
            return _time.strftime("%Y-%m-%dT%H:%M:%S", _time.localtime(wall))
        return None
