"""Waiting for a condition instead of for a fixed time: a test that sleeps and then asserts is slow when the
machine is idle and flaky when it is busy. These poll a predicate until it holds or a deadline passes, and
then fail naming what they waited for (and, if asked, what there was instead)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot

#: Long enough for a loaded CI machine; a condition that holds returns at once, so this costs nothing.
DEFAULT_TIMEOUT = 10.0


def _failure(what: str, timeout: float, state: Callable[[], object] | None) -> AssertionError:
    detail = f"; instead: {state()}" if state is not None else ""
    return AssertionError(f"timed out after {timeout:g} s waiting for {what}{detail}")


async def wait_until(predicate: Callable[[], object], what: str, *, timeout: float = DEFAULT_TIMEOUT,
                     interval: float = 0.01, state: Callable[[], object] | None = None,
                     pilot: Pilot[Any] | None = None) -> float:
    """Wait (in the running loop) until ``predicate()`` is true; the seconds it took. With ``pilot``, each
    poll is a ``pilot.pause`` (the app's queued messages handled); ``state`` says what to show on failure."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise _failure(what, timeout, state)
        if pilot is not None:
            await pilot.pause(interval)
        else:
            await asyncio.sleep(interval)
    return time.monotonic() - t0


def wait_until_sync(predicate: Callable[[], object], what: str, *, timeout: float = DEFAULT_TIMEOUT,
                    interval: float = 0.02, state: Callable[[], object] | None = None) -> float:
    """:func:`wait_until` for code without an event loop (a subprocess to watch)."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise _failure(what, timeout, state)
        time.sleep(interval)
    return time.monotonic() - t0
