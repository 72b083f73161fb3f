"""``sparktui --demo``: a simulated two-node cluster in this process — no SSH, no root, no GPU, no Ray.

The story's vLLM start (``sparktui.sim.demo_story``: real recorded lines with the story's figures and pace)
is replayed in real time through the real log parser and stage machine (``sparktui.domain.logs``), so it
reaches ready in about a minute and every duration it states is one the clock measures; node
telemetry is made up to follow the stage the log is in (RoCE traffic while weights load, GPUs busy while
compiling and capturing CUDA graphs, unified memory rising with the weights and the KV cache) and is posted
as real ``telemetry.Sample`` objects, so the dashboard runs exactly the code it runs for real nodes.

Everything is driven by a simulated clock (``DemoSimulation.advance``): the same seed and the same
``frozen_at`` give the same screen, which is what the snapshot tests rely on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sparktui.domain.engine_session import EnginePorts, EngineSession
from sparktui.domain.engine_state import AFTER_READY
from sparktui.domain.engine_view import timeline_view
from sparktui.domain.events import (
    EngineChanged,
    EngineState,
    Event,
    EventSink,
    EventStream,
    ImageSeen,
    LogRecords,
    NodeIdentified,
    NodeLinkChanged,
    Notice,
    OperationBusy,
    OperationChanged,
    OperationRefused,
    OperationView,
    ServingSampled,
    StepStatus,
    StepView,
    UpgradeSeen,
)
from sparktui.domain.history import RunRecord, record_run
from sparktui.domain.lifecycle.ray_state import ExpectedNode, RayNode, RayState
from sparktui.domain.logs import LogRecord, TimelineSnapshot
from sparktui.domain.node_reading import NodeFeed
from sparktui.domain.serving import LatencyQuantiles, ServingHistory, ServingSnapshot
from sparktui.domain.telemetry import (
    CpuSample,
    GpuDevice,
    GpuProcess,
    GpuSample,
    MemorySample,
    NodeProcess,
    RdmaPort,
    Sample,
)
from sparktui.domain.upgrade_view import upgrade_operation
from sparktui.sim.demo_scenarios import DEFAULT_SCENARIO, SCENARIOS, Scenario
from sparktui.sim.demo_story import ORIGIN, STORY, timed_log
from sparktui.sim.demo_upgrade import demo_upgrade
from sparktui.sim.log_stamps import restamp
from sparktui.sim.timeline_feed import TimelineFeed

#: A fixed wall-clock origin for the simulation (the story's) so frozen screens never change.
EPOCH = ORIGIN
GIB = 1024**3
MEM_TOTAL = STORY.mem_total_bytes
NODES = STORY.nodes
ROLES = {NODES[0]: "head", NODES[1]: "worker"}
NODE_IPS = dict(zip(STORY.nodes, STORY.ips, strict=True))
RDMA_DEVICES = STORY.rdma_devices
LINK_RATE = STORY.link_rate
STEP_SECONDS = 0.35

PREFLIGHT_STEPS: tuple[tuple[str, str | None, str], ...] = (
    ("SSH reachable", NODES[0], f"aurora@{NODES[0]}"),
    ("SSH reachable", NODES[1], f"aurora@{NODES[1]}"),
    ("docker usable", None, "both nodes"),
    ("image present, same ID", None, f"{STORY.image} sha256:3f1c…"),
    ("model directory identical", None, f"{STORY.model_files} files, {STORY.model_dir_gib} GiB on both"),
    ("RDMA link up", None, f"{'+'.join(RDMA_DEVICES)} ACTIVE {STORY.link_gbps:.0f}G"),
    ("free unified memory", None, f"{STORY.mem_total_gib - STORY.idle_used_gib[0]:.0f} GiB / "
                                  f"{STORY.mem_total_gib - STORY.idle_used_gib[1]:.0f} GiB available"),
    ("ports free", NODES[0], f"{STORY.api_port}, {STORY.ray_port}"),
    ("no leftovers of an earlier run", None, ""),
    ("vLLM version in image", None, f"{STORY.vllm_version} (log dialect known)"),
)
LAUNCH_STEPS: tuple[tuple[str, str | None, str], ...] = (
    ("ray start --head", NODES[0], f"GCS {STORY.ips[0]}:{STORY.ray_port}"),
    ("ray start", NODES[1], "joined"),
    ("wait for Ray: 2 nodes, 2 GPUs", None, "2/2 nodes, 2/2 GPUs"),
    ("vllm serve (detached)", NODES[0], f"pid {STORY.api_pid}, log ~/.local/state/sparktui/vllm.log"),
)
#: A start's steps as the SSH backend names them (its preflight's are "preflight: …").
START_STEPS: tuple[tuple[str, str | None, str], ...] = (
    *((f"preflight: {name}", node, msg) for name, node, msg in PREFLIGHT_STEPS), *LAUNCH_STEPS)
#: The readiness check: how long it takes, and the first token of its completion.
VERIFY_SECONDS = 1.5
SMOKE_TTFT_S = 0.182
STOP_STEPS: tuple[tuple[str, str | None, str], ...] = (
    ("stop vLLM (SIGINT)", NODES[0], "exited after 1.2 s"),
    ("ray stop", NODES[0], ""),
    ("ray stop", NODES[1], ""),
    ("remove our containers", None, "sparktui-head, sparktui-worker"),
    ("verify nothing is left", None, "no container or Ray/vLLM process of ours"),
)


#: Requests running with no token out for this long = wedged (the serving panel's stall clock).
WEDGE_AFTER_S = 10.0
#: Ray's GCS marks a node dead after missing heartbeats (≈ 5 × 3 s on 2.60; reference ray-cluster-state §8).
RAY_DEAD_AFTER_S = 6.0
#: What `ray list nodes` says of a node whose raylet stopped answering (Ray 2.60, recorded).
RAY_DEAD_MESSAGE = "Unexpected termination: health check failed due to missing too many heartbeats"


@dataclass(frozen=True)
class ReplayLine:
    at: float                 # seconds after `vllm serve` was launched
    text: str                 # the physical line as Ray's log monitor would print it on the head
    node: str                 # where it was printed
    remote: bool              # forwarded by Ray from the worker node


def story_replay(scenario: Scenario) -> list[ReplayLine]:
    """The head's vLLM log for this scenario's start, each line at the time the story's pace gives it (the
    demo plays it in real time: the log's durations, bars and stamps agree with the clock)."""
    out = []
    for at, text in timed_log(STORY, nccl=scenario.nccl, fail=scenario.fail):
        # The story's log names spark2 by its Ray ``ip=`` already; the line is replayed as written.
        remote = f"ip={NODE_IPS[NODES[1]]})" in text
        out.append(ReplayLine(at, text, NODES[1] if remote else NODES[0], remote))
    return out


