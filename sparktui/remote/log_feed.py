"""The log shown and the engine log behind the state: the head's vLLM log, always followed (from its
last byte after any drop) into the ``EngineFeed``; a node's Ray worker log when the person picks it; and
the loop that posts their records in batches and lets time pass for the state machine's rules."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time

from sparktui.domain.deadline import within
from sparktui.domain.engine_view import EngineFeed
from sparktui.domain.events import LogRecords, Notice
from sparktui.domain.logs import LogIngest, Timeline
from sparktui.remote.backend_wiring import BackendWiring
from sparktui.remote.log_follower import LogFollower
from sparktui.remote.transport import TransportError

#: How long the first line after a quiet spell waits for the ones that come with it before it is posted.
FLUSH_INTERVAL = 0.1
#: While lines keep arriving, batches (log records and the timeline's changes) are posted this far apart:
#: a streaming start is drawn twice a second. Each batch is a frame that repaints the whole log pane and
#: its scrollbar (it scrolls), the most costly frame the dashboard draws; at the rate lines came (3-4
#: batches a second) they were most of what a start cost. A line after a quiet spell still shows in 0.1 s.
STREAM_BATCH_SECONDS = 0.5
#: With no log line arriving, how often time is let pass for the state machine's "for N seconds" rules (its
#: clocks count seconds: a quiet engine wakes the backend once a second, not ten times).
QUIET_TICK = 1.0


class LogFeed:
    """The engine log (into the session, through ``engine``) and the log shown (the engine's or a
    node's Ray worker log)."""

    def __init__(self, wiring: BackendWiring) -> None:
        self._wiring = wiring
        config = wiring.config
        #: The engine log and what it says, posted with the state (``EngineChanged``).
        engine_log = LogIngest(len(config.nodes), display_cap=config.ui.log_buffer_lines)
        self.engine = EngineFeed(wiring.session, engine_log, wiring.post)
        self._shown = self.engine.log
        self._source = "vllm"
        self._side_follower: asyncio.Task[None] | None = None
        #: Set when log bytes arrive (the engine's or the shown one): the flush loop's wake-up.
        self.arrived = asyncio.Event()

    @property
    def timeline(self) -> Timeline:
        return self.engine.timeline

    @property
    def source(self) -> str:
        """The log shown (``select``'s last choice), as its records are posted."""
        return self._source

    def select(self, source: str) -> None:
        """``vllm`` (the head's engine log, always followed) or ``ray:<node>`` (a node's Ray worker log)."""
        if source == self._source:
            return
        self._source = source
        if self._side_follower is not None:
            self._side_follower.cancel()
            self._side_follower = None
        if source.startswith("ray:"):
            self._shown = LogIngest(display_cap=self._wiring.config.ui.log_buffer_lines)
            self._side_follower = self._wiring.spawn(self._follow_ray_log(source.removeprefix("ray:")))
        else:
            self._shown = self.engine.log

    async def follow_engine_log(self) -> None:
        controller = self._wiring.controller
        assert controller is not None
        # Bytes straight into the engine feed: no hop through the backend.
        feed, arrived = self.engine.log_bytes, self.arrived

        def on_bytes(data: bytes) -> None:
            feed(data)
            arrived.set()

        def on_reset() -> None:
            self.engine.log_reset()
            arrived.set()

        follower = LogFollower(
            self._wiring.head_transport(), controller.log_path(), on_bytes,
            python=(self._wiring.config.head.python,), on_reset=on_reset,
        )
        await follower.run()

    async def _follow_ray_log(self, node: str) -> None:
        from sparktui.remote.ray_logs import ray_worker_log_path

        wiring = self._wiring
        transport = wiring.transports.get(node)
        if transport is None:
            wiring.post(Notice(f"no node named {node}", "error"))
            return
        try:
            homes = wiring.controller.homes if wiring.controller else None
            path = await ray_worker_log_path(wiring.config, transport, node, homes or None)
        except TransportError as exc:
            wiring.post(Notice(f"{node}: Ray worker log not reachable: {exc}", "warning"))
            return
        if path is None:
            wiring.post(Notice(f"{node}: no Ray worker log found (is Ray running there?)", "warning"))
            return

        shown, arrived = self._shown, self.arrived

        def on_bytes(data: bytes) -> None:
            shown.feed(data)
            arrived.set()

        await LogFollower(transport, path, on_bytes, python=(wiring.config.node(node).python,)).run()

    async def flush_loop(self) -> None:
        """Post log records in batches and the timeline when it changed: ``FLUSH_INTERVAL`` after the first
        line of a quiet spell, ``STREAM_BATCH_SECONDS`` apart while lines keep coming; let time pass for the
        state machine's "for N seconds" rules, at least every ``QUIET_TICK``."""
        arrived = self.arrived
        session = self._wiring.session
        posted_at = -math.inf
        while True:
            with contextlib.suppress(TimeoutError):
                await within(arrived.wait(), QUIET_TICK)
            arrived.clear()
            await asyncio.sleep(max(FLUSH_INTERVAL, posted_at + STREAM_BATCH_SECONDS - time.monotonic()))
            batch = self._shown.take_records(time.monotonic())
            if batch:
                self._wiring.post(LogRecords(self._source, batch))
                posted_at = time.monotonic()
            with session.held():    # the log's news and the time passed: one settle
                self.engine.flush()
                session.tick()
