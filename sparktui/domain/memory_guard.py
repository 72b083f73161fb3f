"""The memory guard: stop vLLM before a node runs out of unified memory.

On a DGX Spark the GPU and the CPU share one pool; a start that asks for more than is there does not fail
cleanly, it drives the head into swap storms or a hard reset (issue 10: "memory exhaustion during start
hard-resets the head"). The guard watches every node's telemetry samples while the engine starts or serves
and trips when ``MemAvailable`` drops below ``engine.memory_floor`` or PSI memory ``full avg10`` reaches
``engine.memory_psi_full``. Whoever feeds it (the dashboard's backend, ``start --wait``) stops vLLM on a
trip and says the :class:`MemoryTrip` message: the node, the figure, and its last minute.

Pure code: fed :class:`sparktui.domain.telemetry.Sample` objects, no I/O.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from sparktui.domain.telemetry import Sample

GIB = 1024**3
#: Seconds of memory history kept per node (the curve a trip shows).
WINDOW_S = 60.0
#: Points of that curve in the message (one per ~10 s of a minute).
CURVE_POINTS = 7


@dataclass(frozen=True)
class MemoryPoint:
    """One node's memory at one sample: node wall time, MemAvailable (bytes), PSI full avg10 (%)."""

    wall: float
    available: int | None
    psi_full_avg10: float | None


@dataclass(frozen=True)
class MemoryTrip:
    """Why the guard stopped vLLM: which node, which limit, and that node's last minute."""

    node: str
    reason: str                      # "floor" | "pressure"
    available: int | None
    floor: int
    psi_full_avg10: float | None
    psi_limit: float
    curve: tuple[MemoryPoint, ...]

    @property
    def message(self) -> str:
        if self.reason == "floor":
            what = (f"MemAvailable {_gib(self.available)} below the floor {_gib(self.floor)}"
                    " (engine.memory_floor)")
        else:
            what = (f"memory pressure: PSI full avg10 {self.psi_full_avg10:.1f} % ≥ {self.psi_limit:g} %"
                    " (engine.memory_psi_full)")
        return (f"memory guard: {self.node} {what}; vLLM stopped before the host runs out. "
                f"{self.node} over the last minute: {self.curve_text()}")

    def curve_text(self) -> str:
        """MemAvailable over the window, at most ``CURVE_POINTS`` readings, oldest first, in GiB."""
        points = [p for p in self.curve if p.available is not None]
        if not points:
            return "no readings"
        if len(points) > CURVE_POINTS:
            step = (len(points) - 1) / (CURVE_POINTS - 1)
            points = [points[round(i * step)] for i in range(CURVE_POINTS)]
        span = points[-1].wall - points[0].wall
        figures = " → ".join(f"{(p.available or 0) / GIB:.1f}" for p in points)
        return f"{figures} GiB available ({span:.0f} s)"

    def to_json(self) -> dict[str, object]:
        return {"node": self.node, "reason": self.reason, "available": self.available, "floor": self.floor,
                "psi_full_avg10": self.psi_full_avg10, "message": self.message,
                "curve": [{"wall": p.wall, "available": p.available, "psi_full_avg10": p.psi_full_avg10}
                          for p in self.curve]}


def _gib(value: int | None) -> str:
    return "unknown" if value is None else f"{value / GIB:.1f} GiB"


class MemoryGuard:
    """Per node: the last minute of memory readings, and the rule that trips (once, until re-armed)."""

    def __init__(self, floor: int, psi_full_limit: float, window: float = WINDOW_S) -> None:
        self.floor = int(floor)
        self.psi_full_limit = float(psi_full_limit)
        self.window = window
        self._points: dict[str, deque[MemoryPoint]] = {}
        self.tripped: MemoryTrip | None = None

    @property
    def enabled(self) -> bool:
        return self.floor > 0 or self.psi_full_limit > 0

    def rearm(self) -> None:
        """A new start: a past trip no longer holds (the history stays: it is still the last minute)."""
        self.tripped = None

    def observe(self, node: str, sample: Sample, *, armed: bool = True) -> MemoryTrip | None:
        """Record ``sample``; return a trip the first time a limit is crossed while ``armed``."""
        mem = sample.memory
        psi = mem.pressure.full_avg10 if mem.pressure is not None else None
        point = MemoryPoint(sample.wall, mem.available, psi)
        ring = self._points.setdefault(node, deque())
        ring.append(point)
        while ring and point.wall - ring[0].wall > self.window:
            ring.popleft()
        if not armed or self.tripped is not None or not self.enabled:
            return None
        reason = None
        if self.floor > 0 and mem.available is not None and mem.available < self.floor:
            reason = "floor"
        elif self.psi_full_limit > 0 and psi is not None and psi >= self.psi_full_limit:
            reason = "pressure"
        if reason is None:
            return None
        self.tripped = MemoryTrip(node=node, reason=reason, available=mem.available, floor=self.floor,
                                  psi_full_avg10=psi, psi_limit=self.psi_full_limit, curve=tuple(ring))
        return self.tripped

    def curve(self, node: str) -> tuple[MemoryPoint, ...]:
        return tuple(self._points.get(node, ()))
