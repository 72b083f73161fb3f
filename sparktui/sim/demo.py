"""``sparktui --demo``: a simulated two-node cluster in this process — no SSH, no root, no GPU, no Ray.

A recorded real vLLM start (``sparktui.sim.recording``) is replayed through the real log parser and stage
machine (``sparktui.domain.logs``), with its gaps squeezed so it reaches ready in about a minute; node
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
import re
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sparktui.domain.events import (
    EngineChanged,
    EngineState,
    Event,
    EventSink,
    LogRecords,
    NodeFacts,
    NodeLinkChanged,
    NodeSampled,
    Notice,
    OperationChanged,
    OperationRefused,
    OperationView,
    ServingSampled,
    StepStatus,
    StepView,
)
from sparktui.domain.history import RunRecord, record_run
from sparktui.domain.logs import LogRecord
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
from sparktui.sim import standin_script as script
from sparktui.sim.recording import DEFAULT_RECORDING, RecordedLine, load_recording, ready_index
from sparktui.sim.timeline_feed import TimelineFeed

#: A fixed wall-clock origin for the simulation (2026-01-01 00:00 UTC) so frozen screens never change.
EPOCH = 1_767_225_600.0
GIB = 1024**3
#: GB10: MemTotal 127600748 kB.
MEM_TOTAL = 127_600_748 * 1024
#: Longest silence kept from the recording (its 160 s weight download becomes this).
MAX_GAP_S = 2.5
#: Seconds a burst of progress-bar updates (shards, CUDA-graph shapes) is spread over.
PROGRESS_SPAN_S = 9.0
_PROGRESS_HINT = re.compile(r"\d+%(?: Completed \||\|)")
NODES = ("spark1", "spark2")
ROLES = {"spark1": "head", "spark2": "worker"}
NODE_IPS = {"spark1": "192.168.100.10", "spark2": "192.168.100.11"}
#: What the demo cluster serves: the recorded start is rewritten to this model on two Sparks (TP 2), as
#: the stand-in engine rewrites it for the configured run.
DEMO_MODEL = "/models/Qwen3.5-122B-A10B-FP8"
DEMO_SERVED_NAME = "qwen3.5-122b"
DEMO_TP = 2
RDMA_DEVICES = ("rocep1s0f1", "roceP2p1s0f1")
LINK_RATE = "200 Gb/sec (4X HDR)"
STEP_SECONDS = 0.35

PREFLIGHT_STEPS: tuple[tuple[str, str | None, str], ...] = (
    ("SSH reachable", "spark1", "aurora@spark1"),
    ("SSH reachable", "spark2", "aurora@spark2"),
    ("docker usable", None, "both nodes"),
    ("image present, same ID", None, "nvcr.io/nvidia/vllm:25.11-py3 sha256:3f1c…"),
    ("model directory identical", None, "30 files, 131.4 GiB on both"),
    ("RDMA link up", None, "rocep1s0f1+roceP2p1s0f1 ACTIVE 200G"),
    ("free unified memory", None, "111 GiB / 109 GiB available"),
    ("ports free", "spark1", "8000, 6379"),
    ("no leftovers of an earlier run", None, ""),
    ("vLLM version in image", None, "0.8.3 (log dialect known)"),
)
LAUNCH_STEPS: tuple[tuple[str, str | None, str], ...] = (
    ("ray start --head", "spark1", "GCS 192.168.100.10:6379"),
    ("ray start", "spark2", "joined"),
    ("wait for Ray: 2 nodes, 2 GPUs", None, "2/2 nodes, 2/2 GPUs"),
    ("vllm serve (detached)", "spark1", "pid 5941, log ~/.local/state/sparktui/vllm.log"),
)
STOP_STEPS: tuple[tuple[str, str | None, str], ...] = (
    ("stop vLLM (SIGINT)", "spark1", "exited after 1.2 s"),
    ("ray stop", "spark1", ""),
    ("ray stop", "spark2", ""),
    ("remove our containers", None, "sparktui-head, sparktui-worker"),
    ("verify nothing is left", None, "no container or Ray/vLLM process of ours"),
)


def two_spark_recording(name: str) -> list[RecordedLine]:
    """The recorded start as it reads for ``DEMO_MODEL`` with tensor parallel 2: sizes and model rewritten,
    the recording's extra ranks left out (the stand-in engine's rules)."""
    lines = load_recording(name)
    rewrite = script.Rewriter(script.detect_dialect(lines), DEMO_MODEL, DEMO_SERVED_NAME, DEMO_TP, 1,
                              None, 8000, 4242, None)
    fixed = datetime.fromtimestamp(EPOCH, UTC)  # restamped by the replay; fixed keeps the demo reproducible
    return [dataclasses.replace(line, text=rewrite(line.text, fixed), raw=rewrite(line.raw, fixed))
            for line in lines if not script.rank_beyond(line, DEMO_TP)]


@dataclass(frozen=True)
class ReplayLine:
    at: float                 # seconds after `vllm serve` was launched
    text: str                 # the physical line as Ray's log monitor would print it on the head
    node: str                 # where it was printed
    worker: bool


def squeeze(lines: Sequence[RecordedLine], target_seconds: float) -> list[ReplayLine]:
    """Keep the recording's rhythm but cap every silence at ``MAX_GAP_S``, give progress bars time to
    animate (tqdm lines carry no timestamp, so a recording has all of a bar's updates at one instant), then
    scale so uvicorn's "Application startup complete" lands at ``target_seconds``."""
    cut = ready_index(list(lines))
    end = (cut + 12) if cut is not None else len(lines)   # a few lines after ready (the routes, the banner)
    kept = list(lines[:end])
    runs: list[list[int]] = []
    for i, line in enumerate(kept):
        if runs and kept[runs[-1][0]].offset_seconds == line.offset_seconds:
            runs[-1].append(i)
        else:
            runs.append([i])
    times = [0.0] * len(kept)
    t = 0.0
    for r, run in enumerate(runs):
        here = kept[run[0]].offset_seconds
        nxt = kept[runs[r + 1][0]].offset_seconds if r + 1 < len(runs) else here
        bars = sum(1 for i in run if _PROGRESS_HINT.search(kept[i].text))
        if bars >= 3:
            span = min(PROGRESS_SPAN_S, max(nxt - here, PROGRESS_SPAN_S / 2))
        else:
            span = min(MAX_GAP_S, nxt - here)
        for k, i in enumerate(run):
            times[i] = t + (span * k / len(run) if bars >= 3 else 0.0)
        t += span
    ready_at = times[cut] if cut is not None and cut < len(times) else (times[-1] or 1.0)
    scale = target_seconds / ready_at if ready_at else 1.0
    out = []
    for line, at in zip(kept, times, strict=True):
        node = "spark2" if line.remote else "spark1"
        text = line.raw
        if line.role == "worker":
            # Ray names the worker node by IP: use the demo cluster's addresses so node filters line up.
            name = (line.source or "").split(" pid=")[0] if line.source and " pid=" in line.source else ""
            pid = (line.source or "pid=0").split("pid=")[-1].split(",")[0]
            prefix = f"({name + ' ' if name else ''}pid={pid}"
            prefix += f", ip={NODE_IPS['spark2']})" if line.remote else ")"
            text = f"{prefix} {line.text}"
        out.append(ReplayLine(at * scale, text, node, line.role == "worker"))
    return out


_VLLM_STAMP = re.compile(r"\b(DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d\b")
_RAY_STAMP = re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?=,\d{3})")


