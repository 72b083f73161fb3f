"""How the probe lives and ends with the channel that started it: SIGTERM when its parent dies, EOF on
stdin, a whole line written at once."""

from __future__ import annotations

import os
import select
import signal
import time


def die_with_parent() -> None:
    """Ask Linux to send SIGTERM when the parent dies (no orphans if the channel vanishes abruptly)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))   # PR_SET_PDEATHSIG
    except Exception:
        pass


def write_all(data: bytes) -> None:
    """All of ``data`` to stdout (a pipe may take part of it in one write)."""
    view = memoryview(data)
    while view:
        n = os.write(1, view)
        view = view[n:]


def stdin_closed(until: float) -> bool:
    """Wait until monotonic ``until``; True as soon as stdin reaches EOF (the channel that started us
    closed). Anything written to stdin is read and ignored."""
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return False
        ready, _, _ = select.select([0], [], [], left)
        if ready:
            try:
                if os.read(0, 65536) == b"":
                    return True
            except OSError:
                return True
