"""The seam between whatever runs the cluster (SSH backend, demo simulation) and whoever shows it (the
dashboard, the headless verbs).

A backend posts these past-tense events to one sink; the UI keeps the latest of each and renders. Every
payload is an immutable value built on the producer side: a node's ``NodeReading`` (display units, rates,
the charts' history; built by ``domain/node_reading.py``), the engine's ``TimelineView`` (stage rows,
facts, failure, the stall's reference time; built by ``domain/engine_view.py``), the serving
``ServingSnapshot`` (rates from ``/metrics`` already computed). The UI computes none of them. The value
types live here with the events, so the producers import this module and it imports none of them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol, get_args, runtime_checkable

from sparktui.domain.stage_names import STAGE_LABELS, STAGES

if TYPE_CHECKING:   # the modules these come from cost their imports: named for the types only
    from sparktui.domain.history import RunRecord
    from sparktui.domain.logs import LogRecord
    from sparktui.domain.pace_reading import SlowServing
    from sparktui.domain.presence import SupervisorPresence
    from sparktui.domain.serving import ServingSnapshot
    from sparktui.domain.telemetry import ProcessRow, Rates, Sample


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


# ---- the engine's start, as the dashboard shows it (built by domain/engine_view.py) ---------------
@dataclass(frozen=True)
class StageView:
    name: str
    label: str
    status: str = "pending"           # pending / running / done / failed / skipped
    #: Duration from the log's own timestamps (for a running stage: up to its latest line).
    seconds: float | None = None
    done: float | None = None
    total: float | None = None


@dataclass(frozen=True)
class FailureView:
    kind: str
    stage: str | None
    message: str
    hint: str
    #: The node of the process that logged it, as the log names it (Ray's ``ip=`` or a name); None: the
    #: head's own processes (``sparktui.domain.logs.diagnosis.failure_node`` names it for the screen).
    node: str | None = None


def _no_facts() -> Mapping[str, object]:
    return MappingProxyType({})


@dataclass(frozen=True)
class TimelineView:
    """The stage rows (every stage, in order), the facts, the failure, and the stall's reference time."""

    #: The log's verdict so far: ``incomplete`` (starting), ``ready``, ``failed``, ``stopped``.
    outcome: str = "incomplete"
    stages: tuple[StageView, ...] = tuple(StageView(name, STAGE_LABELS[name]) for name in STAGES)
    facts: Mapping[str, object] = field(default_factory=_no_facts)
    failure: FailureView | None = None
    #: Wall clock of the running stage's last progress (or of the last stage event between stages); None
    #: once the start is over or when no clock was known.
    last_progress_at: float | None = None

    @property
    def running(self) -> StageView | None:
        return next((s for s in self.stages if s.status == "running"), None)

    def stall_seconds(self, now: float) -> float | None:
        """Seconds without progress at ``now`` (the render's clock)."""
        return None if self.last_progress_at is None else max(0.0, now - self.last_progress_at)


# ---- a node, as its panel shows it (built by domain/node_reading.py) --------------------------------
@dataclass(frozen=True)
class CableReading:
    """One QSFP cable (its RDMA devices summed): link state, rate and throughput in Gb/s."""

    name: str
    state: str | None = None
    rate: str | None = None
    rx_gbps: float | None = None
    tx_gbps: float | None = None
    #: Error counters that rose since the previous sample, with the increase.
    errors_rising: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class NodeReading:
    mem_total_gib: float | None = None
    mem_used_gib: float | None = None
    mem_available_gib: float | None = None
    cpu_percent: float | None = None
    gpu_name: str | None = None
    gpu_util: float | None = None
    gpu_temp_c: float | None = None
    gpu_power_w: float | None = None
    gpu_clock_mhz: float | None = None
    gpu_clock_max_mhz: float | None = None
    #: Active clock-event (throttle) reasons from NVML, e.g. ("SW power cap",); idle left out.
    gpu_clock_events: tuple[str, ...] = ()
    #: Xid errors NVML reported on this node's GPUs since the probe started (newest last).
    gpu_xids: tuple[int, ...] = ()
    gpu_mem_used_gib: float | None = None
    gpu_mem_total_gib: float | None = None
    #: Why there is no GPU reading ("no GPU", "NVML not available"), when there is none.
    gpu_missing: str | None = None
    cables: tuple[CableReading, ...] = ()
    processes: tuple[str, ...] = ()
    #: Our processes one by one, for the process view (pid, name, CPU %, RSS, GPU memory).
    process_rows: tuple[ProcessRow, ...] = ()
    #: The charts, oldest first (``NodeTelemetry.history``): memory used %, GPU busy %, cable Gb/s (rx+tx).
    mem_history: tuple[float, ...] = ()
    gpu_history: tuple[float, ...] = ()
    roce_history: tuple[float, ...] = ()
    #: Each chart's ``Ring.end``: how many points it has taken in all (its newest is point end - 1).
    mem_history_end: int = 0
    gpu_history_end: int = 0
    roce_history_end: int = 0


# ---- events ---------------------------------------------------------------------------------------
def link_text(phase: str, error: str, retry_in: float | None) -> str:
    """A link's state in words: ``connected`` / ``connecting`` / ``retrying in 4 s (Connection refused)`` /
    ``failed (…)``; ``retry_in``: seconds to the next attempt. The one wording, for the panel (its countdown
    ticks between events), the notifications and ``sparktui status``."""
    why = f"({error or 'no error text'})"
    if phase == "retrying":
        return f"retrying {why}" if retry_in is None else f"retrying in {max(0, round(retry_in))} s {why}"
    return f"failed {why}" if phase == "failed" else phase


