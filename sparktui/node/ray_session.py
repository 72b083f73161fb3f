"""``session_dir(temp)``: a node's current Ray session directory, shared by the ``ray_logs`` and
``evidence`` scripts. ``session_latest`` is an absolute symlink that only resolves where Ray wrote it (not on
the host when Ray runs in a container with its temp dir mounted): then the newest ``session_*`` directory."""

from __future__ import annotations

import os


def session_dir(temp: str) -> str:
    base = os.path.join(temp, "session_latest")
    if not os.path.isdir(base):
        try:
            sessions = [os.path.join(temp, d) for d in os.listdir(temp) if d.startswith("session_2")]
        except OSError:
            sessions = []
        sessions = [d for d in sessions if os.path.isdir(d)]
        base = max(sessions, key=os.path.getmtime) if sessions else base
    return base
