"""Promote a new engine image or roll it back: its figures against the baseline's (pure).

The baseline is the image in use, measured just before the switch with the same short benchmark; a new
image is promoted when it serves (its smoke test answered) and its output tokens/s at every concurrency
measured is at least ``min_speed_ratio`` of the baseline's. With no baseline (nothing served before the
upgrade) serving is the only test, and the verdict says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sparktui.domain.bench import LevelResult


@dataclass(frozen=True)
class Figures:
    """What one image measured: did it serve, its smoke decode speed, output tok/s per concurrency."""

    served: bool
    smoke_tok_s: float | None = None
    #: concurrency → output tokens/s
    output_tok_s: dict[int, float] = field(default_factory=dict)
    error: str = ""

    @classmethod
    def of(cls, smoke_tok_s: float | None, levels: Sequence[LevelResult]) -> Figures:
        speeds = {lv.concurrency: lv.output_tok_s for lv in levels if lv.completed and lv.output_tok_s}
        return cls(True, smoke_tok_s, {c: s for c, s in speeds.items() if s is not None})

    def describe(self) -> str:
        if not self.served:
            return f"not serving: {self.error}"
        parts = [f"smoke {self.smoke_tok_s:.1f} tok/s" if self.smoke_tok_s else "smoke answered"]
        parts += [f"{speed:.1f} tok/s at {c}" for c, speed in sorted(self.output_tok_s.items())]
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"served": self.served, "smoke_tok_s": self.smoke_tok_s,
                "output_tok_s": {str(c): s for c, s in sorted(self.output_tok_s.items())},
                "error": self.error or None}


@dataclass(frozen=True)
class Verdict:
    promote: bool
    reason: str


def decide(baseline: Figures | None, candidate: Figures | None, min_speed_ratio: float) -> Verdict:
    if candidate is None or not candidate.served:
        why = candidate.error if candidate is not None else "unmeasured"
        return Verdict(False, f"the new image does not serve: {why}")
    if baseline is None or not baseline.served or not baseline.output_tok_s:
        return Verdict(True, "ready and its smoke test answered (no baseline: nothing served before)")
    slower = []
    side = []
    for c, before in sorted(baseline.output_tok_s.items()):
        after = candidate.output_tok_s.get(c)
        if after is None:
            slower.append(f"no figure at concurrency {c}")
            continue
        ratio = after / before if before else 1.0
        side.append(f"{before:.1f} → {after:.1f} tok/s at {c} ({ratio:.0%})")
        if ratio < min_speed_ratio:
            slower.append(f"{after:.1f} tok/s at concurrency {c} is {ratio:.0%} of {before:.1f}")
    if slower:
        return Verdict(False, f"slower than the image in use (needs ≥ {min_speed_ratio:.0%}): "
                              + "; ".join(slower))
    return Verdict(True, "serves at least as fast: " + "; ".join(side))
