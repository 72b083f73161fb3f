"""What the streaming watches (``ray_probe`` and ``peer_reach`` with ``changes``) print: a reading only when
it differs from the last one printed, or ``HEARTBEAT`` seconds after it. The node still reads every
interval, so a change is told at once, and a quiet cluster costs the dashboard a line every ten seconds."""

from __future__ import annotations

#: Seconds after which an unchanged reading is printed again.
HEARTBEAT = 10.0


class ChangesOnly:
    """``due(key, now)``: whether a reading is printed at monotonic ``now`` (``key``: what matters of it,
    as text; a reading said to be due counts as printed)."""

    def __init__(self, heartbeat: float = HEARTBEAT) -> None:
        self.heartbeat = heartbeat
        self._printed: tuple[str, float] | None = None

    def due(self, key: str, now: float) -> bool:
        printed = self._printed
        if printed is not None and printed[0] == key and now - printed[1] < self.heartbeat:
            return False
        self._printed = (key, now)
        return True
