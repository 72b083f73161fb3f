"""Preflight's memory sizing says what `sparktui plan` says, and refuses weights that leave no KV cache."""

from __future__ import annotations

from sparktui.domain.events import StepStatus
from sparktui.domain.lifecycle.memory_fit import check_memory_fit
from sparktui.domain.lifecycle.preflight import PreflightFacts
from tests.test_sizing import _llama_dir, _spark_config


def test_weights_without_room_for_a_kv_cache_fail_with_the_gpus_they_need():
    # Llama-3.3-70B BF16 (131.4 GiB) at TP 2 and --gpu-memory-utilization 0.5: 60.8 GiB budget per node,
    # 65.7 GiB of weights each — vLLM would refuse after loading; preflight refuses first.
    facts = {n: PreflightFacts(mem_total_kb=127_600_748, mem_available_kb=118 * 1024 * 1024)
             for n in ("spark1", "spark2")}
    views = check_memory_fit(_spark_config(["--gpu-memory-utilization", "0.5"]), facts, _llama_dir())
    assert {v.status for v in views} == {StepStatus.FAILED}
    v = views[0]
    assert v.message.startswith("no room for a KV cache: 60.8 GiB budget − 65.7 GiB weights/GPU")
    # (131.4 GiB) / (60.8 − 5 − 1 GiB) → 3 GPUs
    assert "fix: 131.4 GiB of weights need at least 3 GPUs at this budget" in v.message
    assert any(line.startswith("  activations + non-torch ~4.0 GiB, CUDA graphs ~1.0 GiB")
               for line in v.output_tail)


def test_a_start_that_fits_carries_the_plans_figures():
    facts = {"spark1": PreflightFacts(mem_total_kb=127_600_748, mem_available_kb=118 * 1024 * 1024)}
    [view] = check_memory_fit(_spark_config(["--gpu-memory-utilization", "0.8", "--max-model-len", "2048"]),
                              facts, _llama_dir())
    assert view.status is StepStatus.OK
    assert view.output_tail[0].startswith("spark1: peak 97.4 GiB of 121.7 GiB (read on the node;")
    # 174,610 tokens ÷ 2,048
    assert "  concurrency at --max-model-len 2,048: 85.26×" in view.output_tail
