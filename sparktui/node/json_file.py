"""argv: ``write PATH JSON`` or ``read PATH``. A small JSON record kept on the head, beside the operation
lock: the engine's desired state (``desired.json``), the supervisor's presence (``supervisor.json``), the
image in use (``image.json``) and an upgrade's progress (``upgrade.json``).
``write`` replaces the file atomically (a reader never sees half of it) and prints ``OK``; ``read`` prints
the JSON, or ``{}`` when none was ever written.
"""

from __future__ import annotations

import os
import sys


def write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    print("OK")


def read(path: str) -> None:
    try:
        with open(path) as f:
            print(f.read().strip() or "{}")
    except FileNotFoundError:
        print("{}")


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3])
    else:
        read(sys.argv[2])
