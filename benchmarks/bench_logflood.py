"""Log flood: 100,000 real vLLM log lines per second for 10 s into the running dashboard (headless).

Measures, while the flood runs:
- key-press-to-screen latency: a key event is injected ~10 times a second; the time until the frame that
  shows its effect has been rendered to terminal output (the app's ``_display`` renders the compositor update
  to a string, as it would for a real terminal) — p50, p99, max;
- memory growth: the process's RSS peak during the flood minus before it;
- lines delivered per second (the producer runs in the app's event loop and falls behind if the loop is
  starved). The lines are real recorded vLLM output, parsed by the real ``LogReader`` beforehand (``--parse``
  parses them in the loop as the SSH log follower does; the parser has its own benchmark).

The same measurement runs twice, each in its own process: the dashboard as built (records queued, one
``Log.write_lines`` per 15 Hz flush) and the naive way (one ``Log.write`` per line as it arrives), and the
ratios are printed. Goals: p99 ≤ 100 ms, memory growth ≤ 100 MB.

    .venv/bin/python benchmarks/bench_logflood.py [--rate 100000] [--seconds 10] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any, ClassVar

import psutil
from baselines import NaiveLogApp  # a sibling: benchmarks/ is on sys.path when run
from rich.text import Text
from textual import events
from textual._compositor import CompositorUpdate
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widget import Widget

from sparktui.config import UIConfig
from sparktui.domain.events import EventSink, EventStream, LogRecords
from sparktui.domain.logs import LogIngest, LogReader
from sparktui.sim.recording import list_recordings, recording_text
from sparktui.ui.app import SparkApp
from sparktui.ui.event_drain import FLUSH_HZ
from sparktui.ui.widgets.log_pane import LogPane

PROBE_KEY = "f12"


class IdleBackend:
    """Nothing but the flood: the benchmark feeds the app's sink itself."""

    node_names: Sequence[str] = ("spark1", "spark2")
    readonly = True

    async def run(self, sink: EventSink) -> None:
        await asyncio.Event().wait()

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def restart(self) -> None: ...

    async def smoke_test(self) -> str:
        return ""

    def select_log(self, source: str) -> None: ...

    log_source = "vllm"
    events = EventStream()


class Probe(Widget):
    DEFAULT_CSS = "Probe { dock: bottom; height: 1; }"

    def __init__(self) -> None:
        super().__init__()
        self.value = 0
        self.rendered = 0

    def render(self) -> Text:
        self.rendered = self.value
        return Text(f"probe {self.value}")


class BenchApp(NaiveLogApp):
    BINDINGS: ClassVar[list[BindingType]] = [*SparkApp.BINDINGS, Binding(PROBE_KEY, "probe", show=False)]

    def __init__(self, naive: bool) -> None:
        super().__init__(IdleBackend(), UIConfig(), readonly=True)
        self.naive = naive
        self.probe = Probe()
        self.probe_target = 0
        self.probe_sent = 0.0
        self.probe_seen = asyncio.Event()
        self.latencies: list[float] = []

    def compose(self) -> Any:
        yield from super().compose()
        yield self.probe

    def action_probe(self) -> None:
        self.probe.value += 1
        self.probe.refresh()

    def _display(self, screen: Screen[Any], renderable: Any) -> None:
        super()._display(screen, renderable)
        if isinstance(renderable, CompositorUpdate):
            renderable.render_segments(self.console)   # the bytes a terminal would get
            shown = self.probe_target and self.probe.rendered >= self.probe_target
            if shown and not self.probe_seen.is_set():
                self.latencies.append(time.perf_counter() - self.probe_sent)
                self.probe_seen.set()


