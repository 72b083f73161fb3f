"""The stand-in's speculative decoding: with ``--speculative-config '{"num_speculative_tokens": k, ...}'`` it
counts drafts as vLLM does, exports the ``vllm:spec_decode_*`` counters and prints vLLM's
``SpecDecoding metrics:`` line every stats interval.

The draft model is a single number ``α``: the chance that a drafted token is accepted given the ones before
it were, so position ``i`` (0-based) is accepted in ``α^(i+1)`` of the drafts and a step yields
``1 + Σ α^(i+1)`` tokens (vLLM's mean acceptance length). α = 0.8 with k = 3 accepts 65 % of drafted
tokens, α = 0.5 accepts 29 %: the "60 % → 26 %" of a draft model whose weights are missing on one node.

Knobs: ``SPARKTUI_STANDIN_ACCEPTANCE`` (α at start, default 0.8), and at runtime the file named by
``SPARKTUI_STANDIN_RUNTIME_FILE`` (``key=value`` lines: ``acceptance=0.5``, ``speed=0.5``), read at every
stats interval and at once on SIGUSR2, so a test stages a drop while the engine serves. Serving speed
follows the mean acceptance length (fewer accepted tokens a step: fewer tokens a second), times ``speed``.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

ACCEPTANCE_ENV = "SPARKTUI_STANDIN_ACCEPTANCE"
RUNTIME_FILE_ENV = "SPARKTUI_STANDIN_RUNTIME_FILE"
DEFAULT_ACCEPTANCE = 0.8
DEFAULT_SPEC_TOKENS = 3


def speculative_tokens(config_text: str | None) -> int | None:
    """``num_speculative_tokens`` of a ``--speculative-config`` JSON (default 3); ``None`` without one, or
    with one that is not a JSON object (vLLM refuses those; the stand-in just does not speculate)."""
    if not config_text:
        return None
    try:
        config = json.loads(config_text)
    except ValueError:
        return None
    if not isinstance(config, dict):
        return None
    k = config.get("num_speculative_tokens", DEFAULT_SPEC_TOKENS)
    return k if isinstance(k, int) and 1 <= k <= 64 else DEFAULT_SPEC_TOKENS


def _fraction(text: str | None, default: float) -> float:
    try:
        value = float(text or default)
    except ValueError:
        return default
    return value if 0.0 <= value <= 1.0 else default


def initial_acceptance() -> float:
    return _fraction(os.environ.get(ACCEPTANCE_ENV), DEFAULT_ACCEPTANCE)


def read_runtime_file(path: str | None) -> dict[str, float]:
    """The runtime knobs (``acceptance``, ``speed``); unreadable lines and files are left out."""
    if not path:
        return {}
    try:
        text = Path(path).read_text()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        try:
            number = float(value.strip())
        except ValueError:
            continue
        if key.strip() == "acceptance" and 0.0 <= number <= 1.0:
            out["acceptance"] = number
        elif key.strip() == "speed" and 0.0 < number <= 100.0:
            out["speed"] = number
    return out


@dataclass
class SpecCounts:
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_position: list[int] = field(default_factory=list)


class SpecDecode:
    """Draft bookkeeping for the requests the stand-in serves (thread-safe)."""

    def __init__(self, k: int, acceptance: float) -> None:
        self.k = k
        self.acceptance = acceptance
        self.first_mean_length = self.mean_length()
        self._lock = threading.Lock()
        self._interval = SpecCounts(per_position=[0] * k)

    def per_position(self) -> list[float]:
        return [self.acceptance ** (i + 1) for i in range(self.k)]

    def mean_length(self) -> float:
        return 1.0 + sum(self.per_position())

    def speed_factor(self) -> float:
        """Serving speed against the start's acceptance (tokens a step now ÷ then)."""
        return self.mean_length() / self.first_mean_length

    def finished(self, generated: int) -> SpecCounts:
        """The drafts behind ``generated`` tokens of one request (added to the interval's counts)."""
        if generated <= 1:
            return SpecCounts(per_position=[0] * self.k)
        rates = self.per_position()
        drafts = max(1, round((generated - 1) / (1.0 + sum(rates))))
        per_position = [round(drafts * r) for r in rates]
        counts = SpecCounts(drafts, drafts * self.k, sum(per_position), per_position)
        with self._lock:
            iv = self._interval
            iv.drafts += counts.drafts
            iv.draft_tokens += counts.draft_tokens
            iv.accepted += counts.accepted
            iv.per_position = [a + b for a, b in zip(iv.per_position, per_position, strict=True)]
        return counts

    def take_line(self, seconds: float, v1: bool = True) -> str | None:
        """vLLM's stats line for the interval just ended (``None`` when nothing was drafted: vLLM logs
        none then either); V1's current format, or V0's ``Speculative metrics:``."""
        with self._lock:
            iv, self._interval = self._interval, SpecCounts(per_position=[0] * self.k)
        if not iv.drafts:
            return None
        rate = 100.0 * iv.accepted / iv.draft_tokens
        if not v1:
            return (f"Speculative metrics: Draft acceptance rate: {rate / 100:.3f}, System efficiency: "
                    f"{(iv.accepted + iv.drafts) / (iv.drafts * (self.k + 1)):.3f}, Number of speculative "
                    f"tokens: {self.k}, Number of accepted tokens: {iv.accepted}, Number of draft tokens: "
                    f"{iv.draft_tokens}, Number of emitted tokens: {iv.accepted + iv.drafts}.")
        positions = ", ".join(f"{n / iv.drafts:.3f}" for n in iv.per_position)
        return (f"SpecDecoding metrics: Mean acceptance length: {1 + iv.accepted / iv.drafts:.2f}, "
                f"Accepted throughput: {iv.accepted / seconds:.2f} tokens/s, Drafted throughput: "
                f"{iv.draft_tokens / seconds:.2f} tokens/s, Accepted: {iv.accepted} tokens, Drafted: "
                f"{iv.draft_tokens} tokens, Per-position acceptance rate: {positions}, "
                f"Avg Draft acceptance rate: {rate:.1f}%")
