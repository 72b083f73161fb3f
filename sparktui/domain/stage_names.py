"""The start-up stages' names, order and labels: the one list every layer uses (log parser, history, UI,
demo, headless verbs).

Imports nothing, so that a verb that only needs the names (``sparktui history``, ``--help``) does not load
the log parser.
"""

from __future__ import annotations

#: The start-up stages in the order vLLM goes through them.
STAGES: tuple[str, ...] = (
    "config", "placement", "distributed", "weights", "compile", "kv_cache", "cuda_graphs", "engine", "api",
)
STAGE_INDEX: dict[str, int] = {name: i for i, name in enumerate(STAGES)}
#: What the dashboard calls each stage (the engine panel and ``sparktui timeline`` use these words).
STAGE_LABELS: dict[str, str] = {
    "config": "config", "placement": "Ray placement", "distributed": "distributed", "weights": "weights",
    "compile": "compile", "kv_cache": "KV cache", "cuda_graphs": "CUDA graphs", "engine": "engine init",
    "api": "API server", "serving": "serving (after ready)",
}
