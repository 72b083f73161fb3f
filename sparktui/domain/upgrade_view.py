"""An upgrade's record (``progress``) as the dashboard shows an operation: its stages as the steps of an
``OperationView``, so the step list a start's steps use shows them too."""

from __future__ import annotations

from sparktui.domain.events import OperationView, StepStatus, StepView
from sparktui.domain.upgrade.progress import UpgradeRecord

#: The operation's kind, as the operation lock names an upgrade's hold (``EngineController.hold``).
UPGRADE_KIND = "upgrade"

#: A finished stage's message in the step list: its first clause, at most this many characters (the
#: column is narrow; the running stage's and a failed one's are whole, and ``sparktui status`` has all).
DONE_MESSAGE_CHARS = 36

_STEP_STATUS = {"pending": StepStatus.PENDING, "running": StepStatus.RUNNING, "ok": StepStatus.OK,
                "failed": StepStatus.FAILED, "skipped": StepStatus.SKIPPED}


def upgrade_operation(record: UpgradeRecord, now: float, *, running: bool | None = None) -> OperationView:
    """Its stages as steps (a running one with its time so far); while it runs (``running``: as its phase
    says, unless the caller knows better) the headline is the message, then its outcome."""
    steps = tuple(
        StepView(name=s.name, status=_STEP_STATUS.get(s.status, StepStatus.PENDING),
                 message=short(s.message) if s.status in ("ok", "skipped") else s.message,
                 seconds=max(0.0, now - s.since) if s.status == "running" and s.since is not None
                 else s.seconds)
        for s in record.stages)
    if record.running(now) if running is None else running:
        return OperationView(UPGRADE_KIND, steps, running=True, message=record.headline(),
                             started=record.started)
    return OperationView(UPGRADE_KIND, steps, running=False, ok=record.serving_after,
                         message=record.outcome_line(now), started=record.started)


def short(message: str) -> str:
    """``vLLM 0.23.0: every flag …; Qwen3… is in its registry`` → its first clause, cut to
    ``DONE_MESSAGE_CHARS`` with an ellipsis."""
    first = message.split("; ", 1)[0]
    return first if len(first) <= DONE_MESSAGE_CHARS else first[: DONE_MESSAGE_CHARS - 1].rstrip() + "…"
