"""Whole-log convenience and rendering: ``parse_log_text``, ``timeline_from_bytes``, human table."""

from __future__ import annotations

from sparktui.domain.durations import format_duration
from sparktui.domain.logs.diagnosis import diagnosis, node_label
from sparktui.domain.logs.rules import STAGE_LABELS
from sparktui.domain.logs.stages import Failure, Timeline, TimelineSnapshot
from sparktui.domain.logs.stream import LineSplitter

_CHUNK = 1 << 20


def timeline_from_bytes(data: bytes, expected_nodes: int | None = None) -> TimelineSnapshot:
    """Read a whole log (bytes as on disk) through the byte splitter and the stage machine."""
    timeline = Timeline(expected_nodes)
    splitter = LineSplitter()
    for i in range(0, len(data), _CHUNK):
        timeline.feed_bytes(splitter.feed_raw(data[i : i + _CHUNK]))
    timeline.feed_lines(splitter.flush())
    return timeline.snapshot()


def parse_log_text(text: str, expected_nodes: int | None = None) -> TimelineSnapshot:
    return timeline_from_bytes(text.encode("utf-8", "surrogatepass"), expected_nodes)


# How ``sparktui timeline`` shows a fact: its unit (for rounding) and what it means, in a few words.
# "s" durations, "GiB" sizes, "x" ratios, "n" counts; anything else is shown as logged.
FACT_MEANINGS: dict[str, tuple[str, str]] = {
    "tensor_parallel_size": ("n", "GPUs each layer is split across"),
    "pipeline_parallel_size": ("n", "groups of layers, one after another"),
    "data_parallel_size": ("n", "engine copies"),
    "world_size": ("n", "worker processes (GPUs) in the engine"),
    "max_model_len": ("n", "longest request, in tokens"),
    "max_seq_len": ("n", "longest request, in tokens"),
    "weights_gib": ("GiB", "model weights per GPU (the largest)"),
    "weights_seconds": ("s", "loading the weights (the slowest worker)"),
    "weights_load_seconds": ("s", "reading the checkpoint (the slowest worker)"),
    "download_seconds": ("s", "downloading the weights"),
    "compile_seconds": ("s", "torch.compile (the slowest worker)"),
    "kv_cache_gib": ("GiB", "memory for the KV cache per GPU (the tightest)"),
    "kv_cache_tokens": ("n", "tokens the KV cache holds"),
    "kv_cache_blocks": ("n", "KV-cache blocks"),
    "max_concurrency": ("x", "requests of full length that fit at once"),
    "cuda_graphs_seconds": ("s", "capturing CUDA graphs"),
    "cuda_graphs_gib": ("GiB", "memory the CUDA graphs took"),
    "cuda_graphs_sizes": ("n", "batch sizes captured as CUDA graphs"),
    "cuda_graphs_max_size": ("n", "largest batch captured as a CUDA graph"),
    "load_format": ("", "how the weights are read (--load-format)"),
    "safetensors_load_strategy": ("", "how safetensors files are read (--safetensors-load-strategy)"),
    "engine_seconds": ("s", "engine init: profile, KV cache, warm-up"),
    "placement_wait_seconds": ("s", "waiting for Ray to place the GPUs"),
    "served_seconds": ("s", "serving, from ready to the stop or crash"),
    "requests_served": ("n", "requests answered (2xx in the access log, probes not counted)"),
    "nodes_seen": ("n", "nodes whose lines the log shows"),
    "stop_signal": ("", "the signal that stopped the engine"),
    "nccl_version": ("", "NCCL library"),
    "api_url": ("", "where the OpenAI API listens"),
    "vllm_release": ("", "vLLM release"),
    "compile_cache_hit": ("", "compiled graphs came from the cache"),
    "enforce_eager": ("", "--enforce-eager: no compile, no CUDA graphs"),
    "ready_inferred": ("", "ready read from serving lines (no startup line)"),
}


def format_fact(key: str, value: object) -> str:
    """A fact rounded to its unit, with what it means: ``30.1 GiB  (model weights per GPU ...)``."""
    unit, meaning = FACT_MEANINGS.get(key, ("", ""))
    if isinstance(value, bool):
        text = "yes" if value else "no"
    elif unit == "s" and isinstance(value, int | float):
        text = format_duration(float(value))
    elif unit == "GiB" and isinstance(value, int | float):
        text = f"{value:.1f} GiB"
    elif unit == "x" and isinstance(value, int | float):
        text = f"{value:.1f}×"
    elif unit == "n" and isinstance(value, int | float):
        text = f"{value:,}"
    elif isinstance(value, float):
        text = f"{value:.2f}"
    else:
        text = str(value)
    return f"{text}  ({meaning})" if meaning else text


def _fmt_seconds(seconds: float | None) -> str:
    return "-" if seconds is None else format_duration(seconds)


def render_human(snap: TimelineSnapshot) -> str:
    lines: list[str] = []
    lines.append(f"vLLM {snap.vllm_version or '?'}  ·  {snap.model or 'model ?'}")
    outcome = snap.outcome.upper()
    if snap.served_seconds is not None:
        verb = "stopped" if snap.outcome == "stopped" else "crashed"
        signal = snap.facts.get("stop_signal") if snap.outcome == "stopped" else None
        how = f" by {signal}" if signal else ""
        outcome += f" ({verb}{how} after serving {format_duration(snap.served_seconds)})"
    lines.append(f"outcome: {outcome}")
    lines.append("")
    width = max(len(label) for label in STAGE_LABELS.values())
    lines.append(f"{'STAGE':<{width}} {'STATUS':<8} {'STARTED':<15} {'ENDED':<15} {'TOOK':>8}  PROGRESS")
    for st in snap.stages:
        progress = f"{st.progress.done}/{st.progress.total}" if st.progress is not None else ""
        marker = ""
        if st.name == snap.current:
            marker = "  <- failed here" if st.status == "failed" else "  <- now"
        lines.append(
            f"{STAGE_LABELS[st.name]:<{width}} {st.status:<8} {st.started or '-':<15} {st.ended or '-':<15} "
            f"{_fmt_seconds(st.seconds):>8}  {progress}{marker}"
        )
    if snap.facts:
        lines.append("")
        lines.append("Facts:")
        kwidth = max(len(k) for k in snap.facts)
        for key, value in snap.facts.items():
            lines.append(f"  {key:<{kwidth}}  {format_fact(key, value)}")
    if snap.nodes:
        lines.append("")
        lines.append("Nodes: " + ", ".join(snap.nodes))
    if snap.failure is not None:
        lines.append("")
        lines.extend(_failure_lines(snap.failure))
    return "\n".join(lines)


def _failure_lines(f: Failure) -> list[str]:
    """``FAILED: oom on 10.0.0.2 · in KV cache``, the hint, then the log's message (the diagnosis' order)."""
    # A log alone names a worker node by its Ray address; the head's lines name none (no node shown).
    parts = diagnosis(f.kind, STAGE_LABELS.get(f.stage), node_label(f.node, {}, None), f.hint, f.message)
    text = {part.role: part.text for part in parts}
    out = [f"FAILED: {f.kind} {text.get('where') or '(stage unknown)'}"]
    for part in parts:
        if part.role == "hint":
            out.append(f"  hint: {part.text}")
        elif part.role == "message":
            out.extend(("  " if i == 0 else "    ") + line for i, line in enumerate(part.text.split("\n")))
    return out
