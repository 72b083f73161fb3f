"""Shared fixtures: the test bed of real SSH hosts (root only) and its factory."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence

import pytest

from tests.testbed import Testbed, unavailable_reason

MakeTestbed = Callable[..., Testbed]


def _require_testbed() -> None:
    reason = unavailable_reason()
    if reason:
        # CI must run every test: there a missing test bed is a failure, not a skip.
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI cannot build the test bed: {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="session")
def testbed() -> Iterator[Testbed]:
    """Two hosts, ``spark1`` (head) and ``spark2``, shared by the whole session.

    Tests that break a host (kill sshd, cut the link) must put it back, or use ``make_testbed``.
    """
    _require_testbed()
    bed = Testbed(("spark1", "spark2")).up()
    try:
        yield bed
    finally:
        bed.teardown()


@pytest.fixture
def make_testbed() -> Iterator[MakeTestbed]:
    """A factory for fresh test beds owned by one test: ``make_testbed()`` or ``make_testbed(["a"])``."""
    _require_testbed()
    beds: list[Testbed] = []

    def make(names: Sequence[str] = ("spark1", "spark2")) -> Testbed:
        bed = Testbed(names).up()
        beds.append(bed)
        return bed

    try:
        yield make
    finally:
        for bed in beds:
            bed.teardown()