# ---- what each stage does to the hardware ----------------------------------------------------------
@dataclass(frozen=True)
class Load:
    gpu: float            # utilisation %
    cpu: float            # %
    roce: float           # Gb/s each way on the cable
    power: float | None = None   # W; None: follows the utilisation


IDLE = Load(gpu=0, cpu=3, roce=0.002)
#: The worker runs no API server and no engine core: less CPU, the same GPU work.
CPU_FACTOR = {NODES[0]: 1.0, NODES[1]: 0.55}
CPU_COUNT = 20   # a GB10's cores (10 Cortex-X925 + 10 Cortex-A725)
#: Our processes in the process view (``P``): kind → (share of the node's busy cores, resident memory in GiB
#: at rest). A Ray worker actor drives its GPU from one busy thread and holds its shard's host side; the API
#: server tokenizes and streams; raylet only schedules. (GPU memory is the worker's, in NVML's list.)
PROCESS_LOAD = {"ray-worker": (0.55, 2.4), "vllm": (0.25, 1.4), "raylet": (0.02, 0.19)}
STAGE_LOAD = {
    "config": Load(2, 35, 0.01),
    "placement": Load(2, 20, 0.05),
    "distributed": Load(8, 25, 1.5),      # NCCL rings set up over the cable
    "weights": Load(15, 60, 0.4),         # each node reads its own copy of its shard: little on the cable
    "compile": Load(96, 100, 0.8),
    "kv_cache": Load(70, 40, 6.0),
    "cuda_graphs": Load(93, 55, 18.0),    # all-reduce in every captured graph
    "engine": Load(20, 20, 0.5),
    "api": Load(5, 15, 0.1),
}
SERVING = Load(gpu=62, cpu=18, roce=9.0)
#: A wedged engine: kernels spin (NCCL waiting on a peer) but draw little power — no real work.
WEDGED_LOAD = Load(gpu=95, cpu=12, roce=0.01, power=20.0)
#: NCCL over TCP sockets moves a fraction of what RoCE does (the same cable, through the kernel).
SOCKET_FACTOR = 0.3


def engine_memory_gib(snapshot: TimelineSnapshot | None) -> float:
    """Unified memory the engine holds on each node as its stages go: CUDA context and NCCL buffers once
    distributed init starts, the weight shard as the shards load, the profiling run's activation peak,
    then the KV cache (which is larger) and the CUDA graphs — and all of it stays once ready."""
    if snapshot is None:
        return 0.0
    st = {s.name: s for s in snapshot.stages}
    order = [s.name for s in snapshot.stages]

    def reached(name: str) -> bool:
        return any(st[n].status != "pending" for n in order[order.index(name):])

    def fraction(name: str) -> float:
        stage = st[name]
        if stage.status in ("done", "skipped") or any(
                st[n].status != "pending" for n in order[order.index(name) + 1:]):
            return 1.0
        if stage.status == "pending":
            return 0.0
        return stage.progress.done / stage.progress.total if stage.progress and stage.progress.total else 0.0

    mem = STORY.non_torch_gib if reached("distributed") else 0.0
    mem += STORY.weights_gib * fraction("weights")
    profiling = st["kv_cache"].status in ("running", "failed") or (
        st["kv_cache"].status == "pending" and st["compile"].status in ("done", "skipped"))
    if profiling:   # vLLM ≤ 0.17 logs nothing as the profiling run starts: it follows compile at once
        mem += STORY.activation_gib                   # the profiling run's peak, before the KV cache
    elif fraction("kv_cache") == 1.0:
        mem += STORY.kv_cache_gib
    mem += STORY.graphs_gib * fraction("cuda_graphs")
    return mem


