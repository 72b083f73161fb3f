"""Runs on the Ray head's host: argv = HOST PORT TIMEOUT POLL [head]. Exits 0, printing "gcs answered after
N s", once a TCP connect to HOST:PORT succeeds — with ``head``, once the GCS also lists the head's node
alive ("gcs answered after N s; head node registered after M s"); 1 (the last error on stderr) when
TIMEOUT passes first.

Why ``head``: a worker's ``ray start`` asks the GCS for the head's node (its temp dir) and, finding none,
sleeps two seconds before it asks again (``get_all_node_info_until_retrieved``, Ray 2.x). Sent when the
port first answers, a second before the head's raylet registers, a worker lost those two seconds. (The
plan's own workers wait for the head's node themselves, ``ray_join``; this is for a ``ray_command`` of the
config's own.) Where the GCS cannot be read this way (token auth, a reply this reader does not know), the
port's answer is taken as before."""

from __future__ import annotations

import socket
import sys
import time

from sparktui.node.gcs_grpc import head_node_wait


def main(argv: list[str]) -> None:
    host, port, limit, poll = argv[0], int(argv[1]), float(argv[2]), float(argv[3])
    head = argv[4:5] == ["head"]
    t0 = time.monotonic()
    while True:
        try:
            socket.create_connection((host, port), timeout=1.0).close()
        except OSError as exc:
            if time.monotonic() - t0 > limit:
                print(f"gcs at {host}:{port} did not answer within {limit:.0f} s: {exc}",
                      file=sys.stderr)
                sys.exit(1)
            time.sleep(poll)
            continue
        answered = f"gcs answered after {time.monotonic() - t0:.2f} s"
        print(answered + ("; " + head_node_wait(host, port, t0, limit, poll) if head else ""), flush=True)
        return


if __name__ == "__main__":
    main(sys.argv[1:])
