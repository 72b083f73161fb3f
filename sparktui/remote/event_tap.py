"""Observers on the one event stream, without touching whoever produces or shows it.

``TappedBackend(backend, *observers)`` is the same ``ClusterBackend`` (every attribute passes through),
except that ``run(sink)`` hands the backend a sink that feeds each observer as well — the notifier, the
Prometheus exporter's state. An observer that raises is logged and skipped: the dashboard never suffers.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from sparktui.domain.events import Event, EventSink

log = logging.getLogger(__name__)


def tee(sink: EventSink, observers: Sequence[EventSink]) -> EventSink:
    def both(event: Event) -> None:
        sink(event)
        for observer in observers:
            try:
                observer(event)
            except Exception:
                log.exception("event observer %r failed", observer)

    return both


class TappedBackend:
    def __init__(self, backend: Any, *observers: EventSink) -> None:
        self._backend = backend
        self._observers = tuple(observers)

    async def run(self, sink: EventSink) -> None:
        await self._backend.run(tee(sink, self._observers))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)
