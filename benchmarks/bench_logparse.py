"""Log parsing throughput: a 1,000,000-line vLLM log through splitter + line layer + stage machine.

The log is built from the real logs in tests/data/vllm-logs: one multi-node Ray startup (02, V0 0.8.3
with CUDA-graph bars) followed by serving-time lines: V1 and V0 stats lines, uvicorn access-log lines
and an NCCL INFO flood, repeated until the log holds --lines lines.

Measured, on one core, in the same run:

* fast    — ``LineSplitter.feed_block`` + ``Timeline.feed_text``: lines that contain none of the
            keywords that can still matter are skipped by a C-level scan of whole 32 K pieces (before
            "ready" one regex over a trie of every keyword, after it ``str.find`` per serving anchor);
            only the rest go through ``parse_line`` and the rules (after "ready" only a few fatal
            keywords count), a bar's repeated updates cut to the last.
* records — ``LineSplitter.feed`` (a list of records) + ``Timeline.feed_lines`` (same fast path).
* live    — ``LogReader.feed`` (every record through ``parse_line``) + ``Timeline.feed`` per record:
            what a dashboard following a log does; shown for reference.
* naive   — every record through ``parse_line``, then every rule's regex (stage rules and failure
            signatures) tried on every message; matches drive the same stage machine. Run on the first
            --naive-lines lines (same mix: the startup then serving) because it is slow.

``--mix dense`` (issue 12) is start-up and failure content only, the lines a parser cannot skip cheaply:
the real start-ups 01, 02, 05a, 06a, 09, 12, 04 and 10 back to back (config dumps of 2-5 KB, logger.exception
tracebacks with a header on every line, NCCL INFO, shard and CUDA-graph bars, Ray-relayed copies), repeated;
each repeat is a new start for the stage machine.

The scan and the rules run on RE2 (google-re2) where it is installed; ``--mix dense`` also runs the fast
path on Python's ``re`` alone (``SPARKTUI_REGEX=re``, a second process: the engine is chosen at import),
the fallback where RE2 has no wheel.

Times are best-of-N wall seconds and, beside them, CPU seconds of this process (``time.process_time``):
on a shared machine the CPU figure is the one to compare.

Run: ``taskset -c 0 .venv/bin/python benchmarks/bench_logparse.py [--mix dense]`` (one core).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from sparktui.domain.logs import LineSplitter, LogReader, Timeline, parse_line
from sparktui.domain.logs.failures import SIGNATURES
from sparktui.domain.logs.keywords import ENGINES
from sparktui.domain.logs.rules import RULES

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "vllm-logs"
CHUNK = 256 * 1024


def _lines(prefix: str) -> list[bytes]:
    path = next(DATA.glob(prefix + "*"))
    return path.read_bytes().splitlines(keepends=True)


def build_log(total_lines: int) -> tuple[bytes, int]:
    startup = _lines("02_")
    # Serving-time material, all real lines: stats (V1 from 10, V0 from 01), access log, NCCL INFO.
    serving: list[bytes] = []
    for prefix, keep in (("10_", (b"Avg prompt throughput", b'HTTP/1.1" ')),
                         ("01_", (b"Avg prompt throughput", b"Prefix cache hit rate", b"NCCL INFO",
                                  b'HTTP/1.1" '))):
        serving += [ln for ln in _lines(prefix) if any(k in ln for k in keep)]
    serving = [ln if ln.endswith(b"\n") else ln + b"\n" for ln in serving]
    out = list(startup)
    i = 0
    while len(out) < total_lines:
        out.append(serving[i % len(serving)])
        i += 1
    return b"".join(out[:total_lines]), len(startup)


DENSE_PARTS = ("01_", "02_", "05a_", "06a_", "09_", "12_", "04_", "10_")


def build_dense(total_lines: int) -> tuple[bytes, int]:
    unit = b"".join(b"".join(_lines(prefix)).rstrip(b"\n") + b"\n" for prefix in DENSE_PARTS)
    per = unit.count(b"\n")
    data = unit * (total_lines // per + 1)
    cut = 0
    for _ in range(total_lines):
        cut = data.index(b"\n", cut) + 1
    return data[:cut], per


def run_fast(data: bytes) -> Timeline:
    splitter, timeline = LineSplitter(), Timeline()
    for i in range(0, len(data), CHUNK):
        timeline.feed_bytes(splitter.feed_raw(data[i : i + CHUNK]))
    timeline.feed_lines(splitter.flush())
    return timeline


def run_records(data: bytes) -> Timeline:
    splitter, timeline = LineSplitter(), Timeline()
    for i in range(0, len(data), CHUNK):
        timeline.feed_lines(splitter.feed(data[i : i + CHUNK]))
    timeline.feed_lines(splitter.flush())
    return timeline


def run_live(data: bytes) -> Timeline:
    reader, timeline = LogReader(), Timeline()
    for i in range(0, len(data), CHUNK):
        for rec in reader.feed(data[i : i + CHUNK]):
            timeline.feed(rec)
    for rec in reader.flush():
        timeline.feed(rec)
    return timeline


_NAIVE_PATTERNS: list[re.Pattern[str]] = [r.pattern or re.compile(re.escape(r.keyword)) for r in RULES] + [
    s.pattern or re.compile(re.escape(s.keyword)) for s in SIGNATURES
]


def run_naive(data: bytes) -> Timeline:
    splitter, timeline = LineSplitter(), Timeline()
    patterns = _NAIVE_PATTERNS
    for i in range(0, len(data), CHUNK):
        for text in splitter.feed(data[i : i + CHUNK]):
            rec = parse_line(text)
            matched = False
            for pattern in patterns:
                if pattern.search(rec.message):
                    matched = True
            if matched or rec.is_progress or rec.level == "ERROR":
                timeline._apply(rec)  # the same stage machine, reached without the keyword pre-dispatch
    return timeline


CPU: dict[str, float] = {}


def _time(fn: Callable[[bytes], Timeline], data: bytes, repeat: int) -> tuple[float, Timeline]:
    best, best_cpu, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        result = fn(data)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    assert result is not None
    CPU[fn.__name__] = best_cpu
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--naive-lines", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--mix", choices=("serving", "dense"), default="serving",
                        help="serving: a start-up then a serving flood; dense: start-ups and failures only")
    parser.add_argument("--fast-only", action="store_true", help="only the fast path (its CPU lines/s)")
    args = parser.parse_args()
    if args.fast_only:
        data = build_dense(args.lines)[0] if args.mix == "dense" else build_log(args.lines)[0]
        _time(run_fast, data, args.repeat)
        print(round(data.count(b"\n") / CPU["run_fast"]))
        return

    if args.mix == "dense":
        data, unit = build_dense(args.lines)
        n = data.count(b"\n")
        sizes = sorted(len(ln) for ln in data[: data.index(b"\n", 10**6)].splitlines())
        print(f"log: {n:,} lines, {len(data) / 1e6:.1f} MB, dense: start-ups of {', '.join(DENSE_PARTS)} "
              f"({unit:,} lines) repeated; line bytes median {sizes[len(sizes) // 2]}, "
              f"p90 {sizes[len(sizes) * 9 // 10]}, max {sizes[-1]:,}")
    else:
        data, startup_lines = build_log(args.lines)
        n = data.count(b"\n")
        print(f"log: {n:,} lines, {len(data) / 1e6:.1f} MB "
              f"({startup_lines:,} startup lines from 02, then serving)")

    print(f"engine: {ENGINES[0]}")
    results: dict[str, float] = {}
    for name, fn in (("fast", run_fast), ("records", run_records), ("live", run_live)):
        secs, tl = _time(fn, data, args.repeat if name != "live" else 1)
        results[name] = n / secs
        snap = tl.snapshot()
        cpu = CPU[fn.__name__]
        print(f"{name:8s} {n / secs:>12,.0f} lines/s  ({secs:.3f} s; CPU {cpu:.3f} s = "
              f"{n / cpu:,.0f} lines/CPU-s)  outcome={snap.outcome}")

    if args.mix == "dense" and ENGINES[0] == "re2":
        argv = [sys.executable, __file__, "--mix", "dense", "--lines", str(args.lines), "--repeat",
                str(args.repeat), "--fast-only"]
        fallback = subprocess.run(argv, env={**os.environ, "SPARKTUI_REGEX": "re"}, capture_output=True,
                                  text=True, check=True)
        print(f"{'fast, re':8s} {int(fallback.stdout.split()[-1]):>12,} lines/CPU-s  (Python's re alone, "
              "no RE2: the fallback)")

    naive_data = b"".join(data.splitlines(keepends=True)[: args.naive_lines])
    nn = naive_data.count(b"\n")
    secs, tl = _time(run_naive, naive_data, 1)
    results["naive"] = nn / secs
    cpu = CPU["run_naive"]
    print(f"{'naive':8s} {nn / secs:>12,.0f} lines/s  ({secs:.3f} s; CPU {cpu:.3f} s = "
          f"{nn / cpu:,.0f} lines/CPU-s; on the first {nn:,} lines)  outcome={tl.snapshot().outcome}")
    # Sanity: the fast path and the naive way read the same timeline from the same prefix of the log
    # (the node list may differ: the naive way also parses serving-time lines the fast path skips).
    fast_prefix, naive_result = run_fast(naive_data).to_json(), tl.to_json()
    for key in ("outcome", "vllm_version", "model", "stages", "failure"):
        assert fast_prefix[key] == naive_result[key], f"fast and naive disagree on {key}"
    fast_cpu, naive_cpu = n / CPU["run_fast"], nn / CPU["run_naive"]
    print(f"CPU ratio fast/naive: {fast_cpu / naive_cpu:.1f}x")
    print(f"ratio fast/naive: {results['fast'] / results['naive']:.1f}x   "
          f"records/naive: {results['records'] / results['naive']:.1f}x   "
          f"live/naive: {results['live'] / results['naive']:.1f}x")


if __name__ == "__main__":
    main()