def corpus() -> list[bytes]:
    """Every shipped real recording, as blocks of 1,000 lines (cycled by the producer)."""
    lines: list[str] = []
    for info in list_recordings():
        lines += recording_text(info.name).split("\n")
    lines = [line for line in lines if line]
    ring = lines * (1 + 2000 // len(lines))
    blocks = []
    for i in range(0, len(lines), 100):
        blocks.append(("\n".join(ring[i : i + 1000]) + "\n").encode("utf-8", "surrogateescape"))
    return blocks


def serving_corpus(lines: int) -> list[bytes]:
    """For ``--parse``: what a followed log floods with — one real start-up, then real serving-time lines
    (stats, access log, NCCL INFO) — as blocks of 1,000 lines (the parser benchmark's log)."""
    from bench_logparse import build_log  # a sibling script: benchmarks/ is on sys.path when run

    data, _ = build_log(lines)
    rows = data.splitlines(keepends=True)
    return [b"".join(rows[i : i + 1000]) for i in range(0, len(rows), 1000)]


async def measure(naive: bool, rate: int, seconds: float, parse: bool) -> dict[str, Any]:
    app = BenchApp(naive)
    proc = psutil.Process()
    blocks = serving_corpus(int(rate * seconds) + 1000) if parse else corpus()
    parsed = [LogReader().feed(block) for block in blocks]
    async with app.run_test(headless=True, size=(160, 48)) as pilot:
        await pilot.pause()
        # Warm up: one pass of the corpus so caches, regexes and the log's first lines exist.
        reader = LogReader()
        app.sink(LogRecords("vllm", reader.feed(blocks[0])))
        ingest = LogIngest(expected_nodes=2)
        await asyncio.sleep(0.5)
        gc.collect()
        pauses: list[float] = []
        gc_started = [0.0]

        def on_gc(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                gc_started[0] = time.perf_counter()
            elif info.get("generation") == 2:
                pauses.append(time.perf_counter() - gc_started[0])

        gc.callbacks.append(on_gc)
        rss_before = proc.memory_info().rss
        rss_peak = rss_before
        cpu_before = proc.cpu_times()
        sent = 0
        stop = asyncio.Event()
        started = time.perf_counter()

        async def flood() -> None:
            nonlocal sent
            i = 0
            while (elapsed := time.perf_counter() - started) < seconds:
                due = int(rate * elapsed) - sent
                while due >= 1000:
                    if parse:   # the SSH backend's path: bytes into LogIngest, batches posted by flush()
                        ingest.feed(blocks[i % len(blocks)], time.time())
                    else:
                        app.sink(LogRecords("vllm", parsed[i % len(parsed)]))
                    i += 1
                    sent += 1000
                    due -= 1000
                await asyncio.sleep(0.005)
            stop.set()

        async def flush() -> None:
            while parse and not stop.is_set():
                await asyncio.sleep(0.1)
                batch = ingest.take_records(time.monotonic())
                if batch:
                    app.sink(LogRecords("vllm", batch))

        async def probe() -> None:
            while not stop.is_set():
                app.probe_target = app.probe.value + 1
                app.probe_seen.clear()
                app.probe_sent = time.perf_counter()
                key = events.Key(PROBE_KEY, None)
                key.set_sender(app)
                assert app._driver is not None
                app._driver.send_message(key)
                try:
                    await asyncio.wait_for(app.probe_seen.wait(), timeout=5.0)
                except TimeoutError:
                    app.latencies.append(5.0)
                await asyncio.sleep(0.1)

        async def memory() -> None:
            nonlocal rss_peak
            while not stop.is_set():
                rss_peak = max(rss_peak, proc.memory_info().rss)
                await asyncio.sleep(0.25)

        await asyncio.gather(flood(), flush(), probe(), memory())
        duration = time.perf_counter() - started
        cpu_after = proc.cpu_times()
        gc.callbacks.remove(on_gc)
        pane = app.query_one(LogPane)
        lat = sorted(app.latencies)
        return {
            "variant": ("naive (one Log.write per line)" if naive
                        else f"batched (write_lines at {FLUSH_HZ:g} Hz)"),
            "lines_sent": sent,
            "lines_per_s": sent / duration,
            "log_lines_kept": pane.log_widget.line_count,
            "probes": len(lat),
            "p50_ms": 1000 * statistics.median(lat),
            "p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))],
            "max_ms": 1000 * lat[-1],
            "rss_growth_mb": (rss_peak - rss_before) / 1e6,
            "cpu_percent": 100 * ((cpu_after.user + cpu_after.system) - (cpu_before.user + cpu_before.system))
            / duration,
            "full_gc": len(pauses),
            "full_gc_max_ms": 1000 * max(pauses, default=0.0),
        }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=100_000, help="log lines per second (default 100000)")
    parser.add_argument("--seconds", type=float, default=10.0, help="flood duration (default 10)")
    parser.add_argument("--variant", choices=("batched", "naive"), help=argparse.SUPPRESS)
    parser.add_argument("--parse", action="store_true",
                        help="send bytes through the SSH backend's LogIngest in the app's loop (every line "
                        "to the stage timeline, display rate-limited), as a real followed log does "
                        "(default: records parsed beforehand, so the figures are the dashboard's alone)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.variant:
        result = asyncio.run(measure(args.variant == "naive", args.rate, args.seconds, args.parse))
        print(json.dumps(result))
        return 0
    results = {}
    # The idle run is the floor: the same key presses with no flood, on the same machine at the same time.
    runs = {"idle": ("batched", 0), "batched": ("batched", args.rate), "naive": ("naive", args.rate)}
    for name, (variant, rate) in runs.items():
        command = [sys.executable, __file__, "--variant", variant, "--rate", str(rate),
                   "--seconds", str(args.seconds), *(["--parse"] if args.parse else [])]
        out = subprocess.run(command, capture_output=True, text=True, check=True)
        results[name] = json.loads(out.stdout.strip().splitlines()[-1])
    results["idle"]["variant"] = "no flood (baseline)"
    i, b, n = results["idle"], results["batched"], results["naive"]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"log flood: {args.rate:,} real vLLM lines/s offered for {args.seconds:g} s into the dashboard "
          f"(headless 160×48, log buffer {UIConfig().log_buffer_lines:,} lines, "
          f"{'parsed in the loop' if args.parse else 'parsed beforehand'}); {psutil.cpu_count()} CPUs, "
          f"load average {psutil.getloadavg()[0]:.1f}")
    for r in (i, b, n):
        print(f"  {r['variant']:<32} {r['lines_per_s']:>8,.0f} lines/s  "
              f"key→screen p50 {r['p50_ms']:6.1f} ms  "
              f"p99 {r['p99_ms']:7.1f} ms  max {r['max_ms']:7.1f} ms  RSS +{r['rss_growth_mb']:3.0f} MB  "
              f"CPU {r['cpu_percent']:3.0f}%  "
              f"full GCs {r['full_gc']} (max {r['full_gc_max_ms']:.0f} ms)  [{r['probes']} keys]")
    print(f"  naive / batched: key→screen p99 ×{n['p99_ms'] / max(b['p99_ms'], 1e-9):.0f}, "
          f"lines delivered ×{n['lines_per_s'] / max(b['lines_per_s'], 1e-9):.2f}")
    ok = b["p99_ms"] <= 100 and b["rss_growth_mb"] <= 100
    print(f"  goals (batched: p99 ≤ 100 ms, RSS growth ≤ 100 MB): {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
