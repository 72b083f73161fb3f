"""`sparktui upgrade`'s decision (pure): promote only a ready, answering, as-fast image with no new
warning."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pydantic import ValidationError

from sparktui.config import SparkConfig, UpgradeConfig, parse_config
from sparktui.domain.bench import BenchRecord, LevelResult, Quantiles
from sparktui.domain.logs.nccl import SOCKET_WARNING
from sparktui.domain.upgrade.verdict import (
    Baseline,
    Candidate,
    Decision,
    FailedCheck,
    baseline_from_history,
    decide,
    warning_classes,
)


def bench(rates: dict[int, float], *, image: str = "img", started: float = 100.0, ttft: float = 0.05,
          model: str = "m", output_len: int = 64) -> BenchRecord:
    """A sweep whose level c generated ``rate`` tok/s over 10 s."""
    levels = tuple(LevelResult(concurrency=c, requests=8, completed=8, failed=0, seconds=10.0,
                               output_tokens=round(rate * 10), input_tokens=800,
                               ttft=Quantiles(p50=ttft, count=8)) for c, rate in rates.items())
    return BenchRecord(started_at=started, model=model, image=image, levels=levels, input_len=128,
                       output_len=output_len, client="builtin")


OLD = Baseline(bench({1: 20.0, 4: 40.0}, image="old"))


def good(**kw: object) -> Candidate:
    base: dict[str, object] = {"ready": True, "smoke_ok": True,
                               "bench": bench({1: 20.0, 4: 39.0}, image="new", started=200.0)}
    base.update(kw)
    return Candidate(**base)  # type: ignore[arg-type]


def test_promote_when_ready_answering_and_as_fast() -> None:
    v = decide(good(), OLD, 0.95)
    assert v.decision is Decision.PROMOTE and v.promote and v.failed is None
    assert v.reason == ("ready, smoke test answered, output tok/s 98 % of the old image's at c=4 (at least "
                        "95 % required), no new warning")
    assert [(f.concurrency, f.baseline_tok_s, f.candidate_tok_s) for f in v.figures] == [(1, 20.0, 20.0),
                                                                                         (4, 40.0, 39.0)]


def test_not_ready_names_the_stage_and_diagnosis() -> None:
    v = decide(Candidate(ready=False, failed_stage="weights", diagnosis="out of memory on spark2"), OLD)
    assert v.decision is Decision.ROLL_BACK and v.failed is FailedCheck.START
    assert v.reason == "the new image did not reach ready (failed in weights): out of memory on spark2"
    assert decide(Candidate(ready=False), OLD).reason == "the new image did not reach ready (failed)"


def test_smoke_that_does_not_answer() -> None:
    v = decide(good(smoke_ok=False, smoke_detail="HTTP 500"), OLD)
    assert v.failed is FailedCheck.SMOKE and v.reason == "the new image's smoke test did not answer: HTTP 500"


def test_slower_image_rolls_back_with_both_figures() -> None:
    v = decide(good(bench=bench({1: 20.0, 4: 30.0}, image="new", started=200.0, ttft=0.08)), OLD, 0.95)
    assert v.decision is Decision.ROLL_BACK and v.failed is FailedCheck.SPEED
    assert v.reason == ("the new image is slower: 30.0 output tok/s at c=4 vs 40.0 before (75 %, below the "
                        "95 % required)")
    assert v.table() == [
        "   c   old tok/s   new tok/s  new/old   old TTFT   new TTFT",
        "   1        20.0        20.0     100%      50 ms      80 ms",
        "   4        40.0        30.0      75%      50 ms      80 ms",
    ]
    assert v.to_json()["figures"][1]["ratio"] == pytest.approx(0.75)


def test_threshold_is_configurable() -> None:
    slower = good(bench=bench({1: 20.0, 4: 30.0}, image="new", started=200.0))
    assert decide(slower, OLD, 0.7).promote
    assert not decide(good(), OLD, 1.0).promote   # 39 < 40 at c=4


def test_new_warning_class_rolls_back() -> None:
    sockets = warning_classes({"nccl_verdict_level": "warning",
                               "nccl_verdict": SOCKET_WARNING + " on spark2"})
    assert sockets == {"nccl_sockets"}
    v = decide(good(warnings=sockets), OLD)
    assert v.failed is FailedCheck.WARNINGS and v.new_warnings == ("nccl_sockets",)
    assert v.reason == "the new image's start shows a new warning: NCCL over TCP sockets instead of RoCE"
    # the same warning under the old image too is no reason
    assert decide(good(warnings=sockets), Baseline(OLD.bench, sockets)).promote


def test_warning_classes_from_the_timeline_facts() -> None:
    assert warning_classes({}) == frozenset()
    assert warning_classes({"nccl_verdict_level": "ok", "nccl_verdict": "NCCL over RoCE, both HCAs"}) == set()
    one = {"nccl_verdict_level": "warning", "nccl_verdict": "NCCL over RoCE on one HCA only on spark1 (x)"}
    assert warning_classes(one) == {"nccl_one_hca"}


def test_benchmarks_that_cannot_be_compared() -> None:
    assert decide(good(bench=None), OLD).failed is FailedCheck.BENCH
    assert decide(good(), Baseline(None)).reason == "no benchmark of the old image to compare with"
    other = decide(good(bench=bench({1: 20.0}, model="other", started=200.0)), OLD)
    assert other.reason == "cannot compare the speed: the benchmarks differ in model (m vs other)"
    disjoint = decide(good(bench=bench({16: 50.0}, image="new", started=200.0)), OLD)
    assert disjoint.reason == "the two benchmarks share no concurrency level with a rate"
    failed_level = LevelResult(1, 8, 0, 8, 10.0, 0, 0)
    dead = good(bench=BenchRecord(200.0, "m", "new", (failed_level,), 128, 64, "builtin"))
    assert decide(dead, OLD).reason == "the new image's benchmark answered no request"


def test_upgrade_config_section() -> None:
    cfg: SparkConfig = parse_config({"nodes": [{"name": "a", "host": "a", "role": "head"}],
                                     "engine": {"model": "m", "tensor_parallel_size": 1},
                                     "upgrade": {"min_speed_ratio": 0.9}})
    assert cfg.upgrade.min_speed_ratio == 0.9
    assert UpgradeConfig().min_speed_ratio == 0.95
    for bad in (0, -1, 3, "fast"):
        with pytest.raises(ValidationError):
            UpgradeConfig.model_validate({"min_speed_ratio": bad})
    with pytest.raises(ValidationError):
        UpgradeConfig.model_validate({"min_speed": 0.9})


def test_baseline_from_the_bench_history() -> None:
    old = bench({1: 20.0}, image="old", started=10.0)
    newer = bench({1: 21.0}, image="old", started=20.0)
    records = [old, newer, bench({1: 30.0}, image="other", started=30.0),
               replace(bench({1: 22.0}, image="old", started=40.0), flags=("--enforce-eager",)),
               replace(bench({1: 23.0}, image="old", started=50.0), interrupted=True),
               bench({1: 24.0}, image="old", started=60.0, output_len=256)]
    assert baseline_from_history(records, image="old", model="m", flags=()) is records[-1]
    like = bench({1: 1.0}, image="new", started=99.0)
    assert baseline_from_history(records, image="old", model="m", flags=(), like=like) is newer
    assert baseline_from_history(records, image="old", model="m", flags=("--enforce-eager",)) is records[3]
    assert baseline_from_history(records, image="gone", model="m", flags=()) is None
