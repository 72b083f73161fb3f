"""Cost of one /metrics scrape turned into a ServingSnapshot (parse + name map + window math).

The dashboard does this once per poll (default every 2 s) next to a serving model, so it must stay far
below a millisecond budget per second of one core. Compared in the same run with the naive way: a
regular expression over the lines that only picks out the few series we show (fast, but blind to
escaping, renamed families and label sets — the reason the real path uses prometheus_client's parser).

    .venv/bin/python benchmarks/serving_scrape.py
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from sparktui.domain.serving import ServingTracker, sample_from_text

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "metrics"
SCRAPE = (FIXTURES / "vllm-0.33.0.txt").read_text()
NAIVE = re.compile(r"^(vllm:(?:num_requests_running|num_requests_waiting|kv_cache_usage_perc|"
                   r"generation_tokens_total|prompt_tokens_total))\{[^}]*\} (\S+)$", re.M)


def real(n: int) -> float:
    tracker = ServingTracker()
    t0 = time.perf_counter()
    for i in range(n):
        tracker.update(sample_from_text(SCRAPE), at=float(i))
    return (time.perf_counter() - t0) / n


def naive(n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        values: dict[str, float] = {}
        for name, value in NAIVE.findall(SCRAPE):
            values[name] = values.get(name, 0.0) + float(value)
    return (time.perf_counter() - t0) / n


def main() -> None:
    n = 300
    real(20)
    naive(20)
    r, v = real(n), naive(n)
    lines = SCRAPE.count("\n")
    print(f"scrape: {lines} lines, {len(SCRAPE) / 1024:.0f} KiB (vLLM 0.33.0 default metric set)")
    print(f"prometheus_client parse + resolve + tracker: {r * 1e3:.2f} ms per scrape "
          f"({r / 2.0 * 100:.3f} % of one core at one scrape per 2 s)")
    print(f"naive regex (5 series only):               {v * 1e3:.3f} ms per scrape")
    print(f"ratio real/naive: {r / v:.1f}x")


if __name__ == "__main__":
    main()
