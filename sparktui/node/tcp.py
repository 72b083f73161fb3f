"""TCP checks shared by the node scripts: does a peer answer at all (``peer_reach``, ``status``), is a port
open (``status``: the Ray GCS before Ray is asked)."""

from __future__ import annotations

import errno
import socket


def one_round(peers: list[tuple[str, str, int]], interval: float) -> dict[str, bool]:
    """{name: the host answered} for each (name, ip, port): a refused or reset connection is an answer
    (the host is there); a timeout or "unreachable" is not. Each connect waits ``min(1, interval)`` s."""
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


def port_open(host: str, port: int, timeout: float) -> bool:
    """One connect attempt: True when something listens at ``host:port``."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError:
        return False
    return True
