"""Why a start was slow, from real vLLM logs (tests/public_logs, tests/data/vllm-logs: sources in their
SOURCES.md / INDEX.md) and vLLM's own help text (tests/fixtures/vllm_help)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.domain.history import RunRecord
from sparktui.domain.logs.timeline import timeline_from_bytes
from sparktui.domain.perf.start_explain import (
    ASSUMED_DISK_GIB_S,
    LoadOptions,
    StartContext,
    expected_load_seconds,
    expected_stage_seconds,
    explain_snapshot,
    explain_start,
)
from sparktui.domain.upgrade.serve_help import parse_serve_help

TESTS = Path(__file__).parent
PUBLIC = TESTS / "public_logs"
SHARED = TESTS / "data" / "vllm-logs"
HELP_022 = TESTS / "fixtures" / "vllm_help" / "vllm-0.22-serve-help-loadconfig.txt"
HELP_08 = TESTS / "fixtures" / "vllm_help" / "vllm-0.8-serve-help.txt"


def snap(path: Path):  # type: ignore[no-untyped-def]
    return timeline_from_bytes(path.read_bytes())


def one(name: str, stage: str, context: StartContext | None = None):  # type: ignore[no-untyped-def]
    path = next(d / name for d in (PUBLIC, SHARED) if (d / name).exists())
    found = [f for f in explain_snapshot(snap(path), context).findings if f.stage == stage]
    assert len(found) == 1, found
    return found[0]


# Spark logs that loaded through mmap (0.13-0.30 GiB/s) and loads elsewhere at disk speed (1.4-7 GiB/s).
SLOW_LOADS = ["01-dgx-spark-laguna-nvfp4-dflash-sigterm-stop.log", "05-dgx-spark-gemma4-nvfp4-stop.log",
              "14-dgx-spark-gemma31b-inductor-driver-not-permitted.log",
              "18-dgx-spark-gemma26-dflash-ready.log",
              "34-dgx-spark-qwen3.6-35b-nvfp4-mtp-stop.log",
              "10_dgx-spark-gb10-qwen3.6-35b-a3b-bf16-90min-download-ready-metrics-no-uvicorn-startup-lines"
              "_v0.19.2rc1dev.txt"]
FAST_LOADS = ["13-deepseek-r1-14b-v0.8.5-ready.log", "21-v0.11.0-ready-shutdown.log", "36-v0.11.2-ready.log",
              "24-dgx-spark-ngc-26.01-gpt-oss-20b-stop.log",
              "22-slurm-qwen3vl-v0.12-cancelled-time-limit.log"]


@pytest.mark.parametrize("name", SLOW_LOADS)
def test_a_slow_load_names_the_rate_and_the_fast_path(name: str) -> None:
    f = one(name, "weights")
    rate = f.figures["read_gib_s"]
    assert 0.1 < rate < 0.35
    assert f.slow and f"weights read at {rate:.2f} GiB/s" in f.what
    assert f"a disk gives {ASSUMED_DISK_GIB_S:.1f} GiB/s or more (not measured here)" in f.what
    assert f.fix == "--safetensors-load-strategy eager or --load-format fastsafetensors"
    assert "8 min 41 s through mmap" in f.because


@pytest.mark.parametrize("name", FAST_LOADS)
def test_a_fast_load_names_no_fix(name: str) -> None:
    f = one(name, "weights")
    assert f.figures["read_gib_s"] > 1.4
    assert not f.slow and f.fix is None


def test_the_laguna_figures_and_the_one_line_summary() -> None:
    # 95.63 GiB per GPU, "Loading weights took 570.62 seconds": 0.168 GiB/s.
    explanation = explain_snapshot(snap(PUBLIC / "01-dgx-spark-laguna-nvfp4-dflash-sigterm-stop.log"))
    f = explanation.slowest
    assert f is not None and f.stage == "weights"
    assert f.figures["gib"] == 95.63 and f.figures["read_gib_s"] == pytest.approx(0.168, abs=0.001)
    assert f.seconds == pytest.approx(570.62)
    # The image's help unknown (a log alone): the remedy in words, not a flag it may reject.
    assert explanation.short() == "slow: weights 9m31s at 0.17 GiB/s (~1m36s) → eager or fastsafetensors load"
    options = StartContext(options=LoadOptions(eager_strategy=True))
    log = PUBLIC / "01-dgx-spark-laguna-nvfp4-dflash-sigterm-stop.log"
    line = explain_snapshot(snap(log), options).short()
    assert line == "slow: weights 9m31s at 0.17 GiB/s (~1m36s) → --safetensors-load-strategy eager"
    assert len(explanation.short()) <= 80


def test_only_what_the_image_accepts_is_named() -> None:
    name = "05-dgx-spark-gemma4-nvfp4-stop.log"
    v022 = LoadOptions.from_help(parse_serve_help(HELP_022.read_text()))
    assert v022 == LoadOptions(eager_strategy=True, fast_formats=("instanttensor",))
    f = one(name, "weights", StartContext(options=v022))
    assert f.fix == "--safetensors-load-strategy eager or --load-format instanttensor"
    assert "this vLLM accepts --safetensors-load-strategy eager, --load-format instanttensor" in f.because
    # vLLM 0.8's help has neither: no option named, the reason says a newer image has them.
    v08 = LoadOptions.from_help(parse_serve_help(HELP_08.read_text()))
    f = one(name, "weights", StartContext(options=v08))
    assert f.slow and f.fix is None and "a newer image has them" in f.because


def test_a_measured_disk_makes_a_middling_read_slow() -> None:
    # H200, TP 2 on one node: 2 × 74.28 GiB in 215.47 s = 0.69 GiB/s: above the floor, the disk unknown.
    name = "12_single-node-tp2-h200-qwen3-next-80b-a3b-ready_v0.10.2.txt"
    f = one(name, "weights")
    assert f.figures["read_gib_s"] == pytest.approx(0.689, abs=0.001) and not f.slow
    f = one(name, "weights", StartContext(disk_gib_s={"head": 2.1}))
    assert f.slow and "where the disk gives 2.10 GiB/s (measured)" in f.what
    assert f.expected == pytest.approx(148.56 / 2.1, rel=0.01)


def test_an_eager_load_that_is_still_slow_blames_the_disk() -> None:
    facts = {"weights_gib": 60.0, "weights_load_seconds": 400.0, "safetensors_load_strategy": "eager"}
    f = explain_start(facts).findings[0]
    assert f.slow and f.fix == "measure the disk: sparktui model --read-test"


def test_each_node_of_a_multi_node_log_is_judged_on_its_own() -> None:
    # TP 8 × PP 2 on two nodes: 8 GPUs each; the worker read its 8 × 28.48 GiB in 37.8 s.
    found = explain_snapshot(snap(SHARED / "01_multinode-ray-tp8pp2-deepseek-v2.5-k8s-lws-ready_v0.8.3.txt"))
    weights = {f.node: f for f in found.findings if f.stage == "weights"}
    assert set(weights) == {"head", "10.244.1.228"}
    assert "(8 GPUs × 28.5)" in weights["10.244.1.228"].what
    assert not any(f.slow for f in weights.values())


def test_a_slow_worker_is_named_with_its_node() -> None:
    node_facts = {"head": {"weights_gib": 30.0, "weights_load_seconds": 20.0},
                  "10.0.0.2": {"weights_gib": 30.0, "weights_load_seconds": 300.0}}
    facts = {"weights_gib": 30.0, "weights_load_seconds": 300.0, "nodes_seen": 2, "tensor_parallel_size": 2}
    explanation = explain_start(facts, node_facts)
    slowest = explanation.slowest
    assert slowest is not None and slowest.node == "10.0.0.2"
    assert explanation.short().startswith("slow: weights on 10.0.0.2 5m00s at 0.10 GiB/s")


def test_compile_cache_hit() -> None:
    f = one("21-v0.11.0-ready-shutdown.log", "compile")
    assert f.figures["cache"] == "hit" and not f.slow and f.fix is None
    assert f.what == "torch.compile 4.8s: cache hit"


def test_compile_cache_miss_and_why() -> None:
    name = "32-v0.19.2rc1-ready.log"   # 67.71 s, no "Directly load the compiled graph"
    f = one(name, "compile")
    assert f.figures["cache"] == "miss" and f.slow
    assert "the log alone cannot tell which" in f.what
    f = one(name, "compile", StartContext(cache_mounted=False))
    assert "not kept on the node" in f.what
    assert f.fix == "mount the node's ~/.cache/vllm at /root/.cache/vllm (engine.cache_mounts)"
    f = one(name, "compile", StartContext(cache_mounted=True))
    assert "the first start of this model here" in f.what
    earlier = [RunRecord(started_at=1.0, model="m", image="img", outcome="ready", vllm_version="0.19.1")]
    f = one(name, "compile", StartContext(cache_mounted=True, earlier=earlier, image="img"))
    assert "vLLM changed since the last start (0.19.1 → 0.19.2rc1)" in f.what
    earlier = [RunRecord(started_at=1.0, model="m", image="old", outcome="ready", vllm_version="0.19.2rc1")]
    f = one(name, "compile", StartContext(cache_mounted=True, earlier=earlier, image="new"))
    assert "the image changed since the last start (old → new)" in f.what


def test_a_usual_first_compile_is_not_slow() -> None:
    f = one("18-dgx-spark-gemma26-dflash-ready.log", "compile")   # 32.6 s, a miss
    assert f.figures["cache"] == "miss" and not f.slow


def test_capture_seconds_against_the_sizes() -> None:
    # V0 through Ray: 34 s for 35 sizes (up to 256), ~1 s each: twice what a size costs elsewhere.
    name = "02_multinode-ray-tp4pp2-llama3.3-70b-cudagraphs-ready_v0.8.3.txt"
    f = one(name, "cuda_graphs")
    assert f.figures == {"sizes": 35, "max_size": 256, "seconds_per_size": pytest.approx(0.971, abs=0.001)}
    assert f.slow and f.fix == "--max-cudagraph-capture-size 64"
    assert "35 sizes (up to batch 256)" in f.what
    # The image's own flag, or none when it has none.
    f = one(name, "cuda_graphs", StartContext(options=LoadOptions(capture_flag="--cuda-graph-sizes")))
    assert f.fix == "--cuda-graph-sizes 64"
    none = one(name, "cuda_graphs", StartContext(options=LoadOptions()))
    assert none.fix is None
    assert "has neither --max-cudagraph-capture-size nor --cuda-graph-sizes" in none.because


def test_a_quick_capture_is_fine() -> None:
    f = one("21-v0.11.0-ready-shutdown.log", "cuda_graphs")   # 5 s for 67 sizes
    assert not f.slow and f.fix is None and f.figures["sizes"] == 67


@pytest.mark.parametrize("name", FAST_LOADS)
def test_a_quick_start_has_no_summary_line(name: str) -> None:
    assert explain_snapshot(snap(PUBLIC / name)).short() == ""


def test_expectations_for_plan() -> None:
    assert expected_load_seconds(100.0, 2.0) == 50.0
    assert expected_load_seconds(100.0, None) == 100.0 / ASSUMED_DISK_GIB_S
    assert expected_stage_seconds("weights", gib_per_node=10.0, disk_gib_s=5.0) == 2.0
    assert expected_stage_seconds("compile", compile_cache_hit=True) == 20.0
    assert expected_stage_seconds("cuda_graphs", capture_sizes=51) == 25.5
    assert expected_stage_seconds("api") is None


def test_json_shape() -> None:
    data = explain_snapshot(snap(PUBLIC / "05-dgx-spark-gemma4-nvfp4-stop.log")).to_json()
    assert data["slowest"]["stage"] == "weights"
    assert {f["stage"] for f in data["findings"]} == {"weights", "compile", "cuda_graphs"}
    assert set(data["slowest"]) == {"stage", "node", "seconds", "expected_seconds", "slow", "what", "fix",
                                    "because", "figures"}
