"""A benchmark against its setup's history, as the dashboard's chart shows it (pure): each level's output
tok/s beside the previous run with the same fingerprint (and the change), its TTFT p50, and one stream's
decode speed as a share of the decode ceiling the run recorded (``serve_plan.DecodeCeiling``, counted from
the model's config when the bench ran: ``commands/bench.measured_setup``).

"The same fingerprint": the same image ID, vLLM, model, flags, nodes and parallelism
(``bench_fingerprint.Fingerprint.key``), and a run worth comparing at all (``bench.comparable``: same client,
request shape and profile). A run from before fingerprints is held against the newest comparable run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sparktui.domain.bench import BenchRecord, comparable
from sparktui.domain.bench_profiles import ceiling_percent, ceiling_tok_s


@dataclass(frozen=True)
class BenchDone:
    """What the dashboard's benchmark gives back: its one-line summary and the record it saved."""

    summary: str
    record: BenchRecord


@dataclass(frozen=True)
class ChartRow:
    """One level of the run, beside the same level of the previous run."""

    concurrency: int
    depth: int
    tok_s: float | None
    previous_tok_s: float | None
    ttft_p50: float | None          # seconds
    #: one stream's decode (1 ÷ ITL p50) as a percentage of the ceiling; None where either is unknown
    ceiling_percent: float | None
    partial: bool = False
    failed: int = 0
    #: joules per output token over every node's GPUs (None: GPU power not known)
    joules_per_token: float | None = None

    @property
    def change_percent(self) -> float | None:
        if self.tok_s is None or not self.previous_tok_s:
            return None
        return 100.0 * (self.tok_s - self.previous_tok_s) / self.previous_tok_s

    @property
    def label(self) -> str:
        return f"c={self.concurrency}" + (f" @{self.depth:,}" if self.depth else "")


@dataclass(frozen=True)
class BenchChart:
    record: BenchRecord
    previous: BenchRecord | None
    rows: tuple[ChartRow, ...]
    #: runs in the history with this run's fingerprint and request shape (this one included)
    runs_of_setup: int
    #: (level label, slowest, fastest output tok/s) over those runs, where more than one measured the level
    spread: tuple[tuple[str, float, float], ...] = ()

    @property
    def top_tok_s(self) -> float:
        """The scale of the bars: the fastest level of either run."""
        rates = [r for row in self.rows for r in (row.tok_s, row.previous_tok_s) if r]
        return max(rates, default=0.0)

    @property
    def fingerprint_key(self) -> str | None:
        key = (self.record.fingerprint or {}).get("key")
        return str(key) if key else None

    def ceiling_line(self) -> str:
        return ceiling_line(self.record.ceiling)

    def setup_line(self) -> str:
        """What was measured, in a line: model, image, vLLM, TP × PP, nodes, link."""
        fp = self.record.fingerprint or {}
        model = self.record.model.rstrip("/").rsplit("/", 1)[-1]
        if not fp:
            return f"{model} on {self.record.image or 'the host'} (no fingerprint: measured before profiles)"
        image = str(fp.get("image") or self.record.image or "the host")
        nodes = ", ".join(str(n) for n in fp.get("nodes") or ())
        parallel = f"TP {fp.get('tensor_parallel', '?')} × PP {fp.get('pipeline_parallel', '?')}"
        return (f"{model} on {image}, vLLM {fp.get('vllm_version') or '?'}, {parallel} over {nodes or '?'}; "
                f"link: {fp.get('link') or '?'}")


def same_setup(record: BenchRecord, other: BenchRecord) -> bool:
    """``other`` (earlier or later) measured what ``record`` measured: a comparable request (client, shape,
    profile: ``bench.comparable``) and the same fingerprint, when ``record`` has one."""
    shape = comparable(record, other) or comparable(other, record)
    key = (record.fingerprint or {}).get("key")
    return shape and (key is None or (other.fingerprint or {}).get("key") == key)


def previous_run(record: BenchRecord, history: Iterable[BenchRecord]) -> BenchRecord | None:
    """The newest earlier run of the same setup that measured anything."""
    earlier = [r for r in history if r.started_at < record.started_at and same_setup(record, r)
               and any(lv.completed for lv in r.levels)]
    return max(earlier, key=lambda r: r.started_at) if earlier else None


def chart_of(record: BenchRecord, history: Sequence[BenchRecord]) -> BenchChart:
    """The chart of ``record`` against ``history`` (which may hold ``record`` itself: it is told apart by
    its start time)."""
    previous = previous_run(record, history)
    rows = []
    for lv in sorted(record.levels, key=lambda lv: (lv.depth, lv.concurrency)):
        before = previous.level(lv.concurrency, lv.depth) if previous is not None else None
        rows.append(ChartRow(lv.concurrency, lv.depth, lv.output_tok_s if lv.completed else None,
                             before.output_tok_s if before is not None and before.completed else None,
                             lv.ttft.p50, ceiling_percent(lv, record.ceiling), lv.partial, lv.failed,
                             lv.energy.joules_per_token if lv.energy is not None else None))
    setup = [record, *(r for r in history if r.started_at != record.started_at and same_setup(record, r))]
    spread = []
    for row in rows:
        rates = [rate for r in setup if (same := r.level(row.concurrency, row.depth)) is not None
                 and same.completed and (rate := same.output_tok_s)]
        if len(rates) > 1:
            spread.append((row.label, min(rates), max(rates)))
    return BenchChart(record, previous, tuple(rows), len(setup), tuple(spread))


def latest_run(history: Sequence[BenchRecord], model: str | None = None) -> BenchRecord | None:
    """The run the chart opens on when none just finished: the newest of ``model`` (the engine's), else
    the newest of all."""
    measured = [r for r in history if r.levels]
    mine = [r for r in measured if model is not None and r.model == model]
    pool = mine or measured
    return max(pool, key=lambda r: r.started_at) if pool else None


def change_text(change: float | None) -> str:
    """``+4 %``, ``−12 %``, ``±0 %``; empty when there is nothing to compare with."""
    if change is None:
        return ""
    rounded = round(change)
    sign = "+" if rounded > 0 else "−" if rounded < 0 else "±"
    return f"{sign}{abs(rounded)} %"


def ceiling_line(ceiling: Mapping[str, Any] | None) -> str:
    """The ceiling with its inputs, or why it is not known."""
    top = ceiling_tok_s(ceiling)
    if ceiling is None or top is None:
        return ("decode ceiling unknown: the model's config.json could not be read on the head when this "
                "run was measured, so its active bytes per token are not known (`sparktui plan` says why)")
    text = f"decode ceiling {top:.1f} tok/s for one stream"
    bandwidth, node_bytes = ceiling.get("bandwidth_gbs"), ceiling.get("node_bytes")
    if isinstance(bandwidth, (int, float)) and isinstance(node_bytes, (int, float)) and node_bytes > 0:
        text += f": {bandwidth:g} GB/s ÷ {node_bytes / 1e9:.2f} GB per node per token"
        reduces, latency = ceiling.get("allreduces_per_token"), ceiling.get("allreduce_us")
        if isinstance(reduces, int) and reduces and isinstance(latency, (int, float)):
            text += f", {reduces} all-reduces × {latency:g} µs"
            source = str(ceiling.get("allreduce_source") or "")
            if source.startswith("assumed"):
                text += " (assumed)"
    return text


__all__ = ["BenchChart", "BenchDone", "ChartRow", "ceiling_line",
           "change_text", "chart_of", "latest_run", "previous_run", "same_setup"]
