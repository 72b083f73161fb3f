"""Runs on the head: argv = INTERVAL ROUNDS (0: until killed), then ``name=ip:port`` items and maybe
``changes``; prints {"name": true|false} per round (a refused or reset connection counts as an answer).
``changes`` (the dashboard's watch): a round is printed only when its answer changed, or ten seconds on
(``changes.ChangesOnly``; the reach is still tried every INTERVAL)."""

from __future__ import annotations

import itertools
import json
import sys
import time

from sparktui.node.changes import ChangesOnly
from sparktui.node.tcp import one_round


def main(argv: list[str]) -> None:
    interval, rounds = float(argv[0]), int(argv[1])
    peers = []
    for a in argv[2:]:
        if "=" not in a:
            continue   # a flag
        name, where = a.split("=", 1)
        ip, port = where.rsplit(":", 1)
        peers.append((name, ip, int(port)))
    watch = ChangesOnly() if "changes" in argv[2:] else None
    for n in itertools.count(1):
        t0 = time.monotonic()
        line = json.dumps(one_round(peers, interval))
        if watch is None or watch.due(line, t0):
            print(line, flush=True)
        if n == rounds:
            break
        time.sleep(max(0.0, interval - (time.monotonic() - t0)))


if __name__ == "__main__":
    main(sys.argv[1:])
