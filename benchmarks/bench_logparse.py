"""Log parsing throughput: a 1,000,000-line vLLM log through splitter + line layer + stage machine.

The log is built from the real logs in tests/data/vllm-logs: one multi-node Ray startup (02, V0 0.8.3
with CUDA-graph bars) followed by serving-time lines: V1 and V0 stats lines, uvicorn access-log lines
and an NCCL INFO flood, repeated until the log holds --lines lines.

Measured, on one core, in the same run:

* fast    — ``LineSplitter.feed_block`` + ``Timeline.feed_text``: lines that contain none of the
            keywords that can still matter are skipped with ``str.find`` over whole blocks; only the
            rest go through ``parse_line`` and the rules (after "ready" only a few fatal keywords count).
* records — ``LineSplitter.feed`` (a list of records) + ``Timeline.feed_lines`` (same fast path).
* live    — ``LogReader.feed`` (every record through ``parse_line``) + ``Timeline.feed`` per record:
            what a dashboard following a log does; shown for reference.
* naive   — every record through ``parse_line``, then every rule's regex (stage rules and failure
            signatures) tried on every message; matches drive the same stage machine. Run on the first
            --naive-lines lines (same mix: the startup then serving) because it is slow.

Run: ``.venv/bin/python benchmarks/bench_logparse.py`` (add ``taskset -c 0`` to pin one core).
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable
from pathlib import Path

from sparktui.domain.logs import LineSplitter, LogReader, Timeline, parse_line
from sparktui.domain.logs.failures import SIGNATURES
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


def run_fast(data: bytes) -> Timeline:
    splitter, timeline = LineSplitter(), Timeline()
    for i in range(0, len(data), CHUNK):
        timeline.feed_text(splitter.feed_block(data[i : i + CHUNK]))
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


def _time(fn: Callable[[bytes], Timeline], data: bytes, repeat: int) -> tuple[float, Timeline]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn(data)
        best = min(best, time.perf_counter() - t0)
    assert result is not None
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--naive-lines", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    data, startup_lines = build_log(args.lines)
    n = data.count(b"\n")
    print(f"log: {n:,} lines, {len(data) / 1e6:.1f} MB "
          f"({startup_lines:,} startup lines from 02, then serving)")

    results: dict[str, float] = {}
    for name, fn in (("fast", run_fast), ("records", run_records), ("live", run_live)):
        secs, tl = _time(fn, data, args.repeat if name != "live" else 1)
        results[name] = n / secs
        snap = tl.snapshot()
        print(f"{name:8s} {n / secs:>12,.0f} lines/s  ({secs:.3f} s)  outcome={snap.outcome}")

    naive_data = b"".join(data.splitlines(keepends=True)[: args.naive_lines])
    nn = naive_data.count(b"\n")
    secs, tl = _time(run_naive, naive_data, 1)
    results["naive"] = nn / secs
    print(f"{'naive':8s} {nn / secs:>12,.0f} lines/s  ({secs:.3f} s on the first {nn:,} lines)  "
          f"outcome={tl.snapshot().outcome}")
    # Sanity: the fast path and the naive way read the same timeline from the same prefix of the log
    # (the node list may differ: the naive way also parses serving-time lines the fast path skips).
    fast_prefix, naive_result = run_fast(naive_data).to_json(), tl.to_json()
    for key in ("outcome", "vllm_version", "model", "stages", "failure"):
        assert fast_prefix[key] == naive_result[key], f"fast and naive disagree on {key}"
    print(f"ratio fast/naive: {results['fast'] / results['naive']:.1f}x   "
          f"records/naive: {results['records'] / results['naive']:.1f}x   "
          f"live/naive: {results['live'] / results['naive']:.1f}x")


if __name__ == "__main__":
    main()
