"""The serving watch's source in the dashboard: the engine's API as the head's probe reads it.

The head's probe (``--engine-port``) reads ``/health`` and the wanted families of ``/metrics`` beside the
engine after each sample, and the next sample carries that reading (``Sample.engine_api``). The backend
hands every head sample to ``ProbedEngineApi.offer``; the watch's ``health()`` waits for the next reading
it has not seen. So a ready dashboard makes no HTTP request of its own: two requests a second through
the SSH port forward had been a third of what it cost idle.

A reading that began before the watch did is left out: it can say "connection refused" of the seconds
before the server came up, and the watch would warn of a failing engine that has just proved it serves.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from sparktui.domain.serving import MetricsScrape
from sparktui.domain.telemetry import EngineApiReading, Sample
from sparktui.remote.api_client import EngineApiError, HealthResult
from sparktui.remote.probe_runner import PROBE_REQUEST_TIMEOUT


def reading_wait_seconds(interval: float) -> float:
    """How long ``health()`` waits for a new reading before it counts as a failed check: a reading every
    ``interval``, one request that may take ``PROBE_REQUEST_TIMEOUT``, and one interval of slack (the
    reading rides on the sample after it)."""
    return 2 * interval + PROBE_REQUEST_TIMEOUT


class ProbedEngineApi:
    """``ServingSource`` fed by the head's samples (``offer``); see the module's doc."""

    def __init__(self, wait_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.wait_seconds = wait_seconds
        self.clock = clock
        #: Readings that began before this (controller monotonic) are not evidence of the watch.
        self.not_before = clock()
        self._seen: tuple[int | None, int] | None = None
        self._pending: EngineApiReading | None = None
        self._current: EngineApiReading | None = None
        self._arrived = asyncio.Event()

    def offer(self, sample: Sample) -> None:
        """A head sample arrived: its reading, when new, is the next one ``health()`` returns."""
        reading = sample.engine_api
        if reading is None:
            return
        key = (sample.probe_pid, reading.id)     # ids start again with each probe process
        if key == self._seen:
            return
        self._seen = key
        if sample.received is not None and sample.received - (sample.mono - reading.mono) < self.not_before:
            return
        self._pending = reading
        self._arrived.set()

    async def health(self) -> HealthResult:
        """The next reading's ``/health``; a failed check when none comes within ``wait_seconds`` (the
        probe's stream is down, or its request hangs)."""
        started = self.clock()
        while self._pending is None:
            self._arrived.clear()
            left = started + self.wait_seconds - self.clock()
            try:
                if left <= 0:
                    raise TimeoutError
                # asyncio.timeout, not wait_for: Python 3.11's wait_for loses a cancel that meets the event.
                async with asyncio.timeout(left):
                    await self._arrived.wait()
            except TimeoutError:
                self._current = None
                return HealthResult(False, self.clock() - started, None,
                                    f"no /health reading from the head's probe in {self.wait_seconds:g}s")
        reading, self._pending = self._pending, None
        self._current = reading
        error = "" if reading.healthy else reading.health_error or f"HTTP {reading.health_status}"
        return HealthResult(reading.healthy, reading.health_seconds, reading.health_status, error)

    async def metrics_scrape(self) -> MetricsScrape:
        """The wanted families of ``/metrics`` from the reading ``health()`` returned last."""
        reading = self._current
        if reading is None or reading.metrics is None:
            raise EngineApiError(reading.metrics_error if reading is not None and reading.metrics_error
                                 else "/metrics: not read by the head's probe")
        return MetricsScrape(reading.metrics, reading.stats_enabled)
