"""argv: ``SINCE NEEDLE…``. What a node's logs say about why something died: its previous boot (did it end
with a clean shutdown, or stop mid-run; what the kernel and the memory watchdogs said), what the kernel kept
across the reboot (pstore), and the current boot's messages since ``SINCE`` (epoch seconds; empty: since
boot). Prints one JSON object.

Only lines holding one of the NEEDLEs (given by the controller, which classifies them) come back, the newest
``KEEP`` of them, plus the last lines of the previous boot (how it ended): a boot's journal can be
gigabytes, the answer stays small. Each source says why it is missing when it is (no journalctl, no access
to the system journal, no previous boot kept, pstore unreadable).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

#: Matching lines kept per source (the newest), and the last lines of the previous boot.
KEEP = 300
TAIL = 30
#: Seconds one journalctl may run (a big journal is read to its end; the answer must come back).
JOURNAL_SECONDS = 40.0
PSTORE = "/sys/fs/pstore"
PSTORE_BYTES = 512 * 1024
#: This boot's id (a new one at each boot): the supervisor reads it to tell that a node rebooted.
BOOT_ID = "/proc/sys/kernel/random/boot_id"


def matching(lines: list[str], needles: list[str]) -> list[str]:
    return [line for line in lines if any(n in line for n in needles)][-KEEP:]


def journal(args: list[str], needles: list[str], tail: int = 0) -> dict[str, Any]:
    """``journalctl ARGS`` read line by line: the lines with a needle (the newest KEEP), the last ``tail``."""
    argv = ["journalctl", "--no-pager", "-q", "-o", "short-iso-precise", *args]
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL)
    except OSError as exc:
        return {"error": "no journalctl: " + (exc.strerror or str(exc))}
    found: list[str] = []
    last: list[str] = []
    count = 0
    deadline = time.monotonic() + JOURNAL_SECONDS
    cut = False
    assert proc.stdout is not None and proc.stderr is not None
    for raw in proc.stdout:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        count += 1
        if any(n in line for n in needles):
            found.append(line)
            if len(found) > 2 * KEEP:
                del found[:KEEP]
        if tail:
            last.append(line)
            if len(last) > 2 * tail:
                del last[:tail]
        if time.monotonic() > deadline:
            cut = True
            proc.kill()
            break
    err = proc.stderr.read().decode("utf-8", "replace").strip()
    code = proc.wait()
    out: dict[str, Any] = {"lines": found[-KEEP:], "read": count}
    if tail:
        out["tail"] = last[-tail:]
    if cut:
        out["cut"] = f"stopped reading after {JOURNAL_SECONDS:.0f} s"
    if code not in (0, None) and not cut:
        out["error"] = err.splitlines()[-1] if err else f"journalctl exited {code}"
    elif "insufficient permissions" in err or "not seeing messages from other users" in err:
        out["limited"] = "this user cannot read the system journal (the systemd-journal or adm group can)"
    return out


def pstore(needles: list[str]) -> dict[str, Any]:
    """What the kernel saved across the reboot (a panic's or an oops' dmesg), file by file."""
    try:
        names = sorted(os.listdir(PSTORE))
    except OSError as exc:
        return {"error": f"{PSTORE}: {exc.strerror or exc}", "files": []}
    files: list[dict[str, Any]] = []
    for name in names:
        path = os.path.join(PSTORE, name)
        try:
            with open(path, "rb") as f:
                text = f.read(PSTORE_BYTES).decode("utf-8", "replace")
        except OSError as exc:
            files.append({"name": name, "error": exc.strerror or str(exc)})
            continue
        lines = text.splitlines()
        files.append({"name": name, "lines": matching(lines, needles), "tail": lines[-TAIL:]})
    return {"files": files}


def boot_id() -> str | None:
    try:
        with open(BOOT_ID) as f:
            return f.read().strip()
    except OSError:
        return None


def booted_at() -> float | None:
    try:
        with open("/proc/uptime") as f:
            return time.time() - float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def main(argv: list[str]) -> None:
    since, needles = argv[0], argv[1:]
    report: dict[str, Any] = {"boot_id": boot_id(), "booted_at": booted_at(), "now": time.time()}
    report["previous"] = journal(["-b", "-1"], needles, tail=TAIL)
    current = ["-b", "0"] + (["--since", "@" + since] if since else [])
    report["current"] = journal(current, needles)
    report["pstore"] = pstore(needles)
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1:])
