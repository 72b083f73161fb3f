"""What the dashboard shows of the engine, built on the producer side, and the producer that posts it.

A backend (SSH or demo) turns the log's ``TimelineSnapshot`` into a ``TimelineView`` (the seam's value type,
in ``sparktui.domain.events``) when it posts
``EngineChanged``: stage rows in the dashboard's order with labels and progress, the facts (vLLM version and
model among them), the failure with its hint, and when the running stage last moved. The UI renders it and
evaluates the stall at draw time (``stall_seconds(now)``), so "no progress for N min" keeps counting between
events. Only this module reads the snapshot's fields for the UI (public ones: ``stages``, ``facts``, …).

``EngineFeed`` is that producer on the real cluster: the log follower hands it the engine log's bytes, and
it posts ``EngineChanged`` (the engine session's state with the stage bars) whenever either moved.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import MappingProxyType

from sparktui.domain.engine_session import EngineSession
from sparktui.domain.events import EngineChanged, EventSink, FailureView, StageView, TimelineView
from sparktui.domain.logs import STAGE_LABELS, STAGES, LogIngest, Timeline, TimelineSnapshot


def timeline_view(snapshot: TimelineSnapshot) -> TimelineView:
    by_name = {s.name: s for s in snapshot.stages}
    stages = []
    for name in STAGES:
        s = by_name.get(name)
        if s is None:
            stages.append(StageView(name, STAGE_LABELS[name]))
            continue
        progress = s.progress
        stages.append(StageView(
            name=name, label=STAGE_LABELS[name], status=s.status or "pending", seconds=s.seconds,
            done=None if progress is None else float(progress.done),
            total=None if progress is None else float(progress.total),
        ))
    facts = dict(snapshot.facts)
    for key, value in (("vllm_version", snapshot.vllm_version), ("model", snapshot.model)):
        if value and key not in facts:
            facts[key] = value
    f = snapshot.failure
    failure = None if f is None else FailureView(f.kind or "unknown", f.stage, f.message, f.hint, f.node)
    # The snapshot's own rule (``TimelineSnapshot.stall_seconds``): a stall only while the start runs.
    last = snapshot.last_progress_at if snapshot.outcome == "incomplete" else None
    return TimelineView(snapshot.outcome, tuple(stages), MappingProxyType(facts), failure, last)


class EngineFeed:
    """The producer side of ``EngineChanged``: the engine log's ``LogIngest`` (every line into the stage
    machine) and the engine's ``EngineSession``, posted as one event.

    The log follower feeds it (``log_bytes``; ``log_reset`` for a new file, the next engine run). At each
    ``flush`` a timeline that moved goes into the session, and the stage bars are posted even when the
    state stays; a state moved by any other evidence is posted by ``publish_moved`` (the session's ``show``
    port). A caller that holds the session around ``flush`` settles it once, with what else it gives.
    """

    def __init__(self, session: EngineSession, log: LogIngest, post: EventSink,
                 clock: Callable[[], float] = time.time) -> None:
        self.session = session
        self.log = log
        self._post = post
        self._clock = clock
        self._moved = False
        self._published = -1
        self._last_posted: EngineChanged | None = None

    @property
    def timeline(self) -> Timeline:
        return self.log.timeline

    def log_bytes(self, data: bytes) -> None:
        if self.log.feed(data, self._clock()):
            self._moved = True

    def log_reset(self) -> None:
        """A new log file (a new engine run): a fresh timeline."""
        self.log.reset()
        self._moved = True

    def flush(self) -> None:
        """The timeline, if it moved, into the state machine; posted here when the state did not move (a
        state that moved is posted by ``publish_moved``, after the caller has seen its effects' order)."""
        if not self._moved:
            return
        self._moved = False
        before = self.session.version
        self.session.timeline(self.timeline.snapshot())
        if self.session.version == before:
            self.publish()

    def publish_moved(self) -> None:
        """Post the engine when the state machine moved since the last post."""
        if self.session.version != self._published:
            self.publish()

    def publish(self) -> None:
        """Post the engine as it is, unless that is what was posted last: a line that moved nothing (an
        access-log line, a stats line at idle) wakes no redraw."""
        session = self.session
        self._published = session.version
        snapshot = self.timeline.snapshot(self._clock())
        event = EngineChanged(session.state, session.detail, timeline_view(snapshot),
                              session.vllm_version or snapshot.vllm_version, session.ttft_seconds)
        if event != self._last_posted:
            self._last_posted = event
            self._post(event)