@dataclass(frozen=True)
class NodeLinkChanged:
    """A node's link, as facts: the words are ``link_text``'s (the panel counts the retry down itself)."""

    node: str
    phase: str                      # LinkPhase value: connecting / connected / retrying / failed / closed
    #: The last connection error as the transport said it ("Connection refused"); "" when none.
    error: str = ""
    retry_at: float | None = None   # time.monotonic() of the next attempt
    #: Why the link is down, whole ("10.0.0.2:22: connection refused — is sshd running?"); "" when up.
    reason: str = ""

    def describe(self, now_monotonic: float | None = None) -> str:
        """``link_text`` at ``now_monotonic`` (default: now)."""
        now = time.monotonic() if now_monotonic is None else now_monotonic
        return link_text(self.phase, self.error, None if self.retry_at is None else self.retry_at - now)


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
class OperationBusy:
    """The backend took an operation on (``kind``: from the moment it is asked for, before its first step,
    which may wait seconds for the operation lock) or is done with it (``None``)."""

    kind: str | None


@dataclass(frozen=True)
class ServingSampled:
    snapshot: ServingSnapshot


@dataclass(frozen=True)
class ServingSlow:
    """Serving slower than it should (``sparktui.domain.serving_pace``): posted once when a rule starts to
    hold; ``slow`` carries the figures and the likely cause."""

    slow: SlowServing

    def describe(self) -> str:
        return self.slow.describe()


@dataclass(frozen=True)
class Notice:
    """Something to tell the person once (a toast)."""

    message: str
    severity: str = "information"   # information / warning / error


@dataclass(frozen=True)
class SupervisorSeen:
    """The supervisor's record on the head as just read (``sparktui.domain.presence``; ``None``: there
    never was a supervisor), and when it was read (epoch seconds): what "not seen for" counts to."""

    presence: SupervisorPresence | None
    read_at: float

    def describe(self) -> str | None:
        return None if self.presence is None else self.presence.describe(self.read_at)


@dataclass(frozen=True)
class ImageSeen:
    """The engine image a start uses (docker), in words: the one ``sparktui upgrade`` promoted and kept
    on the head (``sparktui.domain.upgrade.images``: its ref, short ID, vLLM version, who and when), or
    ``engine.image`` when none applies (``promoted`` False)."""

    text: str
    promoted: bool

    def describe(self) -> str:
        return f"image {self.text}" if self.promoted else f"image {self.text} (engine.image)"


@dataclass(frozen=True)
class UpgradeSeen:
    """``sparktui upgrade``'s one line once it is over, as its record on the head was just read
    (``sparktui.domain.upgrade.progress``: its outcome for a while after its end; ``text`` None: nothing
    to say — none ran lately, or one runs, whose stages are the running operation); ``level`` says how it
    reads: ``ok``, ``warning``, ``error``."""

    text: str | None
    level: str = "ok"


Event = (
    NodeLinkChanged | NodeIdentified | NodeSampled | LogRecords | EngineChanged | OperationChanged
    | OperationBusy | ServingSampled | ServingSlow | Notice | SupervisorSeen | ImageSeen | UpgradeSeen
)
EventSink = Callable[[Event], None]
#: Every kind of event, for an observer that reads them all.
EVENT_KINDS: tuple[type[Event], ...] = get_args(Event)

log = logging.getLogger(__name__)


class EventObserver(Protocol):
    """Reads some kinds of event beside the stream's consumer (the notifier, the exporter's state, the
    bench key's power tap): ``kinds`` names them, so no other event passes it."""

    @property
    def kinds(self) -> tuple[type[Event], ...]: ...

    def __call__(self, event: Event) -> None: ...


class EventStream:
    """A backend's one stream of events: each goes to the consumer (``run``'s sink: the dashboard's queue)
    and then to the observers subscribed to its kind, looked up by the event's type — an event passes
    only the observers that read it. An observer that raises is logged and skipped: the consumer never
    suffers."""

    def __init__(self) -> None:
        self.sink: EventSink | None = None
        self._observers: dict[type, tuple[EventSink, ...]] = {}

    def observe(self, observer: EventSink, kinds: Iterable[type[Event]] = EVENT_KINDS) -> None:
        for kind in kinds:
            self._observers[kind] = (*self._observers.get(kind, ()), observer)

    def post(self, event: Event) -> None:
        if self.sink is not None:
            self.sink(event)
        for observer in self._observers.get(type(event), ()):
            try:
                observer(event)
            except Exception:
                log.exception("event observer %r failed", observer)


class OperationRefused(Exception):
    """A lifecycle request while another runs, or in read-only mode."""


class ClusterBackend(Protocol):
    """What the dashboard drives. ``SshBackend`` (real nodes) and ``DemoBackend`` (simulation) fit it."""

    @property
    def node_names(self) -> Sequence[str]: ...

    @property
    def events(self) -> EventStream:
        """Its event stream: ``run``'s sink is the consumer; observers subscribe by kind
        (``events.observe``) before ``run``."""

    @property
    def readonly(self) -> bool:
        """Start, stop and restart are refused (``OperationRefused``)."""

    @property
    def detached(self) -> bool:
        """The engine outlives the dashboard (real nodes: quitting leaves it running; the demo's ends)."""

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

    @property
    def log_source(self) -> str:
        """The log streamed now (``select_log``'s last choice; "vllm" at first): the one record of it."""


@runtime_checkable
class SimulatedCluster(Protocol):
    """What a simulated cluster (the demo) has besides ``ClusterBackend``: its own clock (the times shown
    are the simulation's) and a made-up run history (for the stage ETAs). Asked with ``isinstance``."""

    def clock(self) -> float: ...

    def history_runs(self) -> list[RunRecord]: ...
