"""The engine panel's view of a ``TimelineSnapshot`` (``sparktui.domain.logs``): stage rows, facts, failure.

This adapter is the only UI code that knows the timeline's attribute names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sparktui.domain.logs import STAGES

STAGE_ORDER: tuple[str, ...] = tuple(STAGES)
STAGE_LABELS = {
    "config": "config", "placement": "Ray placement", "distributed": "distributed", "weights": "weights",
    "compile": "compile", "kv_cache": "KV cache", "cuda_graphs": "CUDA graphs", "engine": "engine init",
    "api": "API server", "serving": "serving (after ready)",
}
#: Facts shown under the stage bars, in this order, with their captions and units.
FACT_CAPTIONS = (
    ("vllm_version", "vLLM", ""), ("model", "model", ""), ("tensor_parallel_size", "TP", ""),
    ("pipeline_parallel_size", "PP", ""), ("weights_gib", "weights", " GiB"),
    ("kv_cache_gib", "KV", " GiB"), ("kv_cache_tokens", "KV tokens", ""),
    ("max_concurrency", "max conc", "×"), ("cuda_graphs_gib", "graphs", " GiB"),
    ("nccl_version", "NCCL", ""), ("api_url", "API", ""),
)


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


def _get(obj: Any, *names: str) -> Any:
    for name in names:
        if isinstance(obj, dict) and name in obj:
            return obj[name]
        if hasattr(obj, name):
            return getattr(obj, name)
    return None


def stage_views(timeline: Any) -> list[StageView]:
    by_name: dict[str, Any] = {}
    if timeline is not None:
        stages = _get(timeline, "stages") or ()
        items = stages.values() if isinstance(stages, dict) else stages
        for s in items:
            by_name[str(_get(s, "name"))] = s
    views = []
    for name in STAGE_ORDER:
        s = by_name.get(name)
        if s is None:
            views.append(StageView(name, STAGE_LABELS[name]))
            continue
        progress = _get(s, "progress")
        done = total = None
        if progress is not None:
            done = _get(progress, "done")
            total = _get(progress, "total")
            if done is None and isinstance(progress, tuple | list) and len(progress) == 2:
                done, total = progress
        status = _get(s, "status")
        views.append(StageView(
            name=name, label=STAGE_LABELS[name],
            status=str(getattr(status, "value", status) or "pending"), seconds=_get(s, "seconds"),
            done=None if done is None else float(done), total=None if total is None else float(total),
        ))
    return views


def facts_of(timeline: Any) -> dict[str, Any]:
    if timeline is None:
        return {}
    facts = dict(_get(timeline, "facts") or {})
    for key in ("vllm_version", "model"):
        value = _get(timeline, key)
        if value and key not in facts:
            facts[key] = value
    return facts


def failure_of(timeline: Any) -> FailureView | None:
    f = _get(timeline, "failure") if timeline is not None else None
    if not f:
        return None
    return FailureView(
        kind=str(_get(f, "kind") or "unknown"), stage=_get(f, "stage"),
        message=str(_get(f, "message", "line") or ""), hint=str(_get(f, "hint") or ""),
    )


def stall_seconds(timeline: Any, now: float) -> float | None:
    fn = getattr(timeline, "stall_seconds", None)
    if fn is None:
        return None
    try:
        value = fn(now)
    except Exception:  # a snapshot without a running stage, or a clock the timeline does not use
        return None
    return None if value is None else float(value)
