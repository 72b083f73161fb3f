"""The seam between whatever runs the cluster (SSH backend, demo simulation) and whoever shows it (the
dashboard, the headless verbs).

A backend posts these past-tense events to one sink; the UI keeps the latest of each and renders. Every
payload is an immutable value built on the producer side: a node's ``NodeReading`` (display units, rates,
the charts' history), the engine's ``TimelineView`` (stage rows, facts, failure, the stall's reference time),
the serving ``ServingSnapshot`` (rates from ``/metrics`` already computed). The UI computes none of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:   # the payload modules import this one (and cost their imports): named for the types only
    from sparktui.domain.engine_view import TimelineView
    from sparktui.domain.logs import LogRecord
    from sparktui.domain.node_reading import NodeReading
    from sparktui.domain.serving import ServingSnapshot
    from sparktui.domain.telemetry import Rates, Sample


class EngineState(StrEnum):
    UNKNOWN = "unknown"        # not yet discovered (dashboard just started)
    STOPPED = "stopped"
    PREFLIGHT = "preflight"
    STARTING = "starting"      # Ray up / vllm serve launched; the timeline says which stage
    VERIFYING = "verifying"    # "Application startup complete" seen; health + one tiny completion running
    READY = "ready"
    DEGRADED = "degraded"      # was ready; evidence says it cannot serve now (a node lost from Ray, …)
    WEDGED = "wedged"          # was ready; requests run but no tokens come out
    STOPPING = "stopping"
    FAILED = "failed"


class StepStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    OK = "ok"
    WARNING = "warning"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class StepView:
    """One step of a lifecycle operation (a preflight check, ``ray start`` on a node, …)."""

    name: str
    node: str | None = None
    status: StepStatus = StepStatus.PENDING
    seconds: float | None = None
    message: str = ""
    output_tail: tuple[str, ...] = ()


@dataclass(frozen=True)
class OperationView:
    """The lifecycle operation running now (or the last one), with its steps."""

    kind: str                       # "start" | "stop" | "restart" | "preflight" | "clean"
    steps: tuple[StepView, ...] = ()
    running: bool = True
    ok: bool | None = None
    message: str = ""
    started: float = field(default_factory=time.time)


# ---- events ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeLinkChanged:
    node: str
    phase: str                      # LinkPhase value: connecting / connected / retrying / failed / closed
    detail: str                     # human text, e.g. "retrying in 4 s (Connection refused)"
    retry_at: float | None = None   # time.monotonic() of the next attempt
    #: Why the link is down, whole ("10.0.0.2:22: connection refused — is sshd running?"); "" when up.
    reason: str = ""


@dataclass(frozen=True)
class NodeIdentified:
    node: str
    hostname: str = ""
    kernel: str = ""
    uptime_seconds: float | None = None


@dataclass(frozen=True)
class NodeSampled:
    """One telemetry sample of a node: what the panel shows (``reading``), the raw sample and the rates the
    producer computed from it (bytes/s per cable: ``NodeTelemetry``'s, the one computation) for observers
    that export or keep raw figures (the Prometheus exporter, a benchmark's power series)."""

    node: str
    reading: NodeReading
    sample: Sample | None = None
    rates: Rates | None = None


@dataclass(frozen=True)
class LogRecords:
    """Parsed records from one log source, in order. ``source`` is "vllm" or "ray:<node>"."""

    source: str
    records: Sequence[LogRecord]


@dataclass(frozen=True)
class EngineChanged:
    state: EngineState
    detail: str = ""                # e.g. "weights 3/12", "crashed after 2h 3m: …"
    timeline: TimelineView | None = None
    vllm_version: str | None = None
    ttft_seconds: float | None = None   # of the readiness completion


@dataclass(frozen=True)
class OperationChanged:
    operation: OperationView


@dataclass(frozen=True)
class ServingSampled:
    snapshot: ServingSnapshot


@dataclass(frozen=True)
class Notice:
    """Something to tell the person once (a toast)."""

    message: str
    severity: str = "information"   # information / warning / error


Event = (
    NodeLinkChanged | NodeIdentified | NodeSampled | LogRecords | EngineChanged | OperationChanged
    | ServingSampled | Notice
)
EventSink = Callable[[Event], None]


class OperationRefused(Exception):
    """A lifecycle request while another runs, or in read-only mode."""


class ClusterBackend(Protocol):
    """What the dashboard drives. ``SshBackend`` (real nodes) and ``DemoBackend`` (simulation) fit it."""

    node_names: Sequence[str]
    readonly: bool

    async def run(self, sink: EventSink) -> None:
        """Connect, discover (re-attach to) a running engine, then stream telemetry, logs and state into
        ``sink`` until cancelled. Never raises for a lost node: that is an event."""

    async def start(self) -> None:
        """Run preflight + start. Raises ``OperationRefused`` if an operation is already running."""

    async def stop(self) -> None: ...

    async def restart(self) -> None: ...

    async def smoke_test(self) -> str:
        """One streaming completion; returns a one-line summary (tokens/s, first words)."""

    def select_log(self, source: str) -> None:
        """Switch the streamed log: "vllm" (the head's engine log) or "ray:<node>"."""
