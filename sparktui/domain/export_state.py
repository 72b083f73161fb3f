"""The latest of everything the Prometheus exporter serves, kept from the event stream.

An ``EventSink``: fed the same events as the dashboard (node samples with the rates their producer
computed, link changes, engine changes with their timeline, serving snapshots); it computes nothing of
its own. The exporter's collector reads a consistent copy under the lock at each scrape (the HTTP server
answers from its own thread).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from sparktui.domain.events import (
    EngineChanged,
    EngineState,
    Event,
    NodeLinkChanged,
    NodeSampled,
    ServingSampled,
)
from sparktui.domain.telemetry import Rates, Sample


@dataclass(frozen=True)
class NodeView:
    name: str
    link: str | None              # LinkPhase value
    sample: Sample | None
    rates: Rates | None


@dataclass(frozen=True)
class ExportView:
    """One scrape's worth: nodes in config order, the engine, the serving snapshot."""

    nodes: tuple[NodeView, ...]
    engine_state: EngineState
    engine_detail: str
    #: stage name → seconds, of the stages of the current (or last) start that finished or run
    stage_seconds: dict[str, float] = field(default_factory=dict)
    vllm_version: str | None = None
    serving: Any = None           # sparktui.domain.serving.ServingSnapshot
    engine_since: float | None = None


class ExportState:
    #: What the exporter reads of the event stream (``EventStream.observe``).
    kinds = (NodeSampled, NodeLinkChanged, EngineChanged, ServingSampled)

    def __init__(self, node_names: tuple[str, ...] = ()) -> None:
        self._lock = threading.Lock()
        self._order = list(node_names)
        #: The latest sample of each node and the rates its producer computed (``NodeSampled``).
        self._samples: dict[str, NodeSampled] = {}
        self._links: dict[str, str] = {}
        self._state = EngineState.UNKNOWN
        self._detail = ""
        self._since: float | None = None
        self._stages: dict[str, float] = {}
        self._version: str | None = None
        self._serving: Any = None

    def __call__(self, event: Event) -> None:
        with self._lock:
            if isinstance(event, NodeSampled):
                if event.sample is not None:
                    self._node(event.node)
                    self._samples[event.node] = event
            elif isinstance(event, NodeLinkChanged):
                self._node(event.node)
                self._links[event.node] = event.phase
            elif isinstance(event, EngineChanged):
                if event.state != self._state:
                    self._since = time.time()
                self._state, self._detail = event.state, event.detail
                self._version = event.vllm_version or self._version
                timeline = event.timeline
                if timeline is not None:
                    self._stages = {s.name: float(s.seconds) for s in timeline.stages
                                    if s.seconds is not None and s.status in ("done", "running", "failed")}
            elif isinstance(event, ServingSampled):
                self._serving = event.snapshot

    def _node(self, name: str) -> None:
        if name not in self._order:
            self._order.append(name)

    def view(self) -> ExportView:
        with self._lock:
            nodes = []
            for name in self._order:
                s = self._samples.get(name)
                nodes.append(NodeView(name, self._links.get(name), s.sample if s else None,
                                      s.rates if s else None))
            return ExportView(tuple(nodes), self._state, self._detail, dict(self._stages), self._version,
                              self._serving, self._since)
