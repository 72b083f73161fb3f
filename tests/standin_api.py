"""The stand-in's OpenAI API and /metrics on loopback, with no engine behind the process: what the tests of
the bench, the dashboard's `b` and status's serving pace talk to through a local head."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from sparktui.sim.standin_http import ServedModel, StandinHTTPServer
from sparktui.sim.standin_metrics import ServingMetrics


@contextlib.contextmanager
def standin_api() -> Iterator[int]:
    """A served stand-in model on 127.0.0.1 (its port), stopped on the way out."""
    model = ServedModel(["standin"], "/models/standin-model", 32768, "0.19.2",
                        ServingMetrics("new", "standin", 32768), lambda line: None)
    server = StandinHTTPServer("127.0.0.1", 0, model)
    server.bind_early()
    server.start_serving()
    try:
        yield int(server.server_address[1])
    finally:
        server.stop()
