"""After "Application startup complete": prove the engine can generate, then watch it serve.

The backend calls, in order:

1. ``verify_ready(api)`` as soon as the log shows uvicorn's "Application startup complete" (the state
   is *verifying* meanwhile): ``/health`` → ``/v1/models`` → one tiny chat completion. The engine is
   *ready* only when that returns; ``ReadyCheck.ttft_seconds`` goes into ``EngineChanged``.
2. ``ServingWatch(source, ready_at=…).run(sink)`` until it returns a ``Crash`` (or is cancelled on stop):
   it reads ``/health`` and ``/metrics`` every ``interval`` seconds, posts ``ServingSampled`` events
   (each judged by ``ServingPace`` when given one: ``ServingSlow`` and a notice, once, when serving turns
   slower than it should),
   and decides a crash when ``/health`` fails for ``health_fail_seconds`` or the engine process is gone
   (``process_alive``). The backend then sets *failed* with ``crash.describe(root_cause_from_log)`` and
   asks ``RestartBudget`` whether to restart.

The watch's source is either the API itself (``EngineApi``, a request each) or, in the dashboard, the
head's probe reading the API beside it (``ProbedEngineApi``: no request of the dashboard's own).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from sparktui.domain.events import EventSink, Notice, ServingSampled, ServingSlow
from sparktui.domain.readiness import Crash, CrashDetector, Health, HealthVerdict, ReadyCheck, VerifyStep
from sparktui.domain.serving import (
    MetricsParseError,
    MetricsScrape,
    SampleReader,
    ServingSnapshot,
    ServingTracker,
)
from sparktui.domain.serving_pace import Evidence, ServingPace
from sparktui.remote.api_client import EngineApi, EngineApiError, HealthResult

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


async def verify_ready(
    api: EngineApi,
    *,
    model: str | None = None,
    wait_seconds: float = 60.0,
    retry_interval: float = 1.0,
    clock: Clock = time.monotonic,
    sleep: Sleep = asyncio.sleep,
) -> ReadyCheck:
    """``/health`` (retried for up to ``wait_seconds``: the port forward and the first accept can lag
    the log line) → ``/v1/models`` → one completion with ``max_tokens`` 1 on ``model`` (when served)
    or the first served model. Never raises: a failed step is in the result."""
    steps: list[VerifyStep] = []
    deadline = clock() + wait_seconds

    t0 = clock()
    while True:
        health = await api.health()
        if health.ok or clock() >= deadline:
            break
        await sleep(retry_interval)
    steps.append(VerifyStep("health", health.ok, clock() - t0, health.error))
    if not health.ok:
        return ReadyCheck(False, tuple(steps))

    t0 = clock()
    ids: list[str] = []
    error = ""
    while True:
        try:
            ids = await api.models()
            error = "" if ids else "no model served"
        except EngineApiError as exc:
            error = str(exc)
        if ids or clock() >= deadline:
            break
        await sleep(retry_interval)
    steps.append(VerifyStep("models", bool(ids), clock() - t0, error or ", ".join(ids)))
    if not ids:
        return ReadyCheck(False, tuple(steps))

    chosen = model if model in ids else ids[0]
    t0 = clock()
    try:
        result = await api.complete_tiny(chosen)
    except EngineApiError as exc:
        steps.append(VerifyStep("completion", False, clock() - t0, str(exc)))
        return ReadyCheck(False, tuple(steps), tuple(ids))
    steps.append(VerifyStep("completion", True, clock() - t0, f"{chosen} via {result.endpoint}"))
    return ReadyCheck(True, tuple(steps), tuple(ids), result.ttft_seconds, await api.version())


class ServingSource(Protocol):
    """What the watch reads: ``EngineApi`` or ``ProbedEngineApi``. ``metrics_scrape`` is asked only after
    a healthy ``health``, and may raise ``EngineApiError``."""

    async def health(self) -> HealthResult: ...

    async def metrics_scrape(self) -> MetricsScrape: ...


@dataclass
class WatchStats:
    """Counters a test or the status line can read."""

    polls: int = 0
    scrapes: int = 0
    scrape_errors: int = 0
    last_scrape_error: str = ""
    process_checks: int = 0


class ServingWatch:
    """Watches a ready engine: ``/health`` for crash detection and ``/metrics`` for the serving panel."""

    def __init__(
        self,
        api: ServingSource,
        *,
        ready_at: float,
        health_fail_seconds: float = 15.0,
        interval: float = 2.0,
        model_name: str | None = None,
        window_seconds: float = 20.0,
        process_alive: Callable[[], Awaitable[bool]] | None = None,
        process_check_seconds: float = 10.0,
        stall_notice_seconds: float = 60.0,
        pace: ServingPace | None = None,
        evidence: Callable[[], Evidence] | None = None,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.api = api
        #: Requests running without a new token this long: tell the person once (a wedged engine, e.g.
        #: an NCCL hang between the nodes, keeps answering /health).
        self.stall_notice_seconds = stall_notice_seconds
        self.interval = interval
        self.model_name = model_name
        self.detector = CrashDetector(ready_at, health_fail_seconds)
        self.tracker = ServingTracker(window_seconds=window_seconds)
        #: "Serving slower than it should": each snapshot judged; ``evidence`` asked while a rule holds.
        self.pace = pace
        self.evidence = evidence
        self.process_alive = process_alive
        #: While /health answers, the process that answers is there: it is looked for (a command on the head)
        #: only this often, to catch a detached process gone behind an answering port. While /health
        #: fails, on every poll: a process gone is a crash at once, not after ``health_fail_seconds``.
        self.process_check_seconds = process_check_seconds
        self._process_checked_at: float | None = None
        self.reader = SampleReader(model_name)
        self.clock = clock
        self.sleep = sleep
        self.stats = WatchStats()
        self.last_verdict = HealthVerdict(Health.HEALTHY)
        self.last_snapshot: ServingSnapshot | None = None

    async def poll_once(self) -> tuple[HealthVerdict, ServingSnapshot | None]:
        """One round: health (and the process check), then metrics when healthy."""
        self.stats.polls += 1
        health = await self.api.health()
        now = self.clock()
        verdict = self.detector.observe(health.ok, now, health.error)
        if verdict.health is not Health.CRASHED and self.process_alive is not None \
                and self._process_check_due(health.ok, now) and not await self.process_alive():
            crash = self.detector.process_gone(self.clock())
            verdict = HealthVerdict(Health.CRASHED, verdict.failing_for, verdict.last_error, crash)
        self.last_verdict = verdict
        if not health.ok or verdict.health is Health.CRASHED:
            return verdict, None
        try:
            scrape = await self.api.metrics_scrape()
            sample = self.reader.read(scrape.text, scrape.stats_enabled)
        except (EngineApiError, MetricsParseError) as exc:
            self.stats.scrape_errors += 1
            self.stats.last_scrape_error = str(exc)
            return verdict, None
        self.stats.scrapes += 1
        now = self.clock()
        snapshot = self.tracker.update(sample, now)
        if self.pace is not None:
            reading = self.pace.observe(snapshot, now, self.evidence)
            snapshot = dataclasses.replace(snapshot, pace=reading)
        self.last_snapshot = snapshot
        return verdict, snapshot

    def _process_check_due(self, healthy: bool, now: float) -> bool:
        """Whether the process is to be looked for now (and if so, that it was, now)."""
        last = self._process_checked_at
        if healthy and last is not None and now - last < self.process_check_seconds:
            return False
        self._process_checked_at = now
        self.stats.process_checks += 1
        return True

    async def run(
        self,
        sink: EventSink | None = None,
        on_snapshot: Callable[[ServingSnapshot], None] | None = None,
        on_health: Callable[[HealthVerdict], None] | None = None,
    ) -> Crash:
        """Poll until the engine crashes; returns the crash. Cancel the task to stop watching."""
        warned = False
        stall_warned = False
        while True:
            verdict, snapshot = await self.poll_once()
            if snapshot is not None:
                if sink is not None:
                    sink(ServingSampled(snapshot))
                    if snapshot.pace is not None and snapshot.pace.raised and snapshot.pace.slow is not None:
                        sink(ServingSlow(snapshot.pace.slow))
                        sink(Notice(snapshot.pace.slow.describe(), "warning"))
                    stalled = snapshot.generation_stalled_seconds
                    if stalled is not None and stalled >= self.stall_notice_seconds and not stall_warned:
                        sink(Notice(f"requests running but no token generated for {stalled:.0f}s "
                                    "(engine stuck? /health still answers)", "warning"))
                        stall_warned = True
                    elif stalled is None:
                        stall_warned = False
                if on_snapshot is not None:
                    on_snapshot(snapshot)
            if on_health is not None:
                on_health(verdict)
            if verdict.crash is not None:
                return verdict.crash
            if verdict.health is Health.FAILING and not warned and sink is not None:
                sink(Notice(f"engine /health failing ({verdict.last_error or 'no answer'}); "
                            f"crash declared after {self.detector.fail_after:g}s", "warning"))
                warned = True
            elif verdict.health is Health.HEALTHY:
                warned = False
            await self.sleep(self.interval)
