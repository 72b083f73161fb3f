"""Benchmark math: percentiles, a level's figures, J/token from recorded power samples, history and
comparison, and vLLM's own result block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparktui.domain.bench import (
    BenchPlan,
    BenchRecord,
    LevelResult,
    Quantiles,
    RequestResult,
    baseline,
    compare,
    energy_joules,
    energy_over,
    level_from_vllm_bench,
    parse_vllm_bench_output,
    percentile,
    power_series,
    read_prompt_file,
    summarize_level,
)
from sparktui.domain.bench_history import BenchStore
from sparktui.domain.telemetry import Sample

H200_STREAM = Path(__file__).parent / "fixtures" / "telemetry" / "h200-nvml-stream.jsonl"


def _h200_power() -> list[tuple[float, float]]:
    samples = [Sample.from_json(json.loads(line)) for line in H200_STREAM.read_text().splitlines()]
    return power_series(samples, node_clock=True)


def test_percentile_is_linear_between_closest_ranks() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    assert percentile(values, 50) == pytest.approx(2.5)       # numpy.percentile([1,2,3,4], 50)
    assert percentile(values, 95) == pytest.approx(3.85)
    assert percentile(values, 99) == pytest.approx(3.97)
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None
    with pytest.raises(ValueError):
        percentile(values, 101)


def test_joules_per_token_from_the_recorded_h200_stream_by_hand() -> None:
    power = _h200_power()
    assert len(power) == 60
    # The H200 busy from seq 23 (mono 50.280868339, 581.461 W) to seq 26 (53.280884295, 688.495 W):
    #   (581.461 + 690.634)/2 × (51.280884844 − 50.280868339) = 636.05800
    #   (690.634 + 688.365)/2 × (52.28088077  − 51.280884844) = 689.49669
    #   (688.365 + 688.495)/2 × (53.280884295 − 52.28088077 ) = 688.43243
    #   = 2013.98712 J; 100 tokens generated → 20.1398712 J/token
    joules = energy_joules(power, 50.280868339, 53.280884295)
    assert joules == pytest.approx(2013.98712, abs=1e-3)
    energy = energy_over({"h200": power}, 50.280868339, 53.280884295, tokens=100)
    assert energy.joules_per_token == pytest.approx(20.1398712, abs=1e-5)
    assert energy.node_joules_per_token("h200") == pytest.approx(20.1398712, abs=1e-5)
    # Edges between readings are interpolated: from midway seq 23→24 (power 636.0475 W) to midway
    # seq 24→25 (689.4995 W) through seq 24 (690.634 W):
    #   (636.0475 + 690.634)/2 × 0.500008252 + (690.634 + 689.4995)/2 × 0.499997963 = 676.70782 J
    start = (50.280868339 + 51.280884844) / 2
    end = (51.280884844 + 52.28088077) / 2
    assert energy_joules(power, start, end) == pytest.approx(676.70782, abs=1e-3)


def test_energy_per_node_and_total_and_unknown_nodes() -> None:
    flat = [(0.0, 100.0), (10.0, 100.0)]
    ramp = [(0.0, 0.0), (10.0, 200.0)]
    energy = energy_over({"a": flat, "b": ramp, "c": []}, 0.0, 10.0, tokens=50)
    assert energy.joules == {"a": pytest.approx(1000.0), "b": pytest.approx(1000.0)}
    assert energy.total_joules == pytest.approx(2000.0)
    assert energy.joules_per_token == pytest.approx(40.0)
    assert energy.unknown == ("c",)
    # A probe that stopped before the window says nothing about it.
    assert energy_joules([(0.0, 100.0)], 5.0, 6.0) is None


def test_summarize_level() -> None:
    results = [
        RequestResult(0.0, 2.0, True, output_tokens=10, prompt_tokens=5, ttft=0.2, itl=(0.1, 0.2, 0.3)),
        RequestResult(0.5, 4.0, True, output_tokens=10, prompt_tokens=5, ttft=0.4, itl=(0.2,)),
        RequestResult(1.0, 1.5, False, error="HTTP 500: boom"),
    ]
    level = summarize_level(2, results, power={"n": [(0.0, 50.0), (4.0, 50.0)]})
    assert (level.completed, level.failed, level.seconds, level.output_tokens) == (2, 1, 4.0, 20)
    assert level.output_tok_s == pytest.approx(5.0)
    assert level.requests_s == pytest.approx(0.5)
    assert level.ttft.p50 == pytest.approx(0.3)
    assert level.itl.count == 4 and level.itl.p50 == pytest.approx(0.2)
    assert level.errors == ("HTTP 500: boom",)
    assert level.energy is not None and level.energy.joules_per_token == pytest.approx(10.0)
    assert LevelResult.from_json(json.loads(json.dumps(level.to_json()))) == level


def _record(at: float, rate4: float, image: str = "img:1", flags: tuple[str, ...] = ()) -> BenchRecord:
    level = LevelResult(4, 8, 8, 0, 10.0, int(rate4 * 10), 800, Quantiles.of([0.1]), Quantiles.of([0.02]))
    return BenchRecord(at, "qwen", image, (level,), 128, 64, "builtin", flags)


def test_history_and_compare(tmp_path: Path) -> None:
    store = BenchStore(tmp_path / "bench.jsonl")
    older, other_image, new = _record(1000.0, 40.0), _record(2000.0, 30.0, "img:2"), _record(3000.0, 37.2)
    for r in (older, other_image):
        store.append(r)
    (tmp_path / "bench.jsonl").open("a").write("not json\n")
    runs = store.load()
    assert runs == [older, other_image]
    # The same image is preferred over a newer run of another image.
    base = baseline(new, runs)
    assert base == older
    (cmp,) = compare(new, base)
    assert cmp.change_percent == pytest.approx(-7.0)
    assert cmp.describe("11-28") == "output tok/s at c=4: 37.2 (−7 % vs the run of 11-28, same image)"
    only_other = baseline(new, [other_image])
    assert only_other is not None
    text = compare(new, only_other)[0].describe("11-29")
    assert "(+24 % vs the run of 11-29, other image)" in text
    # Other request lengths are not comparable.
    assert baseline(BenchRecord(4000.0, "qwen", "img:1", new.levels, 1024, 64, "builtin"), runs) is None


VLLM_OUTPUT = """\
Starting initial single prompt test run...
Maximum request concurrency: 4
100%|██████████| 16/16 [00:04<00:00,  3.52it/s]
============ Serving Benchmark Result ============
Successful requests:                     16
Maximum request concurrency:             4
Benchmark duration (s):                  4.55
Total input tokens:                      2048
Total generated tokens:                  1024
Request throughput (req/s):              3.52
Output token throughput (tok/s):         225.05
Peak output token throughput (tok/s):    260.00
Total Token throughput (tok/s):          675.16
---------------Time to First Token----------------
Mean TTFT (ms):                          61.20
Median TTFT (ms):                        60.00
P50 TTFT (ms):                           60.00
P95 TTFT (ms):                           80.10
P99 TTFT (ms):                           90.30
---------------Inter-token Latency----------------
Mean ITL (ms):                           17.20
Median ITL (ms):                         17.00
P50 ITL (ms):                            17.00
P95 ITL (ms):                            19.00
P99 ITL (ms):                            21.50
==================================================
"""


def test_vllm_bench_output() -> None:
    figures = parse_vllm_bench_output(VLLM_OUTPUT)
    assert figures["Output token throughput (tok/s)"] == 225.05
    assert "Maximum request concurrency" in figures
    level = level_from_vllm_bench(4, figures, requests=16, power={"n": [(0.0, 100.0), (5.0, 100.0)]},
                                  window=(0.0, 5.0))
    assert (level.completed, level.output_tokens, level.seconds) == (16, 1024, 4.55)
    assert level.ttft.p95 == pytest.approx(0.0801)
    assert level.itl.p99 == pytest.approx(0.0215)
    # The tool ran 5 s (start-up included); the energy covers its measured last 4.55 s: 455 J.
    assert level.energy is not None and level.energy.joules_per_token == pytest.approx(455.0 / 1024)
    assert parse_vllm_bench_output("Traceback …\nValueError: no") == {}


def test_vllm_bench_argv_word_for_word() -> None:
    from sparktui.remote.bench_runner import vllm_bench_argv

    plan = BenchPlan(concurrency=(4,), input_len=128, output_len=64, requests=16, warmup=2)
    argv = vllm_bench_argv(["vllm"], base_url="http://127.0.0.1:8000", model="qwen", plan=plan,
                           concurrency=4, tokenizer="/models/qwen")
    assert argv == [
        "vllm", "bench", "serve", "--backend", "openai-chat", "--base-url", "http://127.0.0.1:8000",
        "--endpoint", "/v1/chat/completions", "--model", "qwen", "--dataset-name", "random",
        "--random-input-len", "128", "--random-output-len", "64", "--num-prompts", "16",
        "--max-concurrency", "4", "--ignore-eos", "--percentile-metrics", "ttft,tpot,itl",
        "--metric-percentiles", "50,95,99", "--disable-tqdm", "--num-warmups", "2",
        "--tokenizer", "/models/qwen",
    ]
    assert "--num-warmups" not in vllm_bench_argv(["vllm"], base_url="u", model="m", plan=plan,
                                                  concurrency=1, warmups=False)


def test_prompts_and_plan() -> None:
    plan = BenchPlan(input_len=5)
    assert plan.prompt(3).split()[0] == "r3" and len(plan.prompt(3).split()) == 5
    assert plan.prompt(1) != plan.prompt(2)
    assert plan.requests_for(1) == 8 and plan.requests_for(16) == 64
    assert read_prompt_file("a\n\nb\n") == ("a", "b")
    assert read_prompt_file('["x", "y"]') == ("x", "y")
    with pytest.raises(ValueError):
        read_prompt_file("\n\n")
    assert BenchPlan(prompts=("p",)).prompt(7) == "p"
