"""Promote the new image or roll back to the old one: the upgrade's decision, with its reason in words and the
figures side by side (pure; no I/O).

The new image is kept only when, in this order: it started and reached ready; its smoke test answered; its
short benchmark ran and its output tok/s is at least ``[upgrade] min_speed_ratio`` of the old image's at every
concurrency level both measured; and its start-up log shows no warning class the old image's did not (NCCL
over sockets instead of RoCE, NCCL on one HCA: read from the log timeline's facts by
:mod:`sparktui.domain.logs.nccl`). The first rule that fails is the reason for rolling back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sparktui.domain.bench import BenchRecord
from sparktui.domain.logs.nccl import SOCKET_WARNING

#: The warning classes a start-up log can show, and how a person reads them.
WARNING_LABELS: dict[str, str] = {
    "nccl_sockets": "NCCL over TCP sockets instead of RoCE",
    "nccl_one_hca": "NCCL over one HCA only (about half the bandwidth)",
}


def warning_classes(facts: Mapping[str, Any]) -> frozenset[str]:
    """The warning classes in one run's log timeline facts (``TimelineSnapshot.facts``): the NCCL verdict
    the log parser already keeps (``nccl_verdict`` / ``nccl_verdict_level``)."""
    if facts.get("nccl_verdict_level") != "warning":
        return frozenset()
    text = str(facts.get("nccl_verdict") or "")
    return frozenset({"nccl_sockets" if text.startswith(SOCKET_WARNING) else "nccl_one_hca"})


class Decision(StrEnum):
    PROMOTE = "promote"
    ROLL_BACK = "roll back"


class FailedCheck(StrEnum):
    """Which rule decided a roll-back (the upgrade's stages, as its report and the dashboard name them)."""

    START = "start"
    SMOKE = "smoke test"
    BENCH = "benchmark"
    SPEED = "speed"
    WARNINGS = "warnings"


@dataclass(frozen=True)
class Candidate:
    """What the new image's run showed."""

    ready: bool
    #: Not ready: the stage it failed in and the diagnosis (the log timeline's ``Failure``, in words).
    failed_stage: str | None = None
    diagnosis: str | None = None
    smoke_ok: bool = False
    smoke_detail: str = ""
    bench: BenchRecord | None = None
    warnings: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Baseline:
    """The old image serving: its short benchmark (run now, or the last one of the same recipe in the bench
    history) and the warning classes its log showed."""

    bench: BenchRecord | None
    warnings: frozenset[str] = frozenset()


@dataclass(frozen=True)
class LevelFigures:
    """One concurrency level measured by both: output tok/s and median TTFT, old beside new."""

    concurrency: int
    baseline_tok_s: float
    candidate_tok_s: float
    baseline_ttft_p50: float | None = None
    candidate_ttft_p50: float | None = None

    @property
    def ratio(self) -> float:
        return self.candidate_tok_s / self.baseline_tok_s

    def to_json(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "baseline_tok_s": self.baseline_tok_s,
                "candidate_tok_s": self.candidate_tok_s, "ratio": self.ratio,
                "baseline_ttft_p50": self.baseline_ttft_p50, "candidate_ttft_p50": self.candidate_ttft_p50}


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    reason: str
    failed: FailedCheck | None = None
    figures: tuple[LevelFigures, ...] = ()
    new_warnings: tuple[str, ...] = ()
    min_speed_ratio: float = 0.95

    @property
    def promote(self) -> bool:
        return self.decision is Decision.PROMOTE

    def table(self) -> list[str]:
        """The figures side by side, one line per level (empty when there are none)."""
        if not self.figures:
            return []
        out = [f"{'c':>4}  {'old tok/s':>10}  {'new tok/s':>10}  {'new/old':>7}  "
               f"{'old TTFT':>9}  {'new TTFT':>9}"]
        for f in self.figures:
            out.append(f"{f.concurrency:>4}  {f.baseline_tok_s:>10.1f}  {f.candidate_tok_s:>10.1f}  "
                       f"{f.ratio * 100:>6.0f}%  {_ms(f.baseline_ttft_p50):>9}  "
                       f"{_ms(f.candidate_ttft_p50):>9}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"decision": self.decision.value, "reason": self.reason,
                "failed": self.failed.value if self.failed else None,
                "figures": [f.to_json() for f in self.figures], "new_warnings": list(self.new_warnings),
                "min_speed_ratio": self.min_speed_ratio}


def _ms(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds * 1000:.0f} ms"


def side_by_side(baseline: BenchRecord, candidate: BenchRecord) -> tuple[LevelFigures, ...]:
    """Every level both runs measured with a rate above 0, by concurrency."""
    out = []
    for level in sorted(candidate.levels, key=lambda lv: lv.concurrency):
        before = baseline.level(level.concurrency)
        now, then = level.output_tok_s, before.output_tok_s if before is not None else None
        if before is None or now is None or not then:
            continue
        out.append(LevelFigures(level.concurrency, then, now, before.ttft.p50, level.ttft.p50))
    return tuple(out)


def baseline_from_history(records: Iterable[BenchRecord], *, image: str, model: str, flags: Sequence[str],
                          like: BenchRecord | None = None) -> BenchRecord | None:
    """The old image's benchmark from the bench history, when the engine cannot be benchmarked now: the
    newest run of the same image, model and flags (the recipe as started) that answered requests; with
    ``like``, only one of the same client and request shape (so the candidate's run compares with it)."""
    fits = [r for r in records
            if r.image == image and r.model == model and tuple(r.flags) == tuple(flags) and not r.interrupted
            and any(lv.completed for lv in r.levels) and (like is None or _same_shape(r, like) is None)]
    return max(fits, key=lambda r: r.started_at) if fits else None


def _same_shape(a: BenchRecord, b: BenchRecord) -> str | None:
    """Why two benchmarks cannot be compared (another model, client or request shape), or None."""
    for what, x, y in (("model", a.model, b.model), ("client", a.client, b.client),
                       ("input length", a.input_len, b.input_len),
                       ("output length", a.output_len, b.output_len),
                       ("prompt file", a.prompt_file, b.prompt_file), ("profile", a.profile, b.profile)):
        if x != y:
            return f"the benchmarks differ in {what} ({x} vs {y})"
    return None


def decide(candidate: Candidate, baseline: Baseline, min_speed_ratio: float = 0.95) -> Verdict:
    """Promote or roll back, and why (the first rule that fails; see the module's docstring)."""

    def back(failed: FailedCheck, reason: str, figures: tuple[LevelFigures, ...] = (),
             new: tuple[str, ...] = ()) -> Verdict:
        return Verdict(Decision.ROLL_BACK, reason, failed, figures, new, min_speed_ratio)

    if not candidate.ready:
        where = f" in {candidate.failed_stage}" if candidate.failed_stage else ""
        why = f": {candidate.diagnosis}" if candidate.diagnosis else ""
        return back(FailedCheck.START, f"the new image did not reach ready (failed{where}){why}")
    if not candidate.smoke_ok:
        detail = f": {candidate.smoke_detail}" if candidate.smoke_detail else ""
        return back(FailedCheck.SMOKE, f"the new image's smoke test did not answer{detail}")
    if candidate.bench is None or not any(lv.completed for lv in candidate.bench.levels):
        return back(FailedCheck.BENCH, "the new image's benchmark answered no request")
    if baseline.bench is None:
        return back(FailedCheck.BENCH, "no benchmark of the old image to compare with")
    differ = _same_shape(baseline.bench, candidate.bench)
    if differ is not None:
        return back(FailedCheck.BENCH, f"cannot compare the speed: {differ}")
    figures = side_by_side(baseline.bench, candidate.bench)
    if not figures:
        return back(FailedCheck.BENCH, "the two benchmarks share no concurrency level with a rate")
    slowest = min(figures, key=lambda f: f.ratio)
    if slowest.ratio < min_speed_ratio:
        return back(FailedCheck.SPEED,
                    f"the new image is slower: {slowest.candidate_tok_s:.1f} output tok/s at "
                    f"c={slowest.concurrency} vs {slowest.baseline_tok_s:.1f} before "
                    f"({slowest.ratio * 100:.0f} %, below the {min_speed_ratio * 100:.0f} % required)",
                    figures)
    new = tuple(sorted(candidate.warnings - baseline.warnings))
    if new:
        words = ", ".join(WARNING_LABELS.get(w, w) for w in new)
        return back(FailedCheck.WARNINGS, f"the new image's start shows a new warning: {words}", figures, new)
    return Verdict(Decision.PROMOTE,
                   f"ready, smoke test answered, output tok/s {slowest.ratio * 100:.0f} % of the old "
                   f"image's at c={slowest.concurrency} (at least {min_speed_ratio * 100:.0f} % required), "
                   "no new warning",
                   None, figures, (), min_speed_ratio)
