"""How the engine panel captions what the producer's ``TimelineView`` (``sparktui.domain.engine_view``) holds.

The stage rows, facts and failure arrive built; this module only says which facts are shown, in which
order, with which caption and unit.
"""

from __future__ import annotations

from sparktui.domain.logs import STAGE_LABELS, STAGES

__all__ = ["FACT_CAPTIONS", "STAGE_LABELS", "STAGE_ORDER"]

STAGE_ORDER: tuple[str, ...] = tuple(STAGES)
#: Facts shown under the stage bars, in this order, with their captions and units.
FACT_CAPTIONS = (
    ("vllm_version", "vLLM", ""), ("model", "model", ""), ("tensor_parallel_size", "TP", ""),
    ("pipeline_parallel_size", "PP", ""), ("weights_gib", "weights", " GiB"),
    ("kv_cache_gib", "KV", " GiB"), ("kv_cache_tokens", "KV tokens", ""),
    ("max_concurrency", "max conc", "×"), ("cuda_graphs_gib", "graphs", " GiB"),
    ("nccl_version", "NCCL", ""), ("api_url", "API", ""),
)
