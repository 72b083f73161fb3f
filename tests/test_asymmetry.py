"""The two-node-hang check (``sparktui.domain.asymmetry``): a busy GPU beside an idle one, held for the
threshold while the engine should be working."""

from __future__ import annotations

from sparktui.domain.asymmetry import AsymmetryWatch


def test_asymmetry_watch_needs_time_and_a_working_engine() -> None:
    watch = AsymmetryWatch(threshold=60)
    utils = {"spark1": 97.0, "spark2": 0.0}
    assert watch.update(0, True, utils) is None
    assert watch.update(59, True, utils) is None
    warning = watch.update(61, True, utils)
    assert warning is not None and "spark1" in warning and "spark2 idle" in warning
    assert watch.update(62, False, utils) is None          # engine not supposed to work: no warning
    assert watch.update(63, True, {"spark1": 97.0, "spark2": 95.0}) is None
    assert watch.update(64, True, {"spark1": 97.0, "spark2": None}) is None   # unknown is not idle


def test_a_new_pair_starts_the_clock_again() -> None:
    watch = AsymmetryWatch(threshold=60)
    assert watch.update(0, True, {"a": 97.0, "b": 0.0, "c": 90.0}) is None
    # The idle one changes: the held time counts from here, not from 0.
    assert watch.update(50, True, {"a": 97.0, "b": 90.0, "c": 0.0}) is None
    assert watch.update(100, True, {"a": 97.0, "b": 90.0, "c": 0.0}) is None
    warning = watch.update(111, True, {"a": 97.0, "b": 90.0, "c": 0.0})
    assert warning == ("GPU on a busy (97%) while c idle (0%) for 61 s — a rank may be stuck waiting "
                       "for its peer")


def test_the_busy_and_idle_marks_are_settable() -> None:
    watch = AsymmetryWatch(threshold=0, busy=80.0, idle=20.0)
    assert watch.update(0, True, {"a": 70.0, "b": 10.0}) is None      # 70 % is not busy by this mark
    assert watch.update(1, True, {"a": 85.0, "b": 15.0}) is not None
