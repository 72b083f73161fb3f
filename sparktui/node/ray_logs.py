"""argv: RAY_TEMP_DIR. Lists the files of the node's current Ray session log directory as JSON.
``session_latest`` is an absolute symlink that only resolves where Ray wrote it (not on the host when Ray
runs in a container with its temp dir mounted): then the newest ``session_*`` directory is used."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from sparktui.node.ray_session import session_dir


def worker_markers(path: str, entry: dict[str, Any]) -> None:
    """Ray writes ":job_id:<hex>" and ":actor_name:<class>" markers when a worker becomes an actor (a
    pooled worker's file name keeps the job id ffffffff)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096).decode("utf-8", "replace")
    except OSError:
        head = ""
    for line in head.splitlines():
        if line.startswith(":actor_name:"):
            entry["actor"] = line[len(":actor_name:"):].strip()
        elif line.startswith(":job_id:"):
            entry["job"] = line[len(":job_id:"):].strip()


def main(argv: list[str]) -> None:
    base = os.path.join(session_dir(os.path.expanduser(argv[0])), "logs")
    files = []
    try:
        for name in os.listdir(base):
            try:
                st = os.stat(os.path.join(base, name))
            except OSError:
                continue
            entry: dict[str, Any] = {"name": name, "size": st.st_size, "mtime": st.st_mtime}
            if name.startswith("worker-"):
                worker_markers(os.path.join(base, name), entry)
            files.append(entry)
    except OSError as e:
        print(json.dumps({"dir": base, "error": str(e), "files": []}))
        sys.exit(0)
    print(json.dumps({"dir": os.path.realpath(base), "files": files}))


if __name__ == "__main__":
    main(sys.argv[1:])
