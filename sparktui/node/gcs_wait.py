"""Runs on the Ray head's host: argv = HOST PORT TIMEOUT POLL. Exits 0, printing "gcs answered after N s",
once a TCP connect to HOST:PORT succeeds; 1 (the last error on stderr) when TIMEOUT passes first."""

from __future__ import annotations

import socket
import sys
import time


def main(argv: list[str]) -> None:
    host, port, limit, poll = argv[0], int(argv[1]), float(argv[2]), float(argv[3])
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
        print(f"gcs answered after {time.monotonic() - t0:.2f} s", flush=True)
        return


if __name__ == "__main__":
    main(sys.argv[1:])
