"""The engine panel's one ETA during a start: the whole start's remaining time, from earlier runs of the same
model and image, and the history it rests on. Pure: the panel words it (``ui.widgets.engine_panel.eta_text``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sparktui.domain.events import StageView
from sparktui.domain.history import RunRecord, ready_eta, stage_eta, typical_ready_seconds


@dataclass(frozen=True)
class StartEta:
    """Either ``overdue`` (the running stage is slower than those runs: no remaining time can be known, and
    this says so with the stage's usual time) or ``ready_in`` seconds, with the runs' median time to ready
    (``typical``) over ``runs`` of them."""

    overdue: str | None = None
    ready_in: float | None = None
    typical: float | None = None
    runs: int = 0


def start_eta(views: Sequence[StageView], running: StageView | None, elapsed: float | None,
              runs: Sequence[RunRecord]) -> StartEta | None:
    """The start's ETA while ``running`` has run ``elapsed`` seconds; None without a running stage or an
    earlier run (``runs``: same model and image, oldest first)."""
    if running is None or not runs:
        return None
    fraction = (running.done or 0.0) / running.total if running.total else None
    eta = stage_eta(runs, running.name, elapsed or 0.0, fraction)
    if eta.overdue:
        return StartEta(overdue=eta.describe())
    ready = ready_eta(runs, running.name, elapsed or 0.0, fraction,
                      done=[v.name for v in views if v.status in ("done", "skipped")])
    if ready is None:
        return None
    typical, count = typical_ready_seconds(runs)
    return StartEta(ready_in=ready, typical=typical, runs=count)
