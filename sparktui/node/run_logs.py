"""argv: ``keep DIR LOG KEEP KEEP_BYTES -- COMMAND…`` or ``list DIR LOG``. Each engine run's log, kept.

``keep`` runs just before ``vllm serve`` is launched (then it becomes COMMAND, the detach script): the last
run's ``LOG`` (``vllm.log``) is renamed to ``vllm-<its start, UTC>.log``, the oldest kept logs are removed
beyond KEEP runs (the new one counts) or KEEP_BYTES together (the newest kept one always stays: the last
crash log is the one a person needs), and this run's start is stamped in ``vllm.started`` (epoch seconds,
this node's clock). That stamp is the engine's real start for every sparktui process that attaches later:
it is written by the start itself, survives a crash (a stop leaves it), and is read with this node's clock
beside it, so the reader's own clock being off does not matter.

``list`` prints one JSON object: ``now`` (this node's clock), ``started`` (the current run's stamp or
null), ``current`` (LOG's size, or null) and ``runs`` (the kept logs, newest first: file, started, size).
"""

from __future__ import annotations

import calendar
import json
import os
import re
import sys
import time
from typing import Any

#: A kept log's name: ``vllm-20261204-132500.log`` (its run's start, UTC): names sort as times do.
KEPT = re.compile(r"^(?P<stem>.+)-(?P<at>\d{8}-\d{6})\.log$")
STAMP_FORMAT = "%Y%m%d-%H%M%S"


def stem(log: str) -> str:
    return log[:-4] if log.endswith(".log") else log


def kept_name(log: str, started: float) -> str:
    """The name a run's log is kept under once the next run starts."""
    return f"{stem(log)}-{time.strftime(STAMP_FORMAT, time.gmtime(started))}.log"


def stamp_path(folder: str, log: str) -> str:
    return os.path.join(folder, stem(log) + ".started")


def read_stamp(folder: str, log: str) -> float | None:
    try:
        with open(stamp_path(folder, log)) as f:
            return float(f.read().strip())
    except (OSError, ValueError):
        return None


def kept_logs(folder: str, log: str) -> list[dict[str, Any]]:
    """The kept logs of earlier runs, newest first."""
    out: list[dict[str, Any]] = []
    for name in os.listdir(folder):
        m = KEPT.match(name)
        if m is None or m.group("stem") != stem(log):
            continue
        try:
            size = os.stat(os.path.join(folder, name)).st_size
        except OSError:
            continue
        started = calendar.timegm(time.strptime(m.group("at"), STAMP_FORMAT))
        out.append({"file": name, "started": started, "size": size})
    out.sort(key=lambda r: r["file"], reverse=True)
    return out


def rotate(folder: str, log: str, now: float) -> str | None:
    """Move the last run's log aside under its start's name (the log's own time when it has no stamp)."""
    path = os.path.join(folder, log)
    legacy = path + ".prev"    # what earlier sparktui versions kept: one log back
    if os.path.exists(legacy):
        os.replace(legacy, os.path.join(folder, kept_name(log, os.stat(legacy).st_mtime)))
    if not os.path.exists(path):
        return None
    started = read_stamp(folder, log)
    if started is None or started > now:
        started = os.stat(path).st_mtime
    name = kept_name(log, started)
    os.replace(path, os.path.join(folder, name))
    return name


def prune(folder: str, log: str, keep: int, keep_bytes: int) -> list[str]:
    """Remove the oldest kept logs beyond ``keep - 1`` (the new run's log is the ``keep``-th) or beyond
    ``keep_bytes`` together; the newest kept log stays whatever its size."""
    removed = []
    total = 0
    for i, run in enumerate(kept_logs(folder, log)):
        total += run["size"]
        if i > 0 and (i >= keep - 1 or total > keep_bytes):
            try:
                os.remove(os.path.join(folder, run["file"]))
                removed.append(run["file"])
            except OSError:
                pass
    return removed


def write_stamp(folder: str, log: str, started: float) -> None:
    path = stamp_path(folder, log)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(f"{started:.3f}\n")
    os.replace(tmp, path)


def keep(folder: str, log: str, count: int, size: int) -> None:
    os.makedirs(folder, exist_ok=True)
    now = time.time()
    moved = rotate(folder, log, now)
    removed = prune(folder, log, count, size)
    write_stamp(folder, log, now)
    # On stderr: the detach script's stdout ("pid N") is what the start reads.
    sys.stderr.write(json.dumps({"kept": moved, "removed": removed, "started": now}) + "\n")
    sys.stderr.flush()


def listing(folder: str, log: str) -> dict[str, Any]:
    try:
        current: int | None = os.stat(os.path.join(folder, log)).st_size
    except OSError:
        current = None
    try:
        runs = kept_logs(folder, log)
    except OSError:
        runs = []
    return {"now": time.time(), "started": read_stamp(folder, log), "current": current, "runs": runs}


def main(argv: list[str]) -> int:
    action, folder, log = argv[0], os.path.expanduser(argv[1]), argv[2]
    if action == "list":
        print(json.dumps(listing(folder, log)))
        return 0
    count, size = max(1, int(argv[3])), max(0, int(argv[4]))
    command = argv[argv.index("--") + 1:]
    keep(folder, log, count, size)
    os.execvp(command[0], command)
    return 1   # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
