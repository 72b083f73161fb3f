"""`sparktui bench`'s two clients against the stand-in engine on a test-bed host, through real SSH.

The stand-in (real Ray head on its own host, ``python -m sparktui.sim.vllm_standin serve``) shapes its
token rate by concurrency (``sparktui.sim.standin_load``: aggregate R1·c^0.6); the built-in client reaches
it only through the SSH port forward, ``vllm bench serve`` (the stand-in's) runs on the host over SSH.
The host's probe runs with the GB10 NVML double, so the sweep has power samples and a J/token.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.domain.bench import BenchPlan, BenchRecord, baseline, compare
from sparktui.domain.bench_history import BenchStore
from sparktui.remote.bench_runner import (
    PowerRecorder,
    has_vllm_bench,
    run_builtin_sweep,
    run_vllm_bench_sweep,
)
from sparktui.sim.standin_load import LoadShape
from tests.test_serving_testbed import HOST, PYTHON, SERVED, StartEngine, ray_host, start_engine

__all__ = ["ray_host", "start_engine"]   # the fixtures, shared with the serving tests

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

NVML_DIR = Path(__file__).parent / "fixtures" / "telemetry" / "nvml"
STANDIN = [PYTHON, "-m", "sparktui.sim.vllm_standin"]


def _within_shape(rate: float | None, concurrency: int) -> None:
    """Measured output tok/s lies under the stand-in's aggregate rate (the curve's ceiling: TTFT and
    the client only subtract) and above a generous floor for a loaded 2-core CI box."""
    ceiling = LoadShape().aggregate_rate(concurrency)
    assert rate is not None
    assert 0.25 * ceiling < rate <= 1.05 * ceiling, (concurrency, rate, ceiling)


async def test_bench_sweep_both_clients_energy_and_compare(start_engine: StartEngine, ray_host: object,
                                                           tmp_path: Path) -> None:
    engine = await start_engine()
    node = ray_host.spark_config().node(HOST)  # type: ignore[attr-defined]
    power = PowerRecorder({HOST: (engine.transport, node)}, interval=0.5,
                          env={"PYTHONPATH": str(NVML_DIR), "SPARKTUI_PROBE_NVML_MODULE": "gb10_pynvml"})
    power.start()
    try:
        await power.wait_first(30)
        plan = BenchPlan(concurrency=(1, 4), input_len=16, output_len=24, requests=8, warmup=1)
        seen: list[tuple[int, int, int]] = []
        builtin = await run_builtin_sweep(engine.api, SERVED, plan, power=power,
                                          on_progress=lambda *a: seen.append(a))
        assert not builtin.interrupted
        one, four = builtin.levels
        assert (one.completed, four.completed) == (8, 8) and one.failed == four.failed == 0
        assert one.output_tokens == four.output_tokens == 8 * 24   # ignore_eos: exactly output_len
        _within_shape(one.output_tok_s, 1)
        _within_shape(four.output_tok_s, 4)
        assert four.output_tok_s is not None and one.output_tok_s is not None
        assert four.output_tok_s > 1.2 * one.output_tok_s            # the aggregate rises with c
        assert one.itl.p50 is not None and four.itl.p50 is not None
        assert four.itl.p50 > one.itl.p50                            # each stream slows down
        assert (4, 8, 8) in seen
        assert one.energy is not None and one.energy.joules_per_token is not None
        assert one.energy.joules_per_token > 0

        assert await has_vllm_bench(engine.transport, list, STANDIN)
        # `vllm bench serve` runs on the host: its URL is the engine's port as the host sees it.
        vllm = await run_vllm_bench_sweep(engine.transport, list, STANDIN,
                                          base_url=f"http://127.0.0.1:{engine.port}", model=SERVED,
                                          plan=plan, power=power)
        v_one, v_four = vllm.levels
        assert (v_one.completed, v_four.completed) == (8, 8)
        assert v_one.output_tokens == 8 * 24
        _within_shape(v_one.output_tok_s, 1)
        _within_shape(v_four.output_tok_s, 4)
        assert v_one.ttft.p95 is not None and v_one.itl.p99 is not None
    finally:
        await power.stop()

    store = BenchStore(tmp_path / "bench.jsonl")
    first = BenchRecord(1000.0, "/models/standin-model", "", tuple(builtin.levels), 16, 24, "builtin")
    store.append(first)
    again = BenchRecord(2000.0, "/models/standin-model", "", tuple(builtin.levels[:1]), 16, 24, "builtin")
    earlier = baseline(again, store.load())
    assert earlier == first
    (cmp,) = compare(again, earlier)
    assert cmp.change_percent == pytest.approx(0.0)
    assert cmp.describe("11-28").startswith("output tok/s at c=1: ")
    assert "(±0 % vs the run of 11-28, same image)" in cmp.describe("11-28")

