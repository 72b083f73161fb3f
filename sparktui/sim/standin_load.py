"""How the stand-in's token rate and latency follow the load, so a benchmark sweep has a real curve.

A decode step of a memory-bandwidth-bound engine serves every running stream at once: more streams make
each step somewhat slower, so the per-stream rate falls while the aggregate rises sub-linearly. The
stand-in models that with one exponent ``a`` (0 < a ≤ 1) over ``c`` = the streams generating right now:

    aggregate tok/s (c) = R1 · c^a          per-stream tok/s (c) = R1 · c^(a − 1)
    ITL (c)             = 1/R1 · c^(1 − a)  TTFT (c)             = TTFT1 · c^0.5   (prefills queue up)

Defaults: R1 = 1/0.012 s ≈ 83.3 tok/s, a = 0.6, TTFT1 = 30 ms — so c = 4 gives 2.3× the single-stream
aggregate, as two Sparks do (17 → ~36 tok/s for Qwen3-235B at c = 1 → 4). Environment (for launchers that
pass only vLLM's flags): ``SPARKTUI_STANDIN_TOKEN_RATE`` (R1), ``SPARKTUI_STANDIN_SCALING`` (a),
``SPARKTUI_STANDIN_TTFT`` (TTFT1 in seconds).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from sparktui.sim.standin_image import speed

DEFAULT_TOKEN_RATE = 1 / 0.012
DEFAULT_SCALING = 0.6
DEFAULT_TTFT = 0.03


def _env_float(name: str, default: float, low: float, high: float) -> float:
    try:
        value = float(os.environ.get(name, "") or default)
    except ValueError:
        return default
    return value if low < value <= high else default


@dataclass
class LoadShape:
    """The curve, and the count of streams generating now (shared by the server's request threads)."""

    token_rate: float = DEFAULT_TOKEN_RATE   # R1: one stream alone, tokens per second
    scaling: float = DEFAULT_SCALING         # a
    ttft_seconds: float = DEFAULT_TTFT       # TTFT1
    #: a factor set while serving (``standin_spec``: the runtime file's speed, the acceptance's share)
    runtime_speed: float = 1.0
    active: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def from_env(cls) -> LoadShape:
        # An image's speed factor (standin_image: a slower image) scales the base rate and TTFT.
        factor = speed()
        return cls(_env_float("SPARKTUI_STANDIN_TOKEN_RATE", DEFAULT_TOKEN_RATE, 0.0, 1e6) * factor,
                   _env_float("SPARKTUI_STANDIN_SCALING", DEFAULT_SCALING, 0.0, 1.0),
                   _env_float("SPARKTUI_STANDIN_TTFT", DEFAULT_TTFT, 0.0, 600.0) / factor)

    def aggregate_rate(self, streams: int) -> float:
        return self.token_rate * self.runtime_speed * max(1, streams) ** self.scaling

    def stream_rate(self, streams: int) -> float:
        return self.aggregate_rate(streams) / max(1, streams)

    def itl(self, streams: int) -> float:
        return 1.0 / self.stream_rate(streams)

    def ttft(self, streams: int) -> float:
        return self.ttft_seconds / self.runtime_speed * max(1, streams) ** 0.5

    @contextlib.contextmanager
    def stream(self) -> Iterator[None]:
        """Count one generating stream for the duration of the block."""
        with self._lock:
            self.active += 1
        try:
            yield
        finally:
            with self._lock:
                self.active -= 1

    def pace(self, tokens: int) -> Iterator[float]:
        """Sleep like the engine and yield the time each of ``tokens`` tokens is produced (call inside
        ``stream()``); each gap follows the streams running at that moment."""
        time.sleep(self.ttft(self.active))
        for i in range(tokens):
            if i:
                time.sleep(self.itl(self.active))
            yield time.monotonic()
