"""Exponential backoff with jitter: how long to wait before reconnect attempt number N.

Pure arithmetic, so the SSH transport, the tests and the demo agree on the schedule.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    #: Wait before the first retry (seconds).
    initial: float = 0.5
    #: Each further failure multiplies the wait by this.
    factor: float = 2.0
    #: The wait never grows beyond this.
    maximum: float = 30.0
    #: Fraction of the wait that is randomised (0 … 1): nodes that failed together do not retry in step.
    jitter: float = 0.25

    def base(self, attempt: int) -> float:
        """The wait before retry ``attempt`` (1-based) without jitter."""
        if attempt < 1:
            return 0.0
        # Cap the exponent so a long outage cannot overflow the float.
        return min(self.maximum, self.initial * self.factor ** min(attempt - 1, 64))

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """The wait before retry ``attempt``: ``base`` shortened by up to ``jitter`` of itself."""
        base = self.base(attempt)
        return base * (1.0 - self.jitter * rand())
