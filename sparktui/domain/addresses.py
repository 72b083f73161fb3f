"""Small facts about addresses that several places need (one rule, one place)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """Whether a listen address keeps a server on this machine (``localhost``, 127.0.0.0/8, ``::1``): the
    web mode and the metrics exporter warn about anything wider."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
