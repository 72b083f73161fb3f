"""Speculative decoding's acceptance, read from vLLM's periodic stats line.

vLLM prints one line per logging interval (10 s) while a draft model (EAGLE, MTP, n-gram, DFlash …) proposes
tokens. The format strings, by version (vllm-project/vllm):

- V0, ``vllm/engine/metrics.py`` ``_format_spec_decode_metrics_str`` (0.4–0.9)::

    Speculative metrics: Draft acceptance rate: 0.652, System efficiency: 0.570, Number of speculative
    tokens: 4, Number of accepted tokens: 1234, Number of draft tokens: 1892, Number of emitted tokens: 1680.

  (some 0.4 releases print "Number of draft tokens tokens:" and "Number of emitted tokens tokens:").
- V1 first form, ``vllm/v1/spec_decode/metrics.py`` ``SpecDecodingLogging.log`` (0.8.3–0.8.4)::

    SpecDecoding metrics: Draft acceptance rate: 65.2%, Accepted: 1234 tokens, Drafted: 1892 tokens

- V1 with positions (0.8.5–0.9)::

    SpecDecoding metrics: Draft acceptance rate: 65.2%, Mean acceptance length: 3.61, Accepted: 1234 tokens,
    Drafted: 1892 tokens, Per-position acceptance rate: 0.861, 0.702, 0.552, 0.497

- V1 now (0.10 on)::

    SpecDecoding metrics: Mean acceptance length: 3.62, Accepted throughput: 2.87 tokens/s, Drafted
    throughput: 16.42 tokens/s, Accepted: 76 tokens, Drafted: 435 tokens, Per-position acceptance rate:
    0.793, 0.552, 0.448, Avg Draft acceptance rate: 17.5%

  (forks append more fields: ``Rejected: …``, ``Draft time/step: …``, top-k rates).

Every field is found by its own label, wherever it stands, so an order or a field of another release
changes nothing. Rates are kept as fractions 0..1 (V0 prints a fraction, V1 a percentage). The mean
acceptance length counts the bonus token (vLLM's convention: 1 + accepted ÷ drafts); V0 does not print it
and it is worked out from the speculative tokens per draft. Pure; garbage never raises.
"""

from __future__ import annotations

import math
import re
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

#: Substrings of the lines this module reads (the stage machine's keyword prefilter uses them).
KEYWORDS: tuple[str, ...] = ("SpecDecoding metrics", "Speculative metrics: Draft")

_NUM = r"(-?(?:\d+(?:\.\d*)?|\.\d+)|nan|inf)"
_MEAN_LENGTH = re.compile(r"Mean acceptance length: " + _NUM)
# "Avg Draft acceptance rate: 17.5%" (V1 now), "Draft acceptance rate: 65.2%" (V1 first), "…: 0.652" (V0).
_RATE = re.compile(r"Draft acceptance rate: " + _NUM + r"(%?)")
_ACCEPTED = re.compile(r"(?:\bAccepted|Number of accepted tokens): (\d+)")
_DRAFTED = re.compile(r"(?:\bDrafted|Number of draft tokens(?: tokens)?): (\d+)")
_SPEC_TOKENS = re.compile(r"Number of speculative tokens: (\d+)")
_ACCEPTED_TPS = re.compile(r"Accepted throughput: " + _NUM)
_PER_POSITION = re.compile(r"Per-position acceptance rate: ((?:\d+(?:\.\d+)?)(?:, \d+(?:\.\d+)?)*)")


@dataclass(frozen=True)
class SpecDecodeReading:
    """One stats line: what it says of the last interval (``None``: the line does not say it)."""

    acceptance_rate: float | None = None          # accepted ÷ drafted tokens, 0..1
    mean_acceptance_length: float | None = None   # tokens per step, the bonus token included
    per_position: tuple[float, ...] = ()          # acceptance rate at each draft position, 0..1
    accepted: int | None = None                   # tokens, over the interval (V0: since start)
    drafted: int | None = None
    accepted_per_s: float | None = None


def _finite(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _int(pattern: re.Pattern[str], text: str) -> int | None:
    m = pattern.search(text)
    return int(m.group(1)) if m else None


def parse(message: str) -> SpecDecodeReading | None:
    """The reading of a ``SpecDecoding metrics`` / ``Speculative metrics`` line; ``None`` for any other
    line, or one that carries no figure at all."""
    at = max(message.find("SpecDecoding metrics"), message.find("Speculative metrics"))
    if at == -1:
        return None
    text = message[at:]
    rate: float | None = None
    m = _RATE.search(text)
    if m:
        rate = _finite(m.group(1))
        if rate is not None and m.group(2) == "%":
            rate /= 100.0
        if rate is not None and not 0.0 <= rate <= 1.0:
            rate = None
    m = _MEAN_LENGTH.search(text)
    mean_length = _finite(m.group(1)) if m else None
    m = _PER_POSITION.search(text)
    per_position = tuple(float(p) for p in m.group(1).split(", ")) if m else ()
    accepted, drafted = _int(_ACCEPTED, text), _int(_DRAFTED, text)
    if rate is None and accepted is not None and drafted:
        rate = accepted / drafted
    spec_tokens = _int(_SPEC_TOKENS, text)
    if mean_length is None and rate is not None and spec_tokens:
        # V0: each step drafts ``spec_tokens``, so accepted ÷ drafts = rate × spec_tokens.
        mean_length = 1.0 + rate * spec_tokens
    m = _ACCEPTED_TPS.search(text)
    reading = SpecDecodeReading(rate, mean_length, per_position, accepted, drafted,
                                _finite(m.group(1)) if m else None)
    return None if reading == SpecDecodeReading() else reading


def observe(message: str, facts: MutableMapping[str, Any]) -> bool:
    """Fold one line into the timeline's facts; whether it was a speculative-decoding stats line.

    ``spec_acceptance_rate`` / ``spec_mean_acceptance_length`` / ``spec_per_position``: the last interval;
    ``spec_first_acceptance_rate``: the first interval that drafted anything (the early level a drop is
    measured against); ``spec_intervals``: how many lines were read."""
    reading = parse(message)
    if reading is None:
        return False
    facts["spec_intervals"] = int(facts.get("spec_intervals", 0)) + 1
    if reading.drafted == 0:
        return True     # an idle interval: its rates are NaN or 0, and say nothing of the draft model
    if reading.acceptance_rate is not None:
        facts["spec_acceptance_rate"] = round(reading.acceptance_rate, 4)
        facts.setdefault("spec_first_acceptance_rate", round(reading.acceptance_rate, 4))
    if reading.mean_acceptance_length is not None:
        facts["spec_mean_acceptance_length"] = round(reading.mean_acceptance_length, 3)
    if reading.per_position:
        facts["spec_per_position"] = reading.per_position
    return True


def describe(facts: MutableMapping[str, Any] | Any) -> str | None:
    """``speculative decoding: acceptance 62 % (mean length 2.9), first 65 %`` from the facts; ``None``
    when the log shows no speculative decoding."""
    rate = facts.get("spec_acceptance_rate")
    length = facts.get("spec_mean_acceptance_length")
    if rate is None and length is None:
        return None
    parts = []
    if rate is not None:
        parts.append(f"acceptance {100 * rate:.0f} %")
    if length is not None:
        parts.append(f"mean length {length:.2f}")
    first = facts.get("spec_first_acceptance_rate")
    if first is not None and rate is not None and abs(first - rate) >= 0.005:
        parts.append(f"first {100 * first:.0f} %")
    return "speculative decoding: " + ", ".join(parts)
