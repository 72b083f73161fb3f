"""argv: ``take PATH HOLDER_JSON`` or ``show PATH``. The operation lock on the head (``state_dir``): one
start/stop/restart at a time across every sparktui on every machine.

``take`` holds an flock on PATH for as long as its stdin stays open — the channel of the sparktui that took
it: when that sparktui ends, or dies, or its link drops, the channel closes and the lock is free (no stale
lock from a dead holder). It prints ``TAKEN {"previous": …}`` (the holder recorded in the file: empty when
the last holder released it cleanly, else one that vanished holding it) or ``HELD {holder}``. A clean
release writes ``release`` before the EOF and empties the file; an EOF alone (the holder died, its link
dropped) leaves the record for the next taker to report. ``show`` prints ``HELD {holder}`` or ``FREE {}``
from /proc/locks, without touching the lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from typing import Any


def recorded(fd: int) -> dict[str, Any]:
    os.lseek(fd, 0, 0)
    data = os.read(fd, 65536).decode("utf-8", "replace").strip()
    try:
        return json.loads(data) if data else {}
    except ValueError:
        return {"unreadable": data[:200]}


def show(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        print("FREE {}")
        return
    ino = os.fstat(fd).st_ino
    held = False
    with open("/proc/locks") as f:
        for line in f:
            parts = line.split()
            if "FLOCK" in parts and len(parts) > 5 and parts[5].rsplit(":", 1)[-1] == str(ino):
                held = True
    print(("HELD " if held else "FREE ") + json.dumps(recorded(fd) if held else {}))


def take(path: str, holder: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("HELD " + json.dumps(recorded(fd)), flush=True)
        sys.exit(3)
    previous = recorded(fd)
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, 0)
    os.write(fd, (holder + "\n").encode())
    os.fsync(fd)
    print("TAKEN " + json.dumps({"previous": previous}), flush=True)
    said = b""
    try:
        while True:
            data = os.read(0, 65536)
            if not data:
                break
            said += data
    except OSError:
        pass
    if b"release" in said:
        os.ftruncate(fd, 0)


def main(argv: list[str]) -> None:
    mode, path = argv[0], os.path.expanduser(argv[1])
    if mode == "show":
        show(path)
    else:
        take(path, argv[2])


if __name__ == "__main__":
    main(sys.argv[1:])
