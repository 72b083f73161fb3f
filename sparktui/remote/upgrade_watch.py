"""Another sparktui's ``sparktui upgrade``, as the dashboard follows it: its record on the head
(``sparktui.domain.upgrade.progress``) read beside the operation lock's look — at the supervisor's pace
while nothing upgrades, at the lock's while an upgrade runs (its record beats, or its hold of the lock says
so) — its stages shown as the running operation, and each read posted (``UpgradeSeen``: the one line that
stays once it is over)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from sparktui.domain.events import Event, OperationView, UpgradeSeen
from sparktui.domain.lifecycle.oplock import LockHolder
from sparktui.domain.presence import HEARTBEAT_EVERY
from sparktui.domain.upgrade.progress import UpgradeRecord
from sparktui.domain.upgrade_view import UPGRADE_KIND, upgrade_operation
from sparktui.remote.transport import TransportError

#: Seconds between reads of the record while no upgrade runs (as the supervisor's presence is read).
IDLE_READ_EVERY = HEARTBEAT_EVERY


class UpgradeWatch:
    def __init__(self, read: Callable[[], Awaitable[UpgradeRecord | None]],
                 post: Callable[[Event], None]) -> None:
        self._read = read
        self._post = post
        self._read_at = float("-inf")   # monotonic
        self.record: UpgradeRecord | None = None

    async def look(self, holder: LockHolder | None) -> OperationView | None:
        """The running upgrade's stages as an operation (``None``: no upgrade runs now). The record is read
        when due: every look while one runs, else every ``IDLE_READ_EVERY`` s."""
        held = holder is not None and holder.kind == UPGRADE_KIND
        now = time.monotonic()
        if held or self._running(time.time()) or now - self._read_at >= IDLE_READ_EVERY:
            self._read_at = now
            try:
                self.record = await self._read()
            except TransportError:
                pass   # not read now: what was read last stands
            else:
                line = self.record.shown_line(time.time()) if self.record is not None else None
                self._post(UpgradeSeen(*line) if line is not None else UpgradeSeen(None))
        record = self.record
        wall = time.time()
        if record is None or not record.known or record.outcome is not None:
            return None
        # Its own hold of the lock says it runs even when a heartbeat was late (a slow link to the head).
        if self._running(wall) or (held and holder is not None and (record.host, record.pid)
                                   == (holder.host, holder.pid)):
            return upgrade_operation(record, wall, running=True)
        return None

    def ended(self, now: float) -> OperationView | None:
        """The upgrade's end as the last view of its operation: its outcome as the message (or, silent
        without one, that it stopped mid-way); ``None`` when no record says."""
        record = self.record
        if record is None or not record.known or record.running(now):
            return None
        return upgrade_operation(record, now)

    def _running(self, wall: float) -> bool:
        return self.record is not None and self.record.running(wall)
