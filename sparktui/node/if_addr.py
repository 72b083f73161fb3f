"""An interface's IPv4 address, shared by the node scripts that compare addresses (``link``: the cable's
address for the link test; ``audit``: what each service will advertise against the cable's)."""

from __future__ import annotations

import socket
import struct


def if_addr(name: str) -> str | None:
    """The interface's IPv4 address (SIOCGIFADDR), ``None`` when it has none."""
    try:
        import fcntl
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            packed = struct.pack("256s", name[:15].encode())
            return socket.inet_ntoa(fcntl.ioctl(s.fileno(), 0x8915, packed)[20:24])
        finally:
            s.close()
    except OSError:
        return None
