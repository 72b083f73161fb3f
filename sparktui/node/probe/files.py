"""The node's files as the probe reads them: kept open and re-read from offset 0, or read once; a
program found on ``PATH`` without a shell."""

from __future__ import annotations

import contextlib
import os

from sparktui.node.probe.problems import Problems, why_failed


class OpenFiles:
    """Files kept open and re-read from offset 0 (one ``pread`` per read, no open/close per sample)."""

    def __init__(self, problems: Problems) -> None:
        self._fds: dict[str, int] = {}
        self.problems = problems

    def read(self, path: str, key: str | None = None, size: int = 65536) -> bytes | None:
        fd = self._fds.get(path)
        try:
            if fd is None:
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                self._fds[path] = fd
            data = os.pread(fd, size, 0)
        except OSError as exc:
            if fd is not None:
                # The device may have gone (driver reload): reopen next time.
                self._drop(path)
            self.problems.note(key or path, why_failed(exc))
            return None
        if (key or path) in self.problems.said:
            self.problems.clear(key or path)
        return data

    def _drop(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def drop_under(self, prefix: str) -> None:
        for path in [p for p in self._fds if p.startswith(prefix)]:
            self._drop(path)


def read_once(path: str, size: int = 65536) -> bytes | None:
    """Open, read, close: for files read rarely (per new PID, at discovery)."""
    try:
        with open(path, "rb", buffering=0) as f:
            return f.read(size)
    except OSError:
        return None


def which(name: str) -> str | None:
    for d in os.environ.get("PATH", os.defpath).split(os.pathsep):
        p = os.path.join(d or ".", name)
        if os.access(p, os.X_OK) and not os.path.isdir(p):
            return p
    return None
