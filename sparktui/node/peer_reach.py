"""Runs on the head: argv = INTERVAL ROUNDS (0: until killed), then ``name=ip:port`` items; prints
{"name": true|false} per round (a refused or reset connection counts as an answer)."""

from __future__ import annotations

import itertools
import json
import sys
import time

from sparktui.node.tcp import one_round


def main(argv: list[str]) -> None:
    interval, rounds = float(argv[0]), int(argv[1])
    peers = []
    for a in argv[2:]:
        name, where = a.split("=", 1)
        ip, port = where.rsplit(":", 1)
        peers.append((name, ip, int(port)))
    for n in itertools.count(1):
        t0 = time.monotonic()
        print(json.dumps(one_round(peers, interval)), flush=True)
        if n == rounds:
            break
        time.sleep(max(0.0, interval - (time.monotonic() - t0)))


if __name__ == "__main__":
    main(sys.argv[1:])
