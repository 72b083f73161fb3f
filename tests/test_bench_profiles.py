"""Bench profiles, the fingerprint of what a sweep measured, the percentage of the decode ceiling, and
``--compare`` (pure)."""

from __future__ import annotations

from dataclasses import replace

from sparktui.domain.bench import BenchRecord, LevelResult, Quantiles, compare
from sparktui.domain.bench_fingerprint import Fingerprint, link_state
from sparktui.domain.bench_profiles import PROFILES, ceiling_percent, compare_records, depth_chart


def test_llama_benchy_is_the_communitys_profile_and_leaves_out_what_does_not_fit():
    p = PROFILES["llama-benchy"]
    # Spark Arena v2 (llama-benchy): pp 2048, tg 128, depths 0 … 100000, concurrency 1/2/5/10
    assert (p.input_len, p.output_len, p.concurrency) == (2048, 128, (1, 2, 5, 10))
    assert p.depths == (0, 4096, 8192, 16384, 32768, 65535, 100_000)
    plans, skipped = p.plans(32768)
    assert [d for d, _ in plans] == [0, 4096, 8192, 16384]
    assert [plan.input_len for _, plan in plans] == [2048, 6144, 10240, 18432]
    assert skipped[0] == "depth 32,768 left out: 34,944 tokens exceed --max-model-len 32,768"
    assert len(skipped) == 3
    assert plans[0][1].requests_for(5) == 5          # one round of c requests per level
    all_plans, none_skipped = p.plans(None)
    assert len(all_plans) == 7 and none_skipped == []
    short = PROFILES["short"]
    assert (short.input_len, short.output_len, short.concurrency) == (128, 64, (1, 4))


def _level(c: int, tok_s: float, itl_p50: float, depth: int = 0) -> LevelResult:
    return LevelResult(concurrency=c, requests=c, completed=c, failed=0, seconds=10.0,
                       output_tokens=int(tok_s * 10), input_tokens=0, itl=Quantiles(p50=itl_p50), depth=depth)


def _fp(**changes: object) -> Fingerprint:
    base = Fingerprint(model="Qwen/Qwen3.5-122B-A10B-FP8", image="vllm:26.03", image_id="sha256:" + "a" * 64,
                       vllm_version="0.19.2", flags=("--max-model-len", "32768"), nodes=("spark1", "spark2"),
                       tensor_parallel=2, pipeline_parallel=1, link="linktest 23.5 GB/s pass")
    return replace(base, **changes)  # type: ignore[arg-type]


def test_fingerprint_key_names_the_setup_not_the_link():
    fp = _fp()
    assert len(fp.key) == 12
    assert _fp(link="linktest 3.1 GB/s FAIL").key == fp.key
    assert _fp(image_id="sha256:" + "b" * 64).key != fp.key
    assert _fp(vllm_version="0.20.0").key != fp.key
    # with an image ID, a moved tag is the same setup
    assert _fp(image="vllm:latest").key == fp.key
    text = fp.describe()
    assert "vllm:26.03 (aaaaaaaaaaaa), vLLM 0.19.2, TP 2 × PP 1 over spark1, spark2" in text
    assert fp.to_json()["key"] == fp.key
    assert link_state([]) == "not measured (no linktest)"
    assert link_state([{"tool": "all_reduce_perf", "ok": True, "busbw_gbs": 23.5, "at": 1764849600.0}]) \
        == "linktest 23.5 GB/s pass (all_reduce_perf, 2025-12-04)"


def test_ceiling_percent_is_one_streams_decode_against_the_ceiling():
    # ITL median 40 ms → 25 tok/s for one stream; the ceiling 50 tok/s → 50 %
    assert ceiling_percent(_level(1, 24.0, 0.040), {"tok_s": 50.0}) == 50.0
    assert ceiling_percent(_level(1, 24.0, 0.040), None) is None
    assert ceiling_percent(_level(1, 24.0, 0.0), {"tok_s": 50.0}) is None


def _record(levels: tuple[LevelResult, ...], fp: Fingerprint, at: float) -> BenchRecord:
    return BenchRecord(started_at=at, model=fp.model, image=fp.image, levels=levels, input_len=2048,
                       output_len=128, client="builtin", profile="llama-benchy", fingerprint=fp.to_json(),
                       ceiling={"tok_s": 50.0})


def test_records_keep_depths_and_compare_level_by_level():
    a = _record((_level(1, 20.0, 0.05), _level(1, 15.0, 0.066, depth=4096)), _fp(), 1000.0)
    b = _record((_level(1, 18.0, 0.055), _level(1, 12.0, 0.08, depth=4096)),
                _fp(vllm_version="0.20.0", link="linktest 12.0 GB/s FAIL"), 2000.0)
    again = BenchRecord.from_json(b.to_json())
    assert again == b and again.level(1, 4096) is not None and again.level(1, 4096).depth == 4096
    assert [(c.depth, round(c.change_percent)) for c in compare(b, a)] == [(0, -10), (4096, -20)]
    lines = compare_records(a, b)
    assert "vllm_version: 0.19.2 → 0.20.0" in lines
    assert "link: linktest 23.5 GB/s pass → linktest 12.0 GB/s FAIL" in lines
    assert "c=1: 20.0 → 18.0 output tok/s (−10 %)" in lines
    assert "c=1, depth 4,096: 15.0 → 12.0 output tok/s (−20 %)" in lines
    chart = depth_chart(b)
    assert chart[0].startswith("depth       0 c=1   ██████████████████████████████    18.0 tok/s")
    assert chart[0].endswith("36 % of the ceiling per stream")       # 1 / 55 ms = 18.2 tok/s of 50
    assert chart[1].startswith("depth   4,096 c=1   ████████████████████")
    assert "25 % of the ceiling" in chart[1]


def test_the_baseline_is_the_newest_sweep_with_the_same_fingerprint():
    from sparktui.domain.bench_history import latest_with_fingerprint

    same_old = _record((_level(1, 20.0, 0.05),), _fp(), 1000.0)
    same_new = _record((_level(1, 21.0, 0.05),), _fp(link="linktest 12.0 GB/s FAIL"), 3000.0)
    other = _record((_level(1, 30.0, 0.03),), _fp(vllm_version="0.20.0"), 4000.0)
    empty = _record((replace(_level(1, 0.0, 0.0), completed=0),), _fp(), 5000.0)
    records = [same_old, same_new, other, empty]
    assert latest_with_fingerprint(records, _fp().key) is same_new
    assert latest_with_fingerprint(records, _fp().key, profile="short") is None
    assert latest_with_fingerprint(records, "000000000000") is None


def test_the_exporter_keeps_one_series_per_concurrency_for_a_profile():
    """A depth sweep's deeper levels would repeat the same (concurrency) label set: only depth 0 goes out."""
    from sparktui.remote.exporter import SparkCollector

    record = _record((_level(1, 20.0, 0.05), _level(1, 15.0, 0.066, depth=4096)), _fp(), 1000.0)
    series: list[tuple[str, tuple[str, ...], float | None]] = []
    SparkCollector.bench_series(record,
                                lambda name, labels, value: series.append((name, tuple(labels), value)))
    rates = [(labels, value) for name, labels, value in series
             if name == "sparktui_bench_output_tokens_per_second"]
    assert rates == [(("1",), 20.0)]
