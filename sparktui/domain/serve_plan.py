"""``sparktui plan``: will the start fit, how long until ready, how fast can it decode — each figure with
its inputs (pure).

* Memory per node: ``sizing.size_node`` with the weights each GPU loads (the safetensors when the model's
  files are at hand, else counted from config.json: ``model_params``), the overhead split into peak
  activations + non-torch memory and CUDA graphs, the KV cache, its tokens and the concurrency at
  ``--max-model-len``.
* Time to ready: the median of the earlier starts of the same model and image (``history``).
* Decode ceiling for one stream: a token reads the active weights once, each node its ``1/TP`` share at the
  node's memory bandwidth (a GB10: 273 GB/s), and waits for 2 all-reduces per layer when TP > 1 (after
  attention and after the MLP) at the latency the last ``linktest`` measured (else an assumed figure, said).
  A measured decode well below the ceiling is normal (50–60 % on TP-2 Sparks, field notes); one above it
  is a measurement error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparktui.domain.history import STAGE_ORDER, RunRecord, typical_ready_seconds, typical_stage_seconds
from sparktui.domain.model_params import ParamCount
from sparktui.domain.sizing import (
    DEFAULT_OVERHEAD_BYTES,
    GIB,
    EngineSettings,
    ModelShape,
    NodeSizing,
    size_node,
)

#: A GB10's LPDDR5x bandwidth (NVIDIA's DGX Spark spec sheet), GB/s.
GB10_BANDWIDTH_GBS = 273.0
#: A GB10's MemTotal as Linux reports it (reference/spark-environment.md), for a node that cannot be read.
GB10_MEMTOTAL_BYTES = int(121.7 * GIB)
#: One small all-reduce between two Sparks over the cable when no linktest measured it (field notes: ~30 µs).
ASSUMED_ALLREDUCE_US = 30.0
#: Of the overhead vLLM reserves beside weights and KV cache, what CUDA graphs take (vLLM 0.21+ counts it in
#: the budget; the recorded logs: 0.06–2.4 GiB); the rest is peak activations and non-torch memory.
GRAPHS_BYTES = 1 * GIB


@dataclass(frozen=True)
class DecodeCeiling:
    """One stream's decode ceiling on ``tp`` × ``pp`` nodes."""

    bandwidth_gbs: float
    active_bytes: int
    tp: int
    pp: int
    layers: int
    allreduce_us: float
    allreduce_source: str

    @property
    def node_bytes(self) -> float:
        """Bytes one node reads per token (its TP share of every stage it holds, stages in turn)."""
        return self.active_bytes / self.tp

    @property
    def allreduces(self) -> int:
        return 2 * self.layers if self.tp > 1 else 0

    @property
    def bandwidth_tok_s(self) -> float:
        return self.bandwidth_gbs * 1e9 / self.node_bytes

    @property
    def tok_s(self) -> float:
        return 1.0 / (1.0 / self.bandwidth_tok_s + self.allreduces * self.allreduce_us * 1e-6)

    def percent(self, measured_tok_s: float) -> float:
        return 100.0 * measured_tok_s / self.tok_s

    def describe(self) -> str:
        text = (f"{self.tok_s:.1f} tok/s for one stream: {self.bandwidth_gbs:g} GB/s ÷ "
                f"{self.node_bytes / 1e9:.2f} GB active weights per node per token "
                f"({self.active_bytes / 1e9:.2f} GB ÷ TP {self.tp}) = {self.bandwidth_tok_s:.1f} tok/s")
        if self.allreduces:
            text += (f", then {self.allreduces} all-reduces × {self.allreduce_us:g} µs "
                     f"({self.allreduce_source})")
        return text

    def to_json(self) -> dict[str, Any]:
        return {"tok_s": round(self.tok_s, 2), "bandwidth_tok_s": round(self.bandwidth_tok_s, 2),
                "bandwidth_gbs": self.bandwidth_gbs, "active_bytes": self.active_bytes,
                "node_bytes": int(self.node_bytes), "tp": self.tp, "pp": self.pp,
                "allreduces_per_token": self.allreduces, "allreduce_us": self.allreduce_us,
                "allreduce_source": self.allreduce_source}


