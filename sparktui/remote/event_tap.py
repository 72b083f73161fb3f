"""Observers on the one event stream, without touching whoever produces or shows it.

``TappedBackend(backend, *observers)`` is the same ``ClusterBackend`` (each member of the Protocol passes
through, by name), except that ``run(sink)`` hands the backend a sink that feeds each observer as well —
the notifier, the Prometheus exporter's state. An observer that raises is logged and skipped: the
dashboard never suffers.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sparktui.domain.events import ClusterBackend, Event, EventSink

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
    """A ``ClusterBackend`` that is ``backend`` with ``observers`` on its event stream."""

    def __init__(self, backend: ClusterBackend, *observers: EventSink) -> None:
        self.backend = backend
        self.observers = tuple(observers)

    @property
    def node_names(self) -> Sequence[str]:
        return self.backend.node_names

    @property
    def readonly(self) -> bool:
        return self.backend.readonly

    @property
    def detached(self) -> bool:
        return self.backend.detached

    async def run(self, sink: EventSink) -> None:
        await self.backend.run(tee(sink, self.observers))

    async def start(self) -> None:
        await self.backend.start()

    async def stop(self) -> None:
        await self.backend.stop()

    async def restart(self) -> None:
        await self.backend.restart()

    async def smoke_test(self) -> str:
        return await self.backend.smoke_test()

    def select_log(self, source: str) -> None:
        self.backend.select_log(source)

    @property
    def log_source(self) -> str:
        return self.backend.log_source
