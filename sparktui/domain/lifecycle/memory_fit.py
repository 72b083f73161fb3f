"""Preflight's memory sizing: will the configured start fit each node's unified memory (pure)?

One check per node (``memory sizing``): the model's shape (config.json) and weights (safetensors) from
the head's model directory, the node's MemTotal / MemAvailable from the node facts, and the engine's
flags (``--gpu-memory-utilization``, ``--max-model-len``, ``--kv-cache-dtype``, Ray's
``--object-store-memory``) → ``sparktui.domain.sizing``. A start that will not fit or would leave the
host under ``engine.memory_floor`` is a WARNING with the numbers (the arithmetic is an estimate; vLLM has
the last word), never a silent pass — except weights that leave no room for any KV cache: vLLM refuses those
after minutes of loading, so preflight refuses them first (FAILED, with the GPUs they need). Each view's
detail lines are ``sparktui plan``'s for the node (peak memory: weights, activations, CUDA graphs, KV).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from sparktui.config import SparkConfig
from sparktui.domain.events import StepStatus, StepView
from sparktui.domain.lifecycle.plan import object_store_args
from sparktui.domain.lifecycle.preflight import PreflightFacts
from sparktui.domain.model_files import ModelDir
from sparktui.domain.serve_plan import plan_node, weights_fix
from sparktui.domain.sizing import EngineSettings, SizingError, shape_from_config

NAME = "memory sizing"


def settings_of(config: SparkConfig) -> EngineSettings:
    e = config.engine
    # The object store Ray is started with: engine.ray_object_store_memory unless ray_start_args names one.
    ray_args = [*object_store_args(config), *e.ray_start_args] if e.executor == "ray" else []
    return EngineSettings.from_args(e.extra_args, tp=e.tensor_parallel_size, pp=e.pipeline_parallel_size,
                                    ray_start_args=ray_args)


def check_memory_fit(config: SparkConfig, facts: Mapping[str, PreflightFacts],
                     model: ModelDir | None, model_error: str | None = None) -> list[StepView]:
    """One view per node in ``facts``; SKIPPED (one view) when the model cannot be sized."""
    def skipped(why: str) -> list[StepView]:
        return [StepView(name=NAME, node=None, status=StepStatus.SKIPPED, message=why)]

    if model is None:
        return skipped(model_error or "model directory not found: nothing to size")
    if not model.exists:
        return skipped(f"{model.path or model.hf_id}: not found on the head, nothing to size")
    if model.config is None:
        return skipped(f"{model.path}/config.json unreadable: {model.config_error or 'missing'}")
    try:
        shape = shape_from_config(model.config)
        settings = settings_of(config)
    except SizingError as exc:
        return skipped(f"cannot size: {exc}")
    weights = model.weights_bytes
    if not weights:
        return skipped(f"{model.path}: no safetensors weights to size")
    floor = int(config.engine.memory_floor)   # bytes (a ByteSize: "4GiB")
    views = []
    for node, nf in facts.items():
        if not nf.mem_total_kb or nf.mem_available_kb is None:
            views.append(StepView(name=NAME, node=node, status=StepStatus.WARNING,
                                  message="MemTotal/MemAvailable unreadable: cannot size"))
            continue
        planned = plan_node(node, shape, weights, nf.mem_total_kb * 1024, nf.mem_available_kb * 1024,
                            settings, floor_bytes=floor)
        s = planned.sizing
        if config.engine.executor == "mp":
            s = replace(s, object_store_explicit=True)   # no Ray, no object store
        detail = tuple(planned.lines())
        if s.ok:
            views.append(StepView(name=NAME, node=node, status=StepStatus.OK, message=s.summary(),
                                  output_tail=detail))
        elif s.kv_cache_bytes <= s.sequence_state_bytes:
            views.append(StepView(name=NAME, node=node, status=StepStatus.FAILED,
                                  message="; ".join([*s.problems, weights_fix(s, settings)]),
                                  output_tail=(s.summary(), *detail)))
        else:
            views.append(StepView(name=NAME, node=node, status=StepStatus.WARNING,
                                  message="; ".join(s.problems), output_tail=(s.summary(), *detail)))
    return views