@dataclass
class NodeSim:
    name: str
    rng: random.Random
    seq: int = 0
    rx: dict[str, int] = field(default_factory=lambda: {d: 0 for d in RDMA_DEVICES})
    tx: dict[str, int] = field(default_factory=lambda: {d: 0 for d in RDMA_DEVICES})
    mem: float = 0.0
    temp: float = 38.0
    last_gpu: tuple[float, float] = (0.0, 0.0)   # utilisation %, power W of the latest sample
    #: CPU seconds each of our processes has used (what the probe reads from /proc/PID/stat), and when the
    #: last sample was taken (the simulated monotonic clock).
    cpu_seconds: dict[int, float] = field(default_factory=dict)
    sampled_at: float | None = None

    def __post_init__(self) -> None:
        self.cpu_factor = CPU_FACTOR.get(self.name, 1.0)
        self.idle_mem = STORY.idle_used_gib[NODES.index(self.name)] if self.name in NODES else 7.0
        self.mem = self.idle_mem

    def sample(self, t: float, load: Load, engine_gib: float, interval: float, received: float | None,
               ray_up: bool = False, vllm_up: bool = False, cached_gib: float = 4.2) -> Sample:
        r = self.rng
        self.seq += 1
        # Memory moves towards its target instead of jumping (weights stream in over seconds).
        target = self.idle_mem + engine_gib
        self.mem += (target - self.mem) * min(1.0, 0.6 * interval)
        jitter = 1.0 + 0.08 * math.sin(t * 1.7 + self.seq) + r.uniform(-0.05, 0.05)
        if load.power is not None:   # spinning kernels: a flat line, not a working engine's wobble
            jitter = 1.0 + r.uniform(-0.02, 0.02)
        gpu = max(0.0, min(100.0, load.gpu * jitter)) if load.gpu else 0.0
        # The worker trails the head a little: the same work, a few percent apart.
        if self.name != NODES[0]:
            gpu = max(0.0, min(100.0, gpu * 0.97))
        self.temp += ((38 + (gpu if load.power is None else load.power * 0.5) * 0.42) - self.temp) * 0.25
        power = (11 + gpu * 0.95 if load.power is None else load.power) + r.uniform(-1, 1)
        self.last_gpu = (gpu, power)
        gbps = max(0.0, load.roce * jitter)
        for i, dev in enumerate(RDMA_DEVICES):
            share = 0.5 + (0.04 if i == 0 else -0.04)
            octets = int(gbps * share * 1e9 / 8 * interval / 4)
            self.tx[dev] += octets
            self.rx[dev] += int(octets * r.uniform(0.96, 1.04))
        used = int(self.mem * GIB)
        procs: tuple[NodeProcess, ...] = ()
        gpu_procs: tuple[GpuProcess, ...] = ()
        index = NODES.index(self.name) if self.name in NODES else 1
        if ray_up:
            procs = (NodeProcess(1201, "raylet", "raylet"),)
        if vllm_up:
            worker = STORY.worker_pids[index]
            procs = (*procs, NodeProcess(worker, "ray::RayWorkerWrapper", "ray-worker"))
            if self.name == NODES[0]:
                procs = (NodeProcess(STORY.api_pid, "vllm", "vllm"), *procs)
            # The engine's memory is the Ray worker actor's (it holds this node's shard and KV cache).
            gpu_procs = (GpuProcess(worker, "ray::RayWorkerWrapper", int(engine_gib * GIB)),)
        cpu = round(min(100.0, load.cpu * self.cpu_factor * jitter), 1)
        procs = self._measured(procs, t, cpu, engine_gib)
        return Sample(
            seq=self.seq, mono=t, wall=EPOCH + t, host=self.name, interval=interval,
            memory=MemorySample(total=MEM_TOTAL, used=used, available=MEM_TOTAL - used,
                                cached=int(cached_gib * GIB), swap_total=0, swap_used=0),
            cpu=CpuSample(percent=cpu, count=CPU_COUNT),
            gpu=GpuSample(source="nvml", driver_version="580.95.05", devices=(GpuDevice(
                index=0, name="NVIDIA GB10", util_percent=round(gpu), temperature_c=round(self.temp),
                power_w=round(power, 1), sm_clock_mhz=2418 if gpu > 20 else 1200, memory_unified=True,
                processes=gpu_procs,
            ),)),
            rdma=tuple(
                RdmaPort(device=dev, port=1, state="ACTIVE", state_id=4, phys_state="LinkUp", phys_state_id=5,
                         rate=LINK_RATE, rate_gbps=STORY.link_gbps, link_layer="Ethernet",
                         netdev=STORY.interface,
                         counters={"port_xmit_data": self.tx[dev], "port_rcv_data": self.rx[dev],
                                   "symbol_error": 0, "link_downed": 0, "port_rcv_errors": 0},
                         hw_counters={"out_of_sequence": 0, "packet_seq_err": 0, "np_cnp_sent": 0})
                for dev in RDMA_DEVICES
            ),
            processes=procs,
            received=received,
        )

    def _measured(self, procs: tuple[NodeProcess, ...], t: float, cpu_percent: float,
                  engine_gib: float) -> tuple[NodeProcess, ...]:
        """``procs`` with what the probe reads of each: resident memory, and CPU seconds that grow by the
        process's share of the node's busy cores (``PROCESS_LOAD``) since the last sample, so the process
        view's CPU % (the delta of two readings, as on a real node) follows the start."""
        since = 0.0 if self.sampled_at is None else max(0.0, t - self.sampled_at)
        self.sampled_at = t
        busy_cores = cpu_percent / 100.0 * CPU_COUNT
        measured = []
        for p in procs:
            share, rss_gib = PROCESS_LOAD.get(p.kind, (0.01, 0.1))
            if p.kind == "ray-worker":
                rss_gib += 0.03 * engine_gib   # the shard's host-side buffers grow with the weights
            # (A wobble of its own, not the node's random stream: every other figure of the demo stays.)
            wobble = 1.0 + 0.08 * math.sin(t * 0.9 + p.pid)
            used = self.cpu_seconds.get(p.pid, 0.0) + since * busy_cores * share * wobble
            self.cpu_seconds[p.pid] = used
            measured.append(dataclasses.replace(p, rss=int(rss_gib * GIB), cpu_seconds=used, read_at=t))
        for gone in set(self.cpu_seconds) - {p.pid for p in procs}:
            del self.cpu_seconds[gone]   # a process that exited (a restart's new one starts at zero)
        return tuple(measured)


