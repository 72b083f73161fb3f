"""A scripted backend for the dashboard's Pilot tests: it posts exactly what a test tells it to and records
every call, so a test can drive the UI deterministically (the real backends have their own tests)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from textual.pilot import Pilot

from sparktui.config import UIConfig
from sparktui.domain.events import Event, EventSink, EventStream, NodeSampled, OperationRefused
from sparktui.domain.node_reading import NodeFeed
from sparktui.domain.telemetry import Sample
from sparktui.ui.app import AppSwitches, SparkApp

FIXED_NOW = 1_767_225_600.0


class FakeBackend:
    #: As a real cluster's engine: it outlives the dashboard (``ClusterBackend.detached``).
    detached = True

    def __init__(self, nodes: Sequence[str] = ("spark1", "spark2"), readonly: bool = False) -> None:
        self.node_names: Sequence[str] = tuple(nodes)
        self.readonly = readonly
        self.log_source = "vllm"
        self.calls: list[str] = []
        self.sink: EventSink | None = None
        self.events = EventStream()
        #: Set to a message to make lifecycle calls raise OperationRefused with it.
        self.refuse: str | None = None
        self.smoke_answer = "21.0 tok/s, first token 150 ms: “Hello there!”"
        self.node_feed = NodeFeed()

    def sampled(self, node: str, sample: Sample) -> NodeSampled:
        """The event a real backend posts for ``sample``: with its reading, built as the producer does."""
        return self.node_feed.sampled(node, sample)

    async def run(self, sink: EventSink) -> None:
        self.sink = sink
        await asyncio.Event().wait()

    def post(self, *events: Event) -> None:
        assert self.sink is not None, "the app has not started the backend yet"
        for event in events:
            self.sink(event)

    async def _lifecycle(self, kind: str) -> None:
        self.calls.append(kind)
        if self.refuse:
            raise OperationRefused(self.refuse)

    async def start(self) -> None:
        await self._lifecycle("start")

    async def stop(self) -> None:
        await self._lifecycle("stop")

    async def restart(self) -> None:
        await self._lifecycle("restart")

    async def smoke_test(self) -> str:
        self.calls.append("smoke_test")
        return self.smoke_answer

    def select_log(self, source: str) -> None:
        self.calls.append(f"select_log:{source}")
        self.log_source = source


def make_app(backend: FakeBackend | None = None, clock: Callable[[], float] = lambda: FIXED_NOW,
             switches: AppSwitches | None = None, **ui: Any) -> tuple[SparkApp, FakeBackend]:
    backend = backend or FakeBackend()
    app = SparkApp(backend, UIConfig(**ui), roles={"spark1": "head", "spark2": "worker"}, clock=clock,
                   switches=switches or AppSwitches())
    return app, backend


async def settle(pilot: Pilot[Any], app: SparkApp) -> None:
    """Let the backend worker start, apply everything queued, and let the screen catch up."""
    await pilot.pause()
    app.drain()
    await pilot.pause()


def notifications(app: SparkApp) -> list[str]:
    return [n.message for n in app._notifications]


async def wait_for_actions(app: SparkApp) -> None:
    """Wait for the lifecycle and smoke-test workers (not the backend's, which runs for the app's life)."""
    workers = [w for w in app.workers if w.group in ("lifecycle", "smoke")]
    if workers:  # an empty list would mean "every worker", the backend's included
        await app.workers.wait_for_complete(workers)
