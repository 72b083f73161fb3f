"""``within``: a bounded wait whose caller's cancel is never lost, unlike Python 3.11's ``wait_for``."""

from __future__ import annotations

import asyncio
import sys

import pytest

from sparktui.domain.deadline import within


async def _cancel_as_it_finishes(wait: object) -> asyncio.Task[object]:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()
    task = asyncio.create_task(wait(done, 10))  # type: ignore[operator]
    await asyncio.sleep(0)   # the task now waits on `done`
    done.set_result(1)       # what it waits for finishes …
    task.cancel()            # … in the same turn as its caller cancels it
    await asyncio.wait([task])
    return task


async def test_a_cancel_as_the_awaited_finishes_propagates() -> None:
    task = await _cancel_as_it_finishes(within)
    assert task.cancelled()


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12 builds wait_for on asyncio.timeout")
async def test_python_311_wait_for_loses_that_cancel() -> None:
    # Why `within` exists: a reconnect loop around this wait would go on, and its TaskGroup never ends.
    task = await _cancel_as_it_finishes(asyncio.wait_for)
    assert not task.cancelled() and task.result() == 1


async def test_the_bound_and_no_bound() -> None:
    with pytest.raises(TimeoutError):
        await within(asyncio.sleep(5), 0.05)
    assert await within(asyncio.sleep(0, result="x"), None) == "x"
