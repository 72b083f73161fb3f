"""``ours(tag)``: the live processes of one sparktui tag, shared by the ``tagged`` and ``facts`` scripts.

A process is ours when its environment carries SPARKTUI_TAG=<tag> (Ray daemons, Ray workers, vLLM: they
all inherit it), or when it descends from one that does. Descendants count because a tag can vanish:
Ray's agents (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) rewrite their command line over their
environment (setproctitle), but they stay children of the tagged raylet.
"""

from __future__ import annotations

import os


def ours(tag: str) -> dict[int, str]:
    """{pid: command line} of our processes; this script and zombies left out."""
    needle = ("SPARKTUI_TAG=" + tag).encode()
    me = os.getpid()
    parent: dict[int, int] = {}
    tagged: set[int] = set()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if fields[0] == "Z":
                continue
            parent[int(d)] = int(fields[1])
            with open(f"/proc/{d}/environ", "rb") as fb:
                if needle in fb.read().split(b"\0"):
                    tagged.add(int(d))
        except (OSError, ValueError, IndexError):
            continue
    grew = True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in tagged and pid not in tagged and pid != me:
                tagged.add(pid)
                grew = True
    found: dict[int, str] = {}
    for pid in tagged:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fb:
                found[pid] = fb.read().replace(b"\0", b" ").strip().decode("utf-8", "replace")
        except OSError:
            continue
    return found
