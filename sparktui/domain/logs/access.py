"""uvicorn's access log: which lines are requests served, and which are monitoring probes.

vLLM's API server logs every HTTP request through uvicorn (``INFO:     10.0.0.5:45344 - "POST
/v1/chat/completions HTTP/1.1" 200 OK``), the dashboard's own ``/health`` and ``/metrics`` polls (one of
each every two seconds after ready) and any other monitor's (Prometheus, a load balancer) included. Those
probes are no work the engine did for anyone: they are not counted as requests served, and the live log
hides them (``h`` shows them) so that they do not bury what the engine says."""

from __future__ import annotations

import re

#: Paths that monitors poll: liveness, metrics, version, the model list (a client's health check).
PROBE_PATHS = ("/health", "/metrics", "/ping", "/version", "/v1/models")

# A probe, as uvicorn prints it (the colour codes of a tty stripped): method, path with maybe a query,
# protocol, then the status: a 2xx or 304 is a probe answered; only a 2xx counts in ``count_ok_requests``.
_PATHS = "|".join(re.escape(p) for p in PROBE_PATHS)
_PROBE_REQUEST = rf'"(?:GET|HEAD) (?:{_PATHS})(?:\?[^" ]*)? HTTP/'
_PROBE = re.compile(_PROBE_REQUEST + r'[\d.]+" (?:2\d\d|304)')
_PROBE_OK = re.compile(_PROBE_REQUEST + r'1\.[01]" 2')


_OK = (b'HTTP/1.1" 2', b'HTTP/1.0" 2')
_PROBE_OK_BYTES = re.compile(_PROBE_OK.pattern.encode())


def count_ok_requests(text: str, start: int = 0, end: int | None = None) -> int:
    """Requests served in ``text[start:end]``: uvicorn access-log lines with a 2xx status
    (``"POST /v1/chat/completions HTTP/1.1" 200 OK``), monitoring probes (:func:`is_probe_request`) not
    counted."""
    return count_ok_requests_bytes(text[start:end].encode("utf-8", "surrogatepass"))


def count_ok_requests_bytes(data: bytes, start: int = 0, end: int | None = None) -> int:
    """:func:`count_ok_requests` in a log's bytes (the bulk scan's blocks, read in place)."""
    stop = len(data) if end is None else end
    ok = data.count(_OK[0], start, stop) + data.count(_OK[1], start, stop)
    if not ok:
        return 0
    return ok - len(_PROBE_OK_BYTES.findall(data, start, stop))


def is_probe_request(message: str) -> bool:
    """A monitoring probe answered: ``GET /health`` (or ``/metrics``, ``/ping``, ``/version``,
    ``/v1/models``) with a 2xx or 304 status. A failed probe (a 500 from ``/health`` as the engine dies) is
    no probe here: it is news."""
    return " HTTP/" in message and _PROBE.search(message) is not None