def restamp(text: str, wall: float) -> str:
    """Put the simulation's clock into a recorded line, so stage durations match what the demo shows."""
    tm = time.gmtime(wall)
    if _VLLM_STAMP.search(text):
        text = _VLLM_STAMP.sub(lambda m: f"{m.group(1)} {time.strftime('%m-%d %H:%M:%S', tm)}", text, count=1)
    elif _RAY_STAMP.search(text):
        text = _RAY_STAMP.sub(time.strftime("%Y-%m-%d %H:%M:%S", tm), text, count=1)
    return text


# ---- what each stage does to the hardware ----------------------------------------------------------
@dataclass(frozen=True)
class Load:
    gpu: float            # utilisation %
    cpu: float            # %
    roce: float           # Gb/s each way on the cable
    mem: float            # unified memory used, GiB


IDLE = Load(gpu=0, cpu=3, roce=0.002, mem=7.5)
#: The worker runs no API server and no engine core: less CPU and memory, the same GPU work.
NODE_FACTOR = {"spark1": (1.0, 1.0), "spark2": (0.55, 0.93)}
STAGE_LOAD = {
    "config": Load(2, 35, 0.01, 10),
    "placement": Load(2, 20, 0.05, 11),
    "distributed": Load(8, 25, 1.5, 13),
    "weights": Load(15, 60, 34.0, 75),       # weights read and sharded: the cable is busy, memory climbs
    "compile": Load(96, 100, 0.8, 78),
    "kv_cache": Load(70, 40, 6.0, 104),
    "cuda_graphs": Load(93, 55, 18.0, 106),  # all-reduce in every captured graph
    "engine": Load(20, 20, 0.5, 106),
    "api": Load(5, 15, 0.1, 106),
}
SERVING = Load(gpu=62, cpu=18, roce=9.0, mem=106)