# ---- the engine's state: decided by the real engine session from simulated evidence --------------------
EXPECTED = tuple(ExpectedNode(n, NODE_IPS[n], 1.0) for n in NODES)


def demo_session(clock: Callable[[], float], ports: EnginePorts) -> EngineSession:
    """The engine session the SSH backend uses, on the simulated clock (``clock``: seconds since start)."""
    return EngineSession(EXPECTED, ports=ports, tensor_parallel=len(NODES), wedge_seconds=WEDGE_AFTER_S,
                         stop_steps=frozenset(name for name, _, _ in STOP_STEPS),
                         clock=clock, wall=lambda: EPOCH + clock())


# ---- the simulation ---------------------------------------------------------------------------------
@dataclass
class Operation:
    kind: str
    steps: list[StepView]
    started: float
    next_step_at: float
    then: str | None = None      # "launch" after a start's steps, "start" after a restart's stop


class DemoSimulation:
    """The whole demo cluster as a function of simulated time. ``advance(t)`` returns the events that
    happened up to ``t``; nothing here reads a real clock or sleeps."""

    def __init__(self, seed: int = 7, scenario: str = DEFAULT_SCENARIO, interval: float = 1.0,
                 live_received: bool = False) -> None:
        if scenario not in SCENARIOS:
            raise ValueError(f"unknown demo scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
        self.scenario = SCENARIOS[scenario]
        self.rng = random.Random(seed)
        self.interval = interval
        self.live_received = live_received
        self.replay = story_replay(self.scenario)
        self.nodes = {n: NodeSim(n, random.Random(seed * 31 + i)) for i, n in enumerate(NODES)}
        self.node_feed = NodeFeed()
        self.t = 0.0
        self._out: list[Event] = []
        # The session's effects, simulated: the readiness check takes VERIFY_SECONDS and passes; a notice
        # is posted. Records, restarts, the serving watch: the demo's history is made up and it never
        # restarts on its own.
        self.session = demo_session(lambda: self.t, EnginePorts(verify=self._verify, publish=self._tell))
        self.session.discovered(EngineState.STOPPED, f"nothing running on {', '.join(NODES)}")
        for n in NODES:
            self.session.link(n, "connected")
        self._shown = self.session.version
        self._judged = self.session.state   # the state the last judgement saw (for what follows a change)
        self.operation: Operation | None = None
        self.last_op: OperationView | None = None
        self.launched_at: float | None = None
        self.ray_up = False
        self.replay_pos = 0
        self.feed: TimelineFeed | None = None
        self.ready_at: float | None = None
        self.verifying_until: float | None = None
        self.next_sample = 0.0
        self.log_source = "vllm"
        self._send_tail = False
        self.worker_tail: dict[str, deque[LogRecord]] = {n: deque(maxlen=300) for n in NODES}
        self.next_stats_line = 0.0
        self.serving = _ServingSim(random.Random(seed + 1), slow=self.scenario.nccl == "socket")
        self.smoke_count = 0
        self.engine_gib = {n: 0.0 for n in NODES}
        # Page cache per node. oom: spark2's holds the model directory just copied there, which CUDA on
        # unified memory does not count as free — the reason its profiling run runs out (the hint says so).
        self.cached_gib = {n: 4.2 for n in NODES}
        if self.scenario.fail == "oom":
            self.cached_gib[NODES[1]] = STORY.oom_page_cache_gib
        self.ray_lost_at: float | None = None      # when spark2's raylet stopped (worker-lost)
        self.nccl_warned = False
        #: The ``upgrade`` scenario's upgrade as last shown.
        self.upgrade_shown: OperationView | None = None

    # -- requests ---------------------------------------------------------------------------------
    def request(self, kind: str) -> None:
        with self.session.held():   # what follows from it is done when the simulation judges
            self._request(kind)

    def _request(self, kind: str) -> None:
        if self.operation is not None:
            raise OperationRefused(f"{self.operation.kind} is running — wait for it to finish")
        if kind == "start":
            if self.state not in (EngineState.STOPPED, EngineState.FAILED):
                raise OperationRefused(f"the engine is {self.state.value}: stop it first, or restart")
            self._begin("start", START_STEPS, then="launch")
        elif kind in ("stop", "restart"):
            self._begin(kind, STOP_STEPS, then="start" if kind == "restart" else None)
            self._halt_engine()
        else:
            raise ValueError(kind)

    @property
    def busy(self) -> bool:
        return self.operation is not None

    @property
    def state(self) -> EngineState:
        return self.session.state

    def _begin(self, kind: str, steps: Sequence[tuple[str, str | None, str]], then: str | None) -> None:
        views = [StepView(name, node, StepStatus.PENDING) for name, node, _ in steps]
        self._messages = [msg for _, _, msg in steps]
        self.operation = Operation(kind, views, self.t, self.t, then)
        self._emit_operation()

    def _emit_operation(self, ok: bool | None = None, message: str = "") -> None:
        op = self.operation
        if op is None:
            return
        view = OperationView(op.kind, tuple(op.steps), running=ok is None, ok=ok, message=message,
                             started=EPOCH + op.started)
        self.last_op = view
        self._out.append(OperationChanged(view))
        if ok is None or op.then != "start":   # a restart's stop half is not the end of the restart
            self.session.operation(view)
        self._publish()

    def _step_operation(self) -> None:
        op = self.operation
        if op is None or self.t < op.next_step_at:
            return
        open_steps = (StepStatus.PENDING, StepStatus.RUNNING)
        idx = next((i for i, s in enumerate(op.steps) if s.status in open_steps), None)
        if idx is None:
            return
        step = op.steps[idx]
        if step.status is StepStatus.PENDING:
            op.steps[idx] = dataclasses.replace(step, status=StepStatus.RUNNING)
            op.next_step_at = self.t + STEP_SECONDS
            if step.name.startswith("ray start --head"):
                self.ray_up = True
        else:
            op.steps[idx] = dataclasses.replace(step, status=StepStatus.OK, seconds=STEP_SECONDS,
                                                message=self._messages[idx])
            op.next_step_at = self.t
            if idx == len(op.steps) - 1:
                self._finish_operation()
                return
        self._emit_operation()

    def _finish_operation(self) -> None:
        op = self.operation
        assert op is not None
        if op.then == "launch":
            self._launch()   # before the state machine hears the start ended: its detail is the new run's
        self._emit_operation(ok=True, message="done")
        self.operation = None
        if op.then != "launch" and op.kind in ("stop", "restart"):
            self.ray_up = False
            if op.then == "start":
                self._begin("restart", START_STEPS, then="launch")

    def _launch(self) -> None:
        self.launched_at = self.t
        self.replay_pos = 0
        self.feed = TimelineFeed(node_names={ip: n for n, ip in NODE_IPS.items()}, expected_nodes=len(NODES))
        self.ready_at = None
        self.verifying_until = None
        self.ray_lost_at = None
        self.nccl_warned = False
        self.engine_gib = {n: 0.0 for n in NODES}
        self.serving.reset()
        self.session.timeline(self.feed.snapshot())

    def _halt_engine(self) -> None:
        self.launched_at = None
        self.feed = None
        self.ready_at = None
        self.engine_gib = {n: 0.0 for n in NODES}
        self.serving.reset()

    def _publish(self, *, again: bool = False) -> None:
        """An ``EngineChanged`` when the state machine moved (``again``: also to carry a new timeline)."""
        session = self.session
        if session.version == self._shown and not again:
            return
        self._shown = session.version
        timeline = timeline_view(self.feed.snapshot()) if self.feed is not None else None
        self._out.append(EngineChanged(
            session.state, session.detail, timeline=timeline,
            vllm_version=self.feed.vllm_version if self.feed else None,
            ttft_seconds=session.ttft_seconds if session.state is EngineState.READY else None,
        ))

    # -- deciding: the evidence goes to the state machine, its effects are simulated ---------------
    def _judge(self) -> None:
        session = self.session
        if self.verifying_until is not None and self.t >= self.verifying_until:
            self.verifying_until = None   # /health, /v1/models and one completion answered
            session.verified(SMOKE_TTFT_S, self.feed.vllm_version if self.feed else None)
        session.tick()
        session.settle()
        state, before = session.state, self._judged
        self._judged = state
        if state is not before:
            if state is EngineState.FAILED:
                self.engine_gib = {n: 0.0 for n in NODES}    # the engine's processes exited: memory freed
                if before not in AFTER_READY:
                    self._out.append(Notice(f"engine failed: {session.detail}", severity="error"))
            elif state is EngineState.READY:
                self._out.append(Notice("engine ready — try the smoke test (t)"))
        self._publish()

    def _verify(self) -> None:
        self.ready_at = self.t
        self.verifying_until = self.t + VERIFY_SECONDS

    def _tell(self, event: Event) -> None:
        self._out.append(event)

    def _ray_state(self) -> RayState:
        """Ray's node list as the head reports it: spark2 dead once its heartbeats timed out."""
        dead = self.ray_lost_at is not None and self.t >= self.ray_lost_at + RAY_DEAD_AFTER_S
        nodes = tuple(RayNode(NODE_IPS[n], alive=not (dead and n == NODES[1]), gpu=1.0, hostname=host,
                              is_head=n == NODES[0])
                      for n, host in zip(NODES, STORY.hostnames, strict=True))
        return RayState(nodes, gpu_total=sum(n.gpu for n in nodes if n.alive))

    # -- time -------------------------------------------------------------------------------------
    def advance(self, t: float) -> list[Event]:
        """Run the simulation forward to ``t`` seconds; return what happened."""
        with self.session.held():   # the session's effects are done when the simulation judges
            while True:
                step_to = min(t, self.next_sample)
                self._progress_to(step_to)
                if self.next_sample <= t:
                    self._sample()
                    self.next_sample += self.interval
                else:
                    break
        out, self._out = self._out, []
        return out

    def _progress_to(self, t: float) -> None:
        while self.operation is not None and self.operation.next_step_at <= t:
            self.t = max(self.t, self.operation.next_step_at)
            self._step_operation()
        self.t = max(self.t, t)
        self._replay_to(t)
        self._after_ready()
        self._judge()

    def _after_ready(self) -> None:
        """The scenario's event after ready: the serving engine wedges, or spark2 drops out of Ray."""
        event = self.scenario.after_ready
        if event is None or self.ready_at is None or self.state not in (
                EngineState.READY, EngineState.WEDGED):
            return
        if self.t < self.ready_at + self.scenario.at:
            return
        if event == "wedge" and not self.serving.frozen:
            self.serving.freeze(EPOCH + self.t)
        elif event == "upgrade":
            self._upgrade_to(self.ready_at + self.scenario.at)
        elif event == "worker-lost" and self.ray_lost_at is None:
            self.ray_lost_at = self.t
            self.serving.freeze(EPOCH + self.t)        # the tensor-parallel peer is gone: decode hangs
            self.engine_gib[NODES[1]] = 0.0           # its actor died with the raylet
            self._out.append(NodeLinkChanged(NODES[1], "connected"))   # its link stays up: its raylet stopped

    def _upgrade_to(self, began: float) -> None:
        """The scripted upgrade (``demo_upgrade``) as the dashboard's watch of the head would post it: its
        stages as the running operation, then its end and its one line."""
        if self.upgrade_shown is not None and not self.upgrade_shown.running:
            return
        record = demo_upgrade(STORY.image, EPOCH + began, EPOCH + self.t)
        view = upgrade_operation(record, EPOCH + self.t)
        if view == self.upgrade_shown:
            return
        self.upgrade_shown = view
        self._out.append(OperationChanged(view))
        if not view.running:
            line = record.shown_line(EPOCH + self.t)
            self._out.append(UpgradeSeen(*line) if line is not None else UpgradeSeen(None))

    def _replay_to(self, t: float) -> None:
        if self.launched_at is None or self.feed is None:
            return
        since = t - self.launched_at
        batch: list[ReplayLine] = []
        while self.replay_pos < len(self.replay) and self.replay[self.replay_pos].at <= since:
            batch.append(self.replay[self.replay_pos])
            self.replay_pos += 1
        if not batch:
            return
        records = self.feed.feed([restamp(line.text, EPOCH + self.launched_at + line.at) for line in batch],
                                 EPOCH + t)
        self._emit_log(records)
        self.session.timeline(self.feed.snapshot())
        if self.state is not EngineState.FAILED:
            target = engine_memory_gib(self.feed.snapshot())
            for n in NODES:   # while the engine runs its memory only grows (it never halves at ready)
                if n != NODES[1] or self.ray_lost_at is None:
                    self.engine_gib[n] = max(self.engine_gib[n], target)
        self._nccl_notice()
        # The stage bars move with the log: every batch while starting carries the new timeline.
        self._publish(again=self.state is EngineState.STARTING
                      and self.feed.snapshot().outcome == "incomplete")

    def _nccl_notice(self) -> None:
        """The parser's NCCL verdict (``sparktui.domain.logs.nccl``) says NCCL fell back: tell the person."""
        assert self.feed is not None
        facts = self.feed.snapshot().facts
        if self.nccl_warned or facts.get("nccl_verdict_level") != "warning":
            return
        self.nccl_warned = True
        self._out.append(Notice(
            f"{facts.get('nccl_verdict')}: tensor-parallel traffic goes through the kernel, not RoCE — check "
            f"NCCL_IB_HCA ({'+'.join(RDMA_DEVICES)}) and that /dev/infiniband is passed into the container",
            severity="warning"))

    def _emit_log(self, records: Sequence[LogRecord]) -> None:
        """The head's vLLM log always; a node's Ray worker log too while it is the one selected."""
        self._out.append(LogRecords("vllm", records))
        for r in records:
            if r.has_prefix and r.role == "RayWorkerWrapper":   # forwarded by Ray from a worker actor
                self.worker_tail[r.node or NODES[0]].append(r)
        if self.log_source.startswith("ray:"):
            node = self.log_source[4:]
            if self._send_tail:
                # A follower that starts on a file shows its tail first (``tail -n``), then follows.
                self._send_tail = False
                self._out.append(LogRecords(self.log_source, list(self.worker_tail.get(node, ()))))
                return
            worker = [r for r in records if r.has_prefix and r.role == "RayWorkerWrapper"
                      and (r.node or NODES[0]) == node]
            if worker:
                self._out.append(LogRecords(self.log_source, worker))

    def select_log(self, source: str) -> None:
        self.log_source = source
        self._send_tail = source.startswith("ray:")
        if self._send_tail:
            self._emit_log([])

    def _serving_log(self) -> None:
        """What a serving vLLM (V1) prints: the API server's stats line every few seconds (loggers.py) and
        uvicorn's access-log line per request."""
        snap = self.serving.last
        if self.feed is None or snap is None or self.t < self.next_stats_line:
            return
        self.next_stats_line = self.t + 5.0
        stamp = time.strftime("%m-%d %H:%M:%S", time.gmtime(EPOCH + self.t))
        running = int(snap.requests_running or 0)
        prompt, generation = snap.prompt_tokens_per_s or 0.0, snap.generation_tokens_per_s or 0.0
        api = f"(APIServer pid={STORY.api_pid})"
        lines = [
            f"{api} INFO {stamp} [loggers.py:257] Engine 000: Avg prompt throughput: {prompt:.1f} tokens/s, "
            f"Avg generation throughput: {generation:.1f} tokens/s, Running: {running} reqs, "
            f"Waiting: {int(snap.requests_waiting or 0)} reqs, GPU KV cache usage: "
            f"{100 * (snap.kv_cache_usage or 0):.1f}%, Prefix cache hit rate: "
            f"{100 * (snap.prefix_cache_hit_rate or 0):.1f}%",
        ]
        if not self.serving.frozen:   # a wedged engine finishes nothing: no response, no access line
            lines += [f'{api} INFO:     192.168.100.20:{51000 + self.rng.randint(0, 999)} - '
                      f'"POST /v1/chat/completions HTTP/1.1" 200 OK' for _ in range(running)]
        self._emit_log(self.feed.feed(lines, EPOCH + self.t))
        self.session.timeline(self.feed.snapshot())

    def _sample(self) -> None:
        received = time.monotonic() if self.live_received else None
        for name, node in self.nodes.items():
            lost = name == NODES[1] and self.ray_lost_at is not None
            load = IDLE if lost else self._load()
            sample = node.sample(self.t, load, self.engine_gib[name], self.interval, received,
                                 ray_up=self.ray_up and not lost,
                                 vllm_up=self.launched_at is not None and not lost,
                                 cached_gib=self.cached_gib[name])
            self._out.append(self.node_feed.sampled(name, sample))
            self.session.gpu(name, sample)
        if self.ray_up and self.session.watching_ray:
            self.session.ray(self._ray_state())
        if self.state in (EngineState.READY, EngineState.WEDGED, EngineState.DEGRADED):
            serving = self.serving.snapshot(EPOCH + self.t)
            self._out.append(ServingSampled(serving))
            self.session.serving(serving)
            self._serving_log()

    def _load(self) -> Load:
        load = self._stage_load()
        if self.scenario.nccl == "socket" and load is not IDLE:
            load = dataclasses.replace(load, roce=load.roce * SOCKET_FACTOR)
        return load

    def _stage_load(self) -> Load:
        if self.state in (EngineState.READY, EngineState.WEDGED, EngineState.DEGRADED):
            if self.serving.frozen:
                return WEDGED_LOAD
            return SERVING if self.serving.busy(self.t) else STAGE_LOAD["api"]
        if self.state in (EngineState.STARTING, EngineState.VERIFYING) and self.feed is not None:
            snap = self.feed.snapshot()
            if snap.outcome == "ready":
                return STAGE_LOAD["api"]
            return STAGE_LOAD.get(snap.current or "config", STAGE_LOAD["api"])
        if self.state is EngineState.PREFLIGHT:
            return Load(1, 12, 0.002)
        return IDLE

    # -- the initial picture ----------------------------------------------------------------------
    def hello(self) -> list[Event]:
        out: list[Event] = []
        for name, host in zip(NODES, STORY.hostnames, strict=True):
            out.append(NodeLinkChanged(name, "connected"))
            out.append(NodeIdentified(name, hostname=host, kernel="6.11.0-1016-nvidia",
                                 uptime_seconds=86_400 * 3 + 3600))
        out.append(EngineChanged(EngineState.STOPPED, f"nothing running on {', '.join(NODES)}"))
        # The image a start uses, as the dashboard reads it from the head (no upgrade kept: the config's).
        out.append(ImageSeen(STORY.image, False))
        return out


class _ServingSim:
    """Made-up but plausible serving figures: bursts of requests from a couple of users. ``freeze``: the
    requests in flight stay in flight and no token comes out (a wedged engine)."""

    def __init__(self, rng: random.Random, slow: bool = False) -> None:
        self.rng = rng
        self.slow = slow              # NCCL over sockets: every all-reduce is slower, so is decode
        self.last: ServingSnapshot | None = None
        self.frozen_since: float | None = None
        #: vLLM's ``generation_tokens_total``: it stands still while frozen (the wedge rule's evidence).
        self.tokens_total = 0.0
        self.hist: dict[str, deque[float]] = {
            n: deque(maxlen=120) for n in ServingHistory.__dataclass_fields__
        }

    @property
    def frozen(self) -> bool:
        return self.frozen_since is not None

    def freeze(self, wall: float) -> None:
        self.frozen_since = wall

    def reset(self) -> None:
        self.frozen_since = None
        self.last = None
        self.tokens_total = 0.0
        for ring in self.hist.values():
            ring.clear()

    def busy(self, t: float) -> bool:
        return math.sin(t / 9.0) > -0.3

    def snapshot(self, wall: float) -> ServingSnapshot:
        r = self.rng
        t = wall - EPOCH
        if self.frozen_since is not None:
            return self._frozen(wall)
        busy = self.busy(t)
        speed = 0.55 if self.slow else 1.0
        running = float(r.randint(2, 6)) if busy else 0.0
        waiting = float(r.choice((0, 0, 0, 1))) if busy else 0.0
        gen = (running * r.uniform(19, 23) * speed) if busy else 0.0
        prompt = (running * r.uniform(150, 420) * speed) if busy else 0.0
        kv = min(0.9, 0.04 + running * r.uniform(0.03, 0.05)) if busy else 0.01
        self.tokens_total += round(gen)   # one snapshot a second
        self._record({"generation_tokens_per_s": gen, "prompt_tokens_per_s": prompt, "kv_cache_usage": kv,
                      "requests_running": running, "requests_waiting": waiting,
                      "ttft_p95": 0.41 / speed if busy else 0.0, "itl_p95": 0.052 / speed if busy else 0.0})
        self.last = ServingSnapshot(
            at=wall, requests_running=running, requests_waiting=waiting, kv_cache_usage=kv,
            prefix_cache_hit_rate=0.46 if busy else None, prompt_tokens_per_s=prompt,
            generation_tokens_per_s=gen, requests_per_s=running / 8 if busy else 0.0,
            ttft=LatencyQuantiles(0.18 / speed, 0.41 / speed, 40, 0.21 / speed) if busy
            else LatencyQuantiles(),
            itl=LatencyQuantiles(0.044 / speed, 0.052 / speed, 900, 0.045 / speed) if busy
            else LatencyQuantiles(),
            window_seconds=20.0, generation_tokens_total=self.tokens_total,
            history=ServingHistory(**{n: tuple(v) for n, v in self.hist.items()}),
        )
        return self.last

    def _frozen(self, wall: float) -> ServingSnapshot:
        assert self.frozen_since is not None
        prev = self.last
        running = max(4.0, prev.requests_running or 0.0) if prev is not None else 4.0
        waiting = (prev.requests_waiting or 0.0) + (1.0 if self.rng.random() < 0.3 else 0.0) if prev else 1.0
        kv = prev.kv_cache_usage if prev is not None and prev.kv_cache_usage else 0.2
        self._record({"generation_tokens_per_s": 0.0, "prompt_tokens_per_s": 0.0, "kv_cache_usage": kv,
                      "requests_running": running, "requests_waiting": waiting, "ttft_p95": 0.0,
                      "itl_p95": 0.0})
        self.last = ServingSnapshot(
            at=wall, requests_running=running, requests_waiting=waiting, kv_cache_usage=kv,
            prefix_cache_hit_rate=prev.prefix_cache_hit_rate if prev else None, prompt_tokens_per_s=0.0,
            generation_tokens_per_s=0.0, requests_per_s=0.0, window_seconds=20.0,
            generation_stalled_seconds=wall - self.frozen_since, generation_tokens_total=self.tokens_total,
            history=ServingHistory(**{n: tuple(v) for n, v in self.hist.items()}),
        )
        return self.last

    def _record(self, values: dict[str, float]) -> None:
        for name, value in values.items():
            self.hist[name].append(value)


# ---- the backend ------------------------------------------------------------------------------------
class DemoBackend:
    """A ``ClusterBackend`` over ``DemoSimulation``. ``frozen_at``: run the simulation instantly to that
    many seconds after launch, post the picture, and stop time there (screenshots, snapshot tests)."""

    #: Quitting the demo ends its simulated engine (a real one keeps running on the nodes).
    detached = False

    node_names: Sequence[str] = NODES
    node_roles = ROLES

    def __init__(self, *, seed: int = 7, frozen_at: float | None = None, autostart: bool = True,
                 readonly: bool = False, speed: float = 1.0, scenario: str = DEFAULT_SCENARIO,
                 tick: float = 0.1) -> None:
        self.readonly = readonly
        self.frozen_at = frozen_at
        self.autostart = autostart
        self.speed = speed
        self.tick = tick
        self.seed, self.scenario = seed, scenario
        self.sim = DemoSimulation(seed, scenario, live_received=frozen_at is None)
        self._runs: list[RunRecord] | None = None
        #: Its events: to ``run``'s sink, then to the observers of their kind.
        self.events = EventStream()
        self._t0 = time.monotonic()
        self._offset = 0.0

    def clock(self) -> float:
        """The simulation's wall clock (what elapsed times in the UI are measured against)."""
        return EPOCH + self.sim.t

    def _now(self) -> float:
        return self._offset + (time.monotonic() - self._t0) * self.speed

    def _post(self, events: Sequence[Event]) -> None:
        for event in events:
            self.events.post(event)

    async def run(self, sink: EventSink) -> None:
        self.events.sink = sink
        self._post(self.sim.hello())
        if self.frozen_at is not None:
            if self.autostart:
                self.sim.request("start")
            # Toasts expire on the wall clock: a frozen screen (snapshots, screenshots) shows none, so what it
            # draws never depends on how fast the machine drew it. The state line and panels tell the story.
            self._post([e for e in self.sim.advance(self.frozen_at) if not isinstance(e, Notice)])
            await asyncio.Event().wait()   # time stands still until the app closes
            return
        if self.autostart:
            # Read-only too: then it plays a start someone else made, which is what watching looks like.
            self.sim.request("start")
            scenario = SCENARIOS[self.scenario]
            if scenario.name != DEFAULT_SCENARIO:
                message = f"demo scenario {scenario.name}: {scenario.summary}"
            elif self.readonly:
                message = "demo, read-only: watching a simulated start; the controls are disabled"
            else:
                message = ("demo: a simulated two-node start is running — it reaches ready in about a "
                           "minute; then try t (smoke test), r (restart), x (stop)")
            self._post([Notice(message)])
        self._t0 = time.monotonic()
        while True:
            self._post(self.sim.advance(self._now()))
            await asyncio.sleep(self.tick)

    async def _operation(self, kind: str) -> None:
        if self.readonly:
            raise OperationRefused("read-only mode")
        self.sim.request(kind)
        self._post([OperationBusy(kind)])   # as the real backend's gate says it
        try:
            if self.frozen_at is not None:
                return
            while self.sim.busy:
                await asyncio.sleep(self.tick)
        finally:
            self._post([OperationBusy(None)])

    async def start(self) -> None:
        await self._operation("start")

    async def stop(self) -> None:
        await self._operation("stop")

    async def restart(self) -> None:
        await self._operation("restart")

    def history_runs(self) -> list[RunRecord]:
        """Three made-up earlier starts of the demo's model, so the stage bars show ETAs as they do with a
        real run history (durations from a dry run of this same simulation, give or take 15 %)."""
        if self._runs is None:
            dry = DemoSimulation(self.seed, DEFAULT_SCENARIO)
            dry.request("start")
            t = 0.0
            while dry.state is not EngineState.READY and t < 300:
                t += 1.0
                dry.advance(t)
            snap = dry.feed.snapshot() if dry.feed is not None else None
            seconds = {s.name: s.seconds for s in (snap.stages if snap else ()) if s.status == "done"}
            model = (snap.model if snap else None) or "demo"
            self._runs = [
                record_run(started_at=EPOCH - 86_400 * (3 - i), model=model,
                           image="demo", outcome="ready", ready_seconds=t * factor, cluster="demo",
                           stage_seconds={k: (v or 0.0) * factor for k, v in seconds.items()})
                for i, factor in enumerate((1.15, 0.9, 1.05))
            ]
        return self._runs

    async def smoke_test(self) -> str:
        if self.sim.state is not EngineState.READY:
            raise RuntimeError(f"the engine is {self.sim.state.value}, not ready")
        await asyncio.sleep(0.6 if self.frozen_at is None else 0)
        self.sim.smoke_count += 1
        tps = 21.4 + self.sim.rng.uniform(-1.5, 1.5)
        return f"{tps:.1f} tok/s, first token 184 ms: “Hello there, friend, welcome back!”"

    def select_log(self, source: str) -> None:
        self.sim.select_log(source)

    @property
    def log_source(self) -> str:
        return self.sim.log_source
