"""The reconnect schedule: exponential, capped, jittered downwards only."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sparktui.domain.backoff import Backoff


def test_doubles_from_half_a_second_to_thirty() -> None:
    b = Backoff()
    assert [b.base(n) for n in range(1, 9)] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert b.base(0) == 0.0
    assert b.base(10_000) == 30.0


def test_jitter_bounds() -> None:
    b = Backoff(jitter=0.25)
    assert b.delay(3, rand=lambda: 0.0) == 2.0
    assert b.delay(3, rand=lambda: 1.0) == 1.5


@given(st.integers(min_value=1, max_value=500), st.floats(min_value=0, max_value=1))
def test_delay_never_exceeds_the_cap_or_goes_negative(attempt: int, r: float) -> None:
    b = Backoff()
    assert 0 <= b.delay(attempt, rand=lambda: r) <= b.maximum
