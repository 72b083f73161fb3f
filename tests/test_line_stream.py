"""The one reconnecting line stream (``remote/line_stream.py``) and the event-based ``wait_connected``,
on the local transport: real processes, real pipes."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

import pytest

from sparktui.domain.backoff import Backoff
from sparktui.remote.line_stream import LineStream
from sparktui.remote.transport import LinkPhase, LinkState, LocalTransport, TransportError
from tests.waiting import wait_until

QUICK = Backoff(initial=0.05, maximum=0.4, jitter=0.0)


async def test_wait_connected_wakes_on_the_phase_change_without_polling() -> None:
    transport = LocalTransport("local")  # CONNECTING until connect()
    waiter = asyncio.create_task(transport.wait_connected())
    for _ in range(3):
        await asyncio.sleep(0)
    assert not waiter.done()
    await transport.connect()
    # A poller would notice within its period; the waiter is woken by the change itself, at once.
    for _ in range(3):
        await asyncio.sleep(0)
    assert waiter.done() and waiter.exception() is None


async def test_wait_connected_bounded_and_closed() -> None:
    transport = LocalTransport("local")
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    with pytest.raises(TransportError, match="not connected after"):
        await transport.wait_connected(timeout=0.2)
    assert 0.15 < loop.time() - t0 < 5.0
    waiter = asyncio.create_task(transport.wait_connected())
    await asyncio.sleep(0)
    await transport.close()
    with pytest.raises(TransportError, match="closed"):
        await asyncio.wait_for(waiter, 5)


async def test_a_faulty_listener_does_not_stop_the_change() -> None:
    transport = LocalTransport("local")
    seen: list[LinkPhase] = []

    def bad(name: str, state: LinkState) -> None:
        raise RuntimeError("listener bug")

    transport.add_listener(bad)
    transport.add_listener(lambda name, state: seen.append(state.phase))
    await transport.connect()
    await transport.wait_connected(timeout=1)
    assert seen == [LinkPhase.CONNECTED]


async def test_lines_across_restarts_each_session_split_afresh(tmp_path: Path) -> None:
    transport = LocalTransport("local")
    await transport.connect()
    # Each session prints two lines and a cut one (no newline): the cut line dies with its session.
    script = "import sys; sys.stdout.write('a\\nb\\r\\npartial'); sys.stdout.flush()"
    starts: list[int] = []
    stream = LineStream(transport, [sys.executable, "-c", script], name="test", backoff=QUICK,
                        on_session=lambda: starts.append(1))
    got: list[str] = []
    async with contextlib.aclosing(stream.lines()) as lines:
        async for line in lines:
            got.append(line)
            if len(got) == 6:
                break
    assert got == ["a", "b"] * 3
    assert stream.sessions == 3 == len(starts)
    assert stream.proc is None


async def test_a_command_that_delivers_nothing_is_reported_and_backed_off() -> None:
    transport = LocalTransport("local")
    await transport.connect()
    errors: list[str] = []
    stream = LineStream(transport, [sys.executable, "-c", "import sys; sys.exit('no luck here')"],
                        name="spark1: probe", backoff=QUICK, on_error=errors.append)
    loop = asyncio.get_running_loop()
    t0 = loop.time()

    async def read() -> None:
        async for _ in stream.lines():
            pass

    task = asyncio.create_task(read())
    await wait_until(lambda: stream.sessions >= 4, "four sessions", timeout=60)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert errors and errors[0].startswith("spark1: probe exited (status 1) without output")
    assert "no luck here" in errors[0]
    # Waits 0.05, 0.1, 0.2 between the four sessions: the backoff grew.
    assert loop.time() - t0 >= 0.3
    assert stream.last_error is not None and "no luck here" in stream.last_error


async def test_a_start_that_fails_is_retried_and_the_stream_ends_when_closed() -> None:
    transport = LocalTransport("local")
    await transport.connect()
    errors: list[str] = []
    stream = LineStream(transport, ["/nonexistent/command"], name="x", backoff=QUICK,
                        on_error=errors.append)
    task = asyncio.create_task(_drain(stream))
    while len(errors) < 2:
        await asyncio.sleep(0.02)
    await transport.close()
    await asyncio.wait_for(task, 10)  # ends by itself: nothing to reconnect to
    assert errors[0].startswith("x not started:") and stream.sessions == 0


async def test_leaving_the_loop_hangs_the_command_up() -> None:
    transport = LocalTransport("local")
    await transport.connect()
    script = "import time\nwhile True:\n print('tick', flush=True)\n time.sleep(0.05)"
    stream = LineStream(transport, [sys.executable, "-c", script], name="t", backoff=QUICK)
    async with contextlib.aclosing(stream.lines()) as lines:
        async for _ in lines:
            proc = stream.proc
            break
    assert proc is not None and stream.proc is None
    assert await asyncio.wait_for(proc.wait(), 5) is not None


async def test_restart_ends_the_session_and_starts_another() -> None:
    transport = LocalTransport("local")
    await transport.connect()
    script = "import time\nwhile True:\n print('tick', flush=True)\n time.sleep(0.05)"
    stream = LineStream(transport, [sys.executable, "-c", script], name="t", backoff=QUICK)
    async with contextlib.aclosing(stream.chunks()) as chunks:
        async for _ in chunks:
            if stream.sessions == 1:
                stream.restart("bad frame")
            else:
                break
    assert stream.sessions == 2 and stream.last_error == "bad frame"


async def _drain(stream: LineStream) -> None:
    async for _ in stream.lines():
        pass
