"""argv: HOST PORT SECONDS. Prints "ok" when a TCP connection to HOST:PORT opens, else the reason."""

from __future__ import annotations

import socket
import sys


def main(argv: list[str]) -> None:
    try:
        socket.create_connection((argv[0], int(argv[1])), float(argv[2])).close()
        print("ok")
    except OSError as e:
        print(f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    main(sys.argv[1:])
