"""Runs on the head: argv = INTERVAL ROUNDS (0: until killed), then ``name=ip:port`` items; prints
{"name": true|false} per round (a refused or reset connection counts as an answer)."""

from __future__ import annotations

import errno
import itertools
import json
import socket
import sys
import time


def one_round(peers: list[tuple[str, str, int]], interval: float) -> dict[str, bool]:
    answered = (errno.ECONNREFUSED, errno.ECONNRESET)
    out = {}
    for name, ip, port in peers:
        s = socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(min(1.0, interval))
        try:
            s.connect((ip, port))
            out[name] = True
        except OSError as exc:
            out[name] = exc.errno in answered
        finally:
            s.close()
    return out


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
