"""The two-node hang, seen from the GPUs: one busy, its peer idle, for too long while the engine should be
working. Pure: the dashboard hands in the time, whether the engine should be working and each node's GPU
utilisation."""

from __future__ import annotations

from collections.abc import Mapping


class AsymmetryWatch:
    """Flags the classic two-node hang: one GPU busy, another idle, for longer than ``threshold`` seconds,
    while the engine should be working (a rank spinning in an NCCL collective its peer never joins)."""

    def __init__(self, threshold: float = 60.0, busy: float = 50.0, idle: float = 5.0) -> None:
        self.threshold = threshold
        self.busy = busy
        self.idle = idle
        self._since: float | None = None
        self._pair: tuple[str, str] | None = None

    def update(self, now: float, working: bool, utilisation: Mapping[str, float | None]) -> str | None:
        known = {n: u for n, u in utilisation.items() if u is not None}
        busy = sorted(n for n, u in known.items() if u >= self.busy)
        idle = sorted(n for n, u in known.items() if u <= self.idle)
        if not working or not busy or not idle:
            self._since = None
            self._pair = None
            return None
        pair = (busy[0], idle[0])
        if self._since is None or pair != self._pair:
            self._since, self._pair = now, pair
        held = now - self._since
        if held < self.threshold:
            return None
        return (f"GPU on {pair[0]} busy ({known[pair[0]]:.0f}%) while {pair[1]} idle ({known[pair[1]]:.0f}%) "
                f"for {held:.0f} s — a rank may be stuck waiting for its peer")