@dataclass
class NodeSim:
    name: str
    rng: random.Random
    seq: int = 0
    rx: dict[str, int] = field(default_factory=lambda: {d: 0 for d in RDMA_DEVICES})
    tx: dict[str, int] = field(default_factory=lambda: {d: 0 for d in RDMA_DEVICES})
    mem: float = IDLE.mem
    temp: float = 38.0

    def __post_init__(self) -> None:
        self.cpu_factor, self.mem_factor = NODE_FACTOR.get(self.name, (1.0, 1.0))
        self.mem = IDLE.mem * self.mem_factor

    def sample(self, t: float, load: Load, interval: float, received: float | None, ray_up: bool = False,
               vllm_up: bool = False) -> Sample:
        r = self.rng
        self.seq += 1
        # Memory moves towards its target instead of jumping (weights stream in over seconds).
        self.mem += (load.mem * self.mem_factor - self.mem) * min(1.0, 0.35 * interval)
        jitter = 1.0 + 0.08 * math.sin(t * 1.7 + self.seq) + r.uniform(-0.05, 0.05)
        gpu = max(0.0, min(100.0, load.gpu * jitter)) if load.gpu else 0.0
        # The worker trails the head a little: the same work, a few percent apart.
        if self.name != NODES[0]:
            gpu = max(0.0, min(100.0, gpu * 0.97))
        self.temp += ((38 + gpu * 0.42) - self.temp) * 0.25
        power = 11 + gpu * 0.95 + r.uniform(-1, 1)
        gbps = max(0.0, load.roce * jitter)
        for i, dev in enumerate(RDMA_DEVICES):
            share = 0.5 + (0.04 if i == 0 else -0.04)
            octets = int(gbps * share * 1e9 / 8 * interval / 4)
            self.tx[dev] += octets
            self.rx[dev] += int(octets * r.uniform(0.96, 1.04))
        used = int(self.mem * GIB)
        procs: tuple[NodeProcess, ...] = ()
        gpu_procs: tuple[GpuProcess, ...] = ()
        if ray_up:
            procs = (NodeProcess(1201, "raylet", "raylet"),)
        if vllm_up:
            procs = (*procs, NodeProcess(1312, "ray::RayWorkerWrapper", "ray-worker"))
            if self.name == NODES[0]:
                procs = (NodeProcess(5941, "vllm", "vllm"), *procs)
            gpu_procs = (GpuProcess(5941 if self.name == NODES[0] else 1312, "python3",
                                    int(max(0.0, self.mem - IDLE.mem) * GIB)),)
        return Sample(
            seq=self.seq, mono=t, wall=EPOCH + t, host=self.name, interval=interval,
            memory=MemorySample(total=MEM_TOTAL, used=used, available=MEM_TOTAL - used,
                                cached=int(4.2 * GIB), swap_total=0, swap_used=0),
            cpu=CpuSample(percent=round(min(100.0, load.cpu * self.cpu_factor * jitter), 1), count=20),
            gpu=GpuSample(source="nvml", driver_version="580.95.05", devices=(GpuDevice(
                index=0, name="NVIDIA GB10", util_percent=round(gpu), temperature_c=round(self.temp),
                power_w=round(power, 1), sm_clock_mhz=2418 if gpu > 20 else 1200, memory_unified=True,
                processes=gpu_procs,
            ),)),
            rdma=tuple(
                RdmaPort(device=dev, port=1, state="ACTIVE", state_id=4, phys_state="LinkUp", phys_state_id=5,
                         rate=LINK_RATE, rate_gbps=200.0, link_layer="Ethernet", netdev="enp1s0f1np1",
                         counters={"port_xmit_data": self.tx[dev], "port_rcv_data": self.rx[dev],
                                   "symbol_error": 0, "link_downed": 0, "port_rcv_errors": 0},
                         hw_counters={"out_of_sequence": 0, "packet_seq_err": 0, "np_cnp_sent": 0})
                for dev in RDMA_DEVICES
            ),
            processes=procs,
            received=received,
        )


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

    def __init__(self, seed: int = 7, recording: str = DEFAULT_RECORDING, ready_after: float = 52.0,
                 interval: float = 1.0, live_received: bool = False) -> None:
        self.rng = random.Random(seed)
        self.interval = interval
        self.live_received = live_received
        self.replay = squeeze(two_spark_recording(recording), ready_after)
        self.nodes = {n: NodeSim(n, random.Random(seed * 31 + i)) for i, n in enumerate(NODES)}
        self.t = 0.0
        self.state = EngineState.STOPPED
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
        self.serving = _ServingSim(random.Random(seed + 1))
        self.smoke_count = 0
        self._out: list[Event] = []

    # -- requests ---------------------------------------------------------------------------------
    def request(self, kind: str) -> None:
        if self.operation is not None:
            raise OperationRefused(f"{self.operation.kind} is running — wait for it to finish")
        if kind == "start":
            if self.state not in (EngineState.STOPPED, EngineState.FAILED):
                raise OperationRefused(f"the engine is {self.state.value}: stop it first, or restart")
            self._begin("start", PREFLIGHT_STEPS + LAUNCH_STEPS, then="launch")
            self._set_state(EngineState.PREFLIGHT, "checking both nodes")
        elif kind in ("stop", "restart"):
            self._begin(kind, STOP_STEPS, then="start" if kind == "restart" else None)
            self._set_state(EngineState.STOPPING, "")
            self._halt_engine()
        else:
            raise ValueError(kind)

    @property
    def busy(self) -> bool:
        return self.operation is not None

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
            if op.kind == "start" and step.name.startswith("ray start --head"):
                self.ray_up = True
                self._set_state(EngineState.STARTING, "Ray head and worker")
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
        self._emit_operation(ok=True, message="done")
        self.operation = None
        if op.then == "launch":
            self._launch()
        elif op.kind in ("stop", "restart"):
            self.ray_up = False
            self._set_state(EngineState.STOPPED, "nothing of ours left on spark1, spark2")
            if op.then == "start":
                self.request("start")
                assert self.operation is not None
                self.operation.kind = "restart"
                self._emit_operation()

    def _launch(self) -> None:
        self.launched_at = self.t
        self.replay_pos = 0
        self.feed = TimelineFeed(node_names={ip: n for n, ip in NODE_IPS.items()}, expected_nodes=len(NODES))
        self.ready_at = None
        self.verifying_until = None
        self._set_state(EngineState.STARTING, "vllm serve launched")

    def _halt_engine(self) -> None:
        self.launched_at = None
        self.feed = None
        self.ready_at = None
        self.serving.reset()

    def _set_state(self, state: EngineState, detail: str) -> None:
        self.state = state
        timeline = self.feed.snapshot() if self.feed is not None else None
        self._out.append(EngineChanged(
            state, detail, timeline=timeline, vllm_version=self.feed.vllm_version if self.feed else None,
            ttft_seconds=0.182 if state is EngineState.READY else None,
        ))

    # -- time -------------------------------------------------------------------------------------
    def advance(self, t: float) -> list[Event]:
        """Run the simulation forward to ``t`` seconds; return what happened."""
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
        if self.verifying_until is not None and t >= self.verifying_until:
            self.verifying_until = None
            self._set_state(EngineState.READY, "answers: /health, /v1/models, one completion")
            self._out.append(Notice("engine ready — try the smoke test (t)"))

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
        if self.feed.failed and self.state is EngineState.STARTING:
            self._set_state(EngineState.FAILED, "the engine failed to start")
        elif self.feed.ready and self.ready_at is None and self.state is EngineState.STARTING:
            self.ready_at = t
            self.verifying_until = t + 1.5
            self._set_state(EngineState.VERIFYING, "health, models, one tiny completion")
        elif self.state in (EngineState.STARTING,):
            self._set_state(EngineState.STARTING, "")

    def _emit_log(self, records: Sequence[LogRecord]) -> None:
        """The head's vLLM log always; a node's Ray worker log too while it is the one selected."""
        self._out.append(LogRecords("vllm", records))
        for r in records:
            if r.has_prefix:   # forwarded by Ray from a worker actor (the head's own lines carry no prefix)
                self.worker_tail[r.node or NODES[0]].append(r)
        if self.log_source.startswith("ray:"):
            node = self.log_source[4:]
            if self._send_tail:
                # A follower that starts on a file shows its tail first (``tail -n``), then follows.
                self._send_tail = False
                self._out.append(LogRecords(self.log_source, list(self.worker_tail.get(node, ()))))
                return
            worker = [r for r in records if r.has_prefix and (r.node or NODES[0]) == node]
            if worker:
                self._out.append(LogRecords(self.log_source, worker))

    def select_log(self, source: str) -> None:
        self.log_source = source
        self._send_tail = source.startswith("ray:")
        if self._send_tail:
            self._emit_log([])

    def _serving_log(self) -> None:
        """What a serving vLLM prints: a stats line every few seconds, an access-log line per request."""
        snap = self.serving.last
        if self.feed is None or snap is None or self.t < self.next_stats_line:
            return
        self.next_stats_line = self.t + 5.0
        stamp = time.strftime("%m-%d %H:%M:%S", time.gmtime(EPOCH + self.t))
        running = int(snap.requests_running or 0)
        prompt, generation = snap.prompt_tokens_per_s or 0.0, snap.generation_tokens_per_s or 0.0
        lines = [
            f"INFO {stamp} [metrics.py:488] Avg prompt throughput: {prompt:.1f} tokens/s, "
            f"Avg generation throughput: {generation:.1f} tokens/s, Running: {running} "
            f"reqs, Swapped: 0 reqs, Pending: {int(snap.requests_waiting or 0)} reqs, GPU KV cache usage: "
            f"{100 * (snap.kv_cache_usage or 0):.1f}%, CPU KV cache usage: 0.0%.",
        ]
        lines += [f'INFO:     192.168.100.20:{51000 + self.rng.randint(0, 999)} - "POST /v1/chat/completions '
                  f'HTTP/1.1" 200 OK' for _ in range(running)]
        self._emit_log(self.feed.feed(lines, EPOCH + self.t))

    def _sample(self) -> None:
        load = self._load()
        received = time.monotonic() if self.live_received else None
        for name, node in self.nodes.items():
            sample = node.sample(self.t, load, self.interval, received, ray_up=self.ray_up,
                                 vllm_up=self.launched_at is not None)
            self._out.append(NodeSampled(name, sample))
        if self.state is EngineState.READY:
            self._out.append(ServingSampled(self.serving.snapshot(EPOCH + self.t)))
            self._serving_log()

    def _load(self) -> Load:
        if self.state is EngineState.READY:
            return SERVING if self.serving.busy(self.t) else STAGE_LOAD["api"]
        if self.state in (EngineState.STARTING, EngineState.VERIFYING) and self.feed is not None:
            return STAGE_LOAD.get(self.feed.running_stage() or "config", STAGE_LOAD["api"])
        if self.state is EngineState.PREFLIGHT:
            return Load(1, 12, 0.002, IDLE.mem)
        return IDLE

    # -- the initial picture ----------------------------------------------------------------------
    def hello(self) -> list[Event]:
        out: list[Event] = []
        for name in NODES:
            out.append(NodeLinkChanged(name, "connected", f"connected to {name} (simulated)"))
            out.append(NodeFacts(name, hostname=f"{name}-gb10", kernel="6.11.0-1016-nvidia",
                                 uptime_seconds=86_400 * 3 + 3600))
        out.append(EngineChanged(EngineState.STOPPED, "nothing running on spark1, spark2"))
        return out