def allreduce_latency(linktests: Sequence[Mapping[str, Any]]) -> tuple[float, str]:
    """The newest linktest's small-message all-reduce latency (``detail.latency_us``), else an assumed one."""
    for record in reversed(linktests):
        detail = record.get("detail") or {}
        value = detail.get("latency_us") if isinstance(detail, Mapping) else None
        if isinstance(value, (int, float)) and value > 0:
            return float(value), f"measured by linktest ({record.get('tool', '?')})"
    return ASSUMED_ALLREDUCE_US, "assumed: no linktest measured the latency"


def decode_ceiling(params: ParamCount, tp: int, pp: int, linktests: Sequence[Mapping[str, Any]] = (),
                   bandwidth_gbs: float = GB10_BANDWIDTH_GBS) -> DecodeCeiling:
    latency, source = allreduce_latency(linktests)
    return DecodeCeiling(bandwidth_gbs, params.active_bytes(), tp, pp, params.layers, latency, source)


def vllm_kv_tokens(shape: ModelShape, kv_bytes: int, tp: int, pp: int, kv_dtype: str = "auto") -> int:
    """The "GPU KV cache size: N tokens" vLLM prints. A hybrid model's linear-attention layers share the
    attention layers' page size (vLLM's hybrid allocator), so vLLM divides by every layer, not only the
    full-attention ones; a plain model divides by its KV bytes per token."""
    per_token = shape.kv_bytes_per_token(tp, pp, kv_dtype)
    if not per_token:
        return 0
    if shape.hybrid and shape.attention_layers:
        per_layer = per_token / -(-shape.attention_layers // pp)
        layers = -(-(shape.attention_layers + shape.linear_layers) // pp)
        return max(0, int(kv_bytes // (per_layer * layers)))
    return max(0, kv_bytes // per_token)


@dataclass(frozen=True)
class NodePlan:
    sizing: NodeSizing
    activations_bytes: int
    graphs_bytes: int
    kv_tokens_vllm: int
    memory_source: str
    disk_read_gibs: float | None = None

    @property
    def peak_bytes(self) -> int:
        s = self.sizing
        return s.weights_bytes + self.activations_bytes + self.graphs_bytes + max(0, s.kv_cache_bytes)

    def lines(self) -> list[str]:
        s, g = self.sizing, _gib
        out = [f"{s.node}: peak {g(self.peak_bytes)} of {g(s.total_bytes)} ({self.memory_source}; "
               f"{g(s.available_bytes)} free)",
               f"  budget   {g(s.budget_bytes)} = --gpu-memory-utilization × {g(s.total_bytes)}",
               f"  weights  {g(s.weights_bytes)} per GPU",
               f"  activations + non-torch ~{g(self.activations_bytes)}, CUDA graphs ~{g(self.graphs_bytes)}",
               f"  KV cache {g(s.kv_cache_bytes)} = {self.kv_tokens_vllm:,} tokens as vLLM counts them "
               f"({s.kv_bytes_per_token:,} bytes per token"
               + (f", {s.sequence_state_bytes / 2**20:.1f} MiB state per sequence)" if s.sequence_state_bytes
                  else ")")]
        if s.max_model_len and s.concurrency is not None:
            out.append(f"  concurrency at --max-model-len {s.max_model_len:,}: {s.concurrency:.2f}×")
        elif s.concurrency is not None:
            out.append(f"  concurrency at the model's context: {s.concurrency:.2f}× "
                       f"(largest --max-model-len that fits: {s.max_model_len_fit:,})")
        out.append(f"  host keeps {g(s.os_margin_bytes)} (floor {g(s.floor_bytes)})")
        out.append("  disk read rate: " + ("not measured" if self.disk_read_gibs is None
                                           else f"{self.disk_read_gibs:.2f} GiB/s"))
        out += [f"  WILL NOT FIT: {p}" for p in s.problems]
        return out

    def to_json(self) -> dict[str, Any]:
        s = self.sizing
        return {"node": s.node, "fits": s.ok, "problems": list(s.problems),
                "memory_source": self.memory_source, "total_bytes": s.total_bytes,
                "available_bytes": s.available_bytes, "budget_bytes": s.budget_bytes,
                "weights_bytes": s.weights_bytes, "activations_bytes": self.activations_bytes,
                "graphs_bytes": self.graphs_bytes, "kv_cache_bytes": s.kv_cache_bytes,
                "peak_bytes": self.peak_bytes, "kv_bytes_per_token": s.kv_bytes_per_token,
                "sequence_state_bytes": s.sequence_state_bytes, "kv_tokens": self.kv_tokens_vllm,
                "max_model_len": s.max_model_len, "max_model_len_fit": s.max_model_len_fit,
                "concurrency": None if s.concurrency is None else round(s.concurrency, 2),
                "os_margin_bytes": s.os_margin_bytes, "floor_bytes": s.floor_bytes,
                "disk_read_gibs": self.disk_read_gibs}


def plan_node(node: str, shape: ModelShape, weights_total_bytes: int, total_bytes: int, available_bytes: int,
              settings: EngineSettings, *, floor_bytes: int = 4 * GIB,
              overhead_bytes: int = DEFAULT_OVERHEAD_BYTES, memory_source: str = "read on the node",
              disk_read_gibs: float | None = None, weights_per_gpu_bytes: int | None = None) -> NodePlan:
    """One node's plan. ``weights_per_gpu_bytes``: the heaviest GPU's share when known (a PP stage with the
    embedding weighs more than ``total / (TP × PP)``)."""
    share = settings.tensor_parallel * settings.pipeline_parallel
    weights = weights_total_bytes if weights_per_gpu_bytes is None else weights_per_gpu_bytes * share
    s = size_node(node, shape, weights, total_bytes, available_bytes, settings, floor_bytes=floor_bytes,
                  overhead_bytes=overhead_bytes)
    graphs = min(GRAPHS_BYTES, overhead_bytes)
    tokens = vllm_kv_tokens(shape, max(0, s.kv_cache_bytes), settings.tensor_parallel,
                            settings.pipeline_parallel, settings.kv_cache_dtype)
    return NodePlan(s, overhead_bytes - graphs, graphs, tokens, memory_source, disk_read_gibs)


@dataclass(frozen=True)
class ReadyEstimate:
    seconds: float | None
    runs: int
    model: str
    image: str
    #: (stage, median seconds) of those starts, in the order stages run: where the time goes
    stages: tuple[tuple[str, float], ...] = ()

    def describe(self) -> str:
        if self.seconds is None:
            return f"no earlier start of {self.model} on {self.image or 'this image'} reached ready: unknown"
        text = (f"{_duration(self.seconds)}: the median of the last {self.runs} start(s) of {self.model} on "
                f"{self.image or 'this image'} that reached ready")
        if self.stages:
            text += " (" + ", ".join(f"{name} {_duration(sec)}" for name, sec in self.stages) + ")"
        return text


def ready_estimate(runs: Sequence[RunRecord], model: str, image: str) -> ReadyEstimate:
    """From earlier starts of the same model and image (oldest first): the median time to ready and each
    stage's median."""
    seconds, count = typical_ready_seconds(runs)
    stages = []
    for stage in STAGE_ORDER:
        typical, _ = typical_stage_seconds(runs, stage)
        if typical is not None:
            stages.append((stage, typical))
    return ReadyEstimate(seconds, count, model, image, tuple(stages))


def _duration(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"


@dataclass(frozen=True)
class StartPlan:
    model: str
    settings: EngineSettings
    weights_source: str
    nodes: tuple[NodePlan, ...]
    ceiling: DecodeCeiling | None
    ready: ReadyEstimate
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def fits(self) -> bool:
        return all(n.sizing.ok for n in self.nodes)

    def fixes(self) -> list[str]:
        out = [f"{n.sizing.node}: {p}" for n in self.nodes for p in n.sizing.problems]
        tight = [n.sizing for n in self.nodes if n.sizing.kv_cache_bytes <= n.sizing.sequence_state_bytes]
        if tight:
            out.append(weights_fix(min(tight, key=lambda s: s.budget_bytes), self.settings))
        return out

    def render(self) -> str:
        st = self.settings
        lines = [f"plan for {self.model}: TP {st.tensor_parallel} × PP {st.pipeline_parallel}, "
                 f"--gpu-memory-utilization {st.gpu_memory_utilization:g}, --max-model-len "
                 f"{st.max_model_len or 'model default'}, --kv-cache-dtype {st.kv_cache_dtype}",
                 f"weights: {self.weights_source}"]
        for n in self.nodes:
            lines += n.lines()
        lines.append("time to ready: " + self.ready.describe())
        lines.append("decode ceiling: " + (self.ceiling.describe() if self.ceiling else
                                           "unknown (the model's config.json cannot be counted)"))
        lines += list(self.notes)
        lines.append("verdict: fits" if self.fits else "verdict: WILL NOT FIT — " + "; ".join(self.fixes()))
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        st = self.settings
        return {"model": self.model, "fits": self.fits, "fixes": self.fixes(),
                "settings": {"tensor_parallel": st.tensor_parallel, "pipeline_parallel": st.pipeline_parallel,
                             "gpu_memory_utilization": st.gpu_memory_utilization,
                             "max_model_len": st.max_model_len, "kv_cache_dtype": st.kv_cache_dtype},
                "weights_source": self.weights_source, "nodes": [n.to_json() for n in self.nodes],
                "ready": {"seconds": self.ready.seconds, "runs": self.ready.runs,
                          "stages": dict(self.ready.stages), "text": self.ready.describe()},
                "decode_ceiling": None if self.ceiling is None else self.ceiling.to_json(),
                "notes": list(self.notes)}


def weights_fix(s: NodeSizing, settings: EngineSettings) -> str:
    """What makes weights that leave no KV cache fit: the GPUs they need at this budget (each needs at least
    a GiB of KV cache), or a smaller checkpoint."""
    world = settings.tensor_parallel * settings.pipeline_parallel
    total = s.weights_bytes * world
    room = s.budget_bytes - s.overhead_bytes - GIB
    if room <= 0:
        return (f"fix: the budget {_gib(s.budget_bytes)} does not even hold the overhead: raise "
                "--gpu-memory-utilization or free memory")
    need = -(-total // room)
    return (f"fix: {_gib(total)} of weights need at least {need} GPUs at this budget ({_gib(room)} each for "
            f"weights), TP × PP = {world} now: add nodes and raise engine.tensor_parallel_size, or use a "
            "quantized checkpoint (FP8 halves BF16 weights)")


def parse_meminfo(text: str) -> tuple[int, int] | None:
    """(MemTotal, MemAvailable) in bytes from ``/proc/meminfo``; None when either is missing."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if name in ("MemTotal", "MemAvailable") and parts and parts[0].isdigit():
            found[name] = int(parts[0]) * 1024
    if "MemTotal" not in found or "MemAvailable" not in found:
        return None
    return found["MemTotal"], found["MemAvailable"]


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


__all__ = ["ASSUMED_ALLREDUCE_US", "GB10_BANDWIDTH_GBS", "GB10_MEMTOTAL_BYTES", "DecodeCeiling", "NodePlan",
           "ReadyEstimate", "StartPlan", "allreduce_latency", "decode_ceiling", "parse_meminfo", "plan_node",
           "ready_estimate",
           "vllm_kv_tokens"]
