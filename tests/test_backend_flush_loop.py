"""The SSH backend's flush loop (no nodes needed): a quiet log wakes it about once a second (time passes for
the state machine's "for N seconds" rules), arriving log bytes within ``FLUSH_INTERVAL`` and batched, a stream
of them ``STREAM_BATCH_SECONDS`` apart."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from pathlib import Path

from sparktui.config import load_config
from sparktui.domain.events import Event, LogRecords
from sparktui.remote.backend import FLUSH_INTERVAL, QUIET_TICK, STREAM_BATCH_SECONDS, SshBackend
from tests.waiting import wait_until

CONFIG = Path(__file__).resolve().parents[1] / "config.toml"


async def test_a_quiet_log_wakes_the_loop_once_a_second_and_lines_at_once() -> None:
    backend = SshBackend(load_config(CONFIG))
    posted: list[tuple[float, Event]] = []
    backend.events.sink = lambda event: posted.append((time.monotonic(), event))
    ticks: list[float] = []
    backend.session.truth.tick = lambda: ticks.append(time.monotonic())  # type: ignore[method-assign]
    task = asyncio.create_task(backend.logs.flush_loop())
    try:
        await wait_until(lambda: len(ticks) >= 3, "three ticks", state=lambda: ticks)
        gaps = [b - a for a, b in itertools.pairwise(ticks)]
        assert all(gap > 0.9 * QUIET_TICK for gap in gaps), gaps   # not ten a second: nothing arrived
        # Lines arrive (the follower's callback feeds the log and sets the event): posted in one batch.
        t0 = time.monotonic()
        for i in range(3):
            backend.logs.engine.log_bytes(f"INFO 12-01 10:00:0{i} [x.py:1] line {i}\n".encode())
            backend.logs.arrived.set()
        await wait_until(lambda: any(isinstance(e, LogRecords) for _, e in posted), "the lines posted")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    batches = [(t, e) for t, e in posted if isinstance(e, LogRecords)]
    assert len(batches) == 1 and len(batches[0][1].records) == 3
    assert batches[0][0] - t0 < FLUSH_INTERVAL + 0.3


async def test_a_stream_of_lines_is_posted_in_batches_half_a_second_apart() -> None:
    # Each batch is a frame that repaints the scrolling log pane: a start's stream is drawn twice a second.
    backend = SshBackend(load_config(CONFIG))
    posted: list[float] = []
    backend.events.observe(lambda _event: posted.append(time.monotonic()), (LogRecords,))
    task = asyncio.create_task(backend.logs.flush_loop())
    try:
        t0 = time.monotonic()
        i = 0
        while time.monotonic() - t0 < 2.0:   # a line every 20 ms
            backend.logs.engine.log_bytes(f"INFO 12-01 10:00:{i % 60:02d} [x.py:1] line {i}\n".encode())
            backend.logs.arrived.set()
            i += 1
            await asyncio.sleep(0.02)
        await asyncio.sleep(STREAM_BATCH_SECONDS + 0.2)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert posted[0] - t0 < FLUSH_INTERVAL + 0.3   # the first line of the spell at once
    gaps = [b - a for a, b in itertools.pairwise(posted)]
    assert 4 <= len(posted) <= 6, gaps
    assert all(gap >= STREAM_BATCH_SECONDS - 0.02 for gap in gaps), gaps