class _ServingSim:
    """Made-up but plausible serving figures: bursts of requests from a couple of users."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.last: ServingSnapshot | None = None
        self.hist: dict[str, deque[float]] = {
            n: deque(maxlen=120) for n in ServingHistory.__dataclass_fields__
        }

    def reset(self) -> None:
        for ring in self.hist.values():
            ring.clear()

    def busy(self, t: float) -> bool:
        return math.sin(t / 9.0) > -0.3

    def snapshot(self, wall: float) -> ServingSnapshot:
        r = self.rng
        t = wall - EPOCH
        busy = self.busy(t)
        running = float(r.randint(2, 6)) if busy else 0.0
        waiting = float(r.choice((0, 0, 0, 1))) if busy else 0.0
        gen = (running * r.uniform(19, 23)) if busy else 0.0
        prompt = (running * r.uniform(150, 420)) if busy else 0.0
        kv = min(0.9, 0.04 + running * r.uniform(0.03, 0.05)) if busy else 0.01
        values = {"generation_tokens_per_s": gen, "prompt_tokens_per_s": prompt, "kv_cache_usage": kv,
                  "requests_running": running, "requests_waiting": waiting,
                  "ttft_p95": 0.41 if busy else 0.0, "itl_p95": 0.052 if busy else 0.0}
        for name, value in values.items():
            self.hist[name].append(value)
        self.last = ServingSnapshot(
            at=wall, requests_running=running, requests_waiting=waiting, kv_cache_usage=kv,
            prefix_cache_hit_rate=0.46 if busy else None, prompt_tokens_per_s=prompt,
            generation_tokens_per_s=gen, requests_per_s=running / 8 if busy else 0.0,
            ttft=LatencyQuantiles(0.18, 0.41, 40, 0.21) if busy else LatencyQuantiles(),
            itl=LatencyQuantiles(0.044, 0.052, 900, 0.045) if busy else LatencyQuantiles(),
            window_seconds=20.0,
            history=ServingHistory(**{n: tuple(v) for n, v in self.hist.items()}),
        )
        return self.last


# ---- the backend ------------------------------------------------------------------------------------
class DemoBackend:
    """A ``ClusterBackend`` over ``DemoSimulation``. ``frozen_at``: run the simulation instantly to that
    many seconds after launch, post the picture, and stop time there (screenshots, snapshot tests)."""

    #: Quitting the demo ends its simulated engine (a real one keeps running on the nodes).
    detached = False

    node_names: Sequence[str] = NODES
    node_roles = ROLES

    def __init__(self, *, seed: int = 7, frozen_at: float | None = None, autostart: bool = True,
                 readonly: bool = False, speed: float = 1.0, recording: str = DEFAULT_RECORDING,
                 ready_after: float = 52.0, tick: float = 0.1) -> None:
        self.readonly = readonly
        self.frozen_at = frozen_at
        self.autostart = autostart
        self.speed = speed
        self.tick = tick
        self.seed, self.recording, self.ready_after = seed, recording, ready_after
        self.sim = DemoSimulation(seed, recording, ready_after, live_received=frozen_at is None)
        self._runs: list[RunRecord] | None = None
        self._sink: EventSink | None = None
        self._t0 = time.monotonic()
        self._offset = 0.0

    def clock(self) -> float:
        """The simulation's wall clock (what elapsed times in the UI are measured against)."""
        return EPOCH + self.sim.t

    def _now(self) -> float:
        return self._offset + (time.monotonic() - self._t0) * self.speed

    def _post(self, events: Sequence[Event]) -> None:
        if self._sink is not None:
            for event in events:
                self._sink(event)

    async def run(self, sink: EventSink) -> None:
        self._sink = sink
        self._post(self.sim.hello())
        if self.frozen_at is not None:
            if self.autostart:
                self.sim.request("start")
            self._post(self.sim.advance(self.frozen_at))
            await asyncio.Event().wait()   # time stands still until the app closes
            return
        if self.autostart:
            # Read-only too: then it plays a start someone else made, which is what watching looks like.
            self.sim.request("start")
            self._post([Notice("demo: a simulated two-node start is running — it reaches ready in about "
                               "a minute; then try t (smoke test), r (restart), x (stop)"
                               if not self.readonly else
                               "demo, read-only: watching a simulated start; the controls are disabled")])
        self._t0 = time.monotonic()
        while True:
            self._post(self.sim.advance(self._now()))
            await asyncio.sleep(self.tick)

    async def _operation(self, kind: str) -> None:
        if self.readonly:
            raise OperationRefused("read-only mode")
        self.sim.request(kind)
        if self.frozen_at is not None:
            return
        while self.sim.busy:
            await asyncio.sleep(self.tick)

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
            dry = DemoSimulation(self.seed, self.recording, self.ready_after)
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
