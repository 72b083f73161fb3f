""""Slower than it should" as figures: what ``sparktui.domain.serving_pace`` concludes and the serving
snapshot, the event stream, the dashboard and ``[notify]`` carry. Imports nothing of the domain (the
snapshot and the events name these types; the rules that make them sit above both)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Rule = Literal["throughput", "acceptance"]


@dataclass(frozen=True)
class SlowServing:
    """"Serving slower than it should", with the figures behind it."""

    rule: Rule
    seconds: float                               # how long it has held
    tok_s: float | None = None
    expected_tok_s: float | None = None          # the baseline at this load
    concurrency: int | None = None               # the baseline level compared with
    acceptance: float | None = None              # the window's acceptance rate
    early_acceptance: float | None = None
    cause: str | None = None

    @property
    def ratio(self) -> float | None:
        if self.tok_s is None or not self.expected_tok_s:
            return None
        return self.tok_s / self.expected_tok_s

    def describe(self) -> str:
        parts = []
        ratio = self.ratio
        if ratio is not None:
            parts.append(f"{self.tok_s:.1f} tok/s vs {self.expected_tok_s:.1f} at c={self.concurrency} "
                         f"in the last benchmark ({100 * ratio:.0f} %)")
        if self.acceptance is not None and self.early_acceptance is not None:
            parts.append(f"acceptance {100 * self.acceptance:.0f} % "
                         f"(was {100 * self.early_acceptance:.0f} %)")
        text = f"serving slower than it should for {minutes_text(self.seconds)}: " + "; ".join(parts)
        return text + (f" — likely {self.cause}" if self.cause else "")

    def short(self) -> str:
        """One line for the serving view: ``slower than it should (5 min): 24 vs 40 tok/s, 60 %``."""
        ratio = self.ratio
        if self.rule == "throughput" and ratio is not None:
            figures = f"{self.tok_s:.0f} vs {self.expected_tok_s:.0f} tok/s, {100 * ratio:.0f} %"
        elif self.acceptance is not None and self.early_acceptance is not None:
            figures = f"acceptance {100 * self.acceptance:.0f} % (was {100 * self.early_acceptance:.0f} %)"
        else:
            figures = self.rule
        return f"slower than it should ({minutes_text(self.seconds)}): {figures}"

    def to_json(self) -> dict[str, Any]:
        ratio = self.ratio
        return {"rule": self.rule, "seconds": round(self.seconds, 1), "output_tok_s": _r(self.tok_s),
                "baseline_tok_s": _r(self.expected_tok_s), "baseline_concurrency": self.concurrency,
                "ratio": None if ratio is None else round(ratio, 3),
                "acceptance_rate": _r(self.acceptance, 4),
                "early_acceptance_rate": _r(self.early_acceptance, 4), "cause": self.cause,
                "detail": self.describe()}


def _r(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def minutes_text(seconds: float) -> str:
    """``90 s``, ``5 min``: how long a slowdown held, or must hold."""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _ceiling_part(rate: float | None, ceiling_tok_s: float | None) -> tuple[str, str] | None:
    if rate is None or ceiling_tok_s is None or ceiling_tok_s <= 0:
        return None
    return f"{100.0 * rate / ceiling_tok_s:.0f} %", f"of ceiling {ceiling_tok_s:.0f}"


def ceiling_text(rate: float | None, ceiling_tok_s: float | None) -> str:
    """``69 % of ceiling 55``: a decode rate against one stream's ceiling; empty when either is unknown."""
    part = _ceiling_part(rate, ceiling_tok_s)
    return "" if part is None else " ".join(part)


@dataclass(frozen=True)
class PaceReading:
    """One snapshot judged: ``slow`` while a rule holds; ``raised`` on the snapshot where it begins (say it
    once); ``ratio``: output tok/s ÷ the baseline at this load (``None``: no baseline, or another load).
    ``stream_tok_s``: one stream's decode rate (1 ÷ ITL p50), only while a single request runs and the
    decode ceiling for one stream (``ceiling_tok_s``) is known — at more streams the single-stream ceiling
    says nothing of the aggregate."""

    slow: SlowServing | None = None
    raised: bool = False
    ratio: float | None = None
    early_acceptance: float | None = None
    stream_tok_s: float | None = None
    ceiling_tok_s: float | None = None

    def against_parts(self) -> list[tuple[str, str]]:
        """(figure, its words): ``("81 %", "of bench")``, ``("69 %", "of ceiling 55")``, each only where
        known (the dashboard shows the figure bold, its words dim)."""
        out = [] if self.ratio is None else [(f"{100 * self.ratio:.0f} %", "of bench")]
        ceiling = _ceiling_part(self.stream_tok_s, self.ceiling_tok_s)
        return out + ([ceiling] if ceiling else [])

    def against(self) -> list[str]:
        """``81 % of bench``, ``69 % of ceiling 55``: each only where known."""
        return [" ".join(part) for part in self.against_parts()]

    def to_json(self) -> dict[str, Any]:
        return {"ratio": _r(self.ratio, 3), "stream_tok_s": _r(self.stream_tok_s),
                "ceiling_tok_s": _r(self.ceiling_tok_s), "text": " · ".join(self.against()) or None,
                "slow": None if self.slow is None else self.slow.to_json()}
