"""Awaiting with a deadline, without ever swallowing a cancel.

Python 3.11's ``asyncio.wait_for`` returns the result when what it awaits finishes at the very moment the
caller is cancelled (python/cpython#86296, fixed in 3.12 by building ``wait_for`` on ``asyncio.timeout``).
The cancel is lost: a reconnecting stream whose command ended as its channel was closed starts the command
again, and whatever waits for that task to end — a ``TaskGroup``, the dashboard's exit, ``asyncio.run``'s
clean-up — waits for good. ``asyncio.timeout`` tells its own cancel from the caller's, so every bounded
wait in sparktui goes through ``within``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float | None) -> T:
    """``await awaitable``, raising ``TimeoutError`` after ``seconds`` (``None``: unbounded); a cancel of
    the caller always propagates, also when ``awaitable`` has just finished."""
    async with asyncio.timeout(seconds):
        return await awaitable
