"""Shared fixtures: the test bed of real SSH hosts (root only) and its factory."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from tests.testbed import Testbed, docker_image, docker_unavailable_reason, unavailable_reason

MakeTestbed = Callable[..., Testbed]

#: The longest test files (real Ray, real dockerd, paced start-ups), longest first: CI's workers take whole
#: files in collection order (``--no-loadscope-reorder``), each the next file as it finishes one, so a long
#: file collected last would run alone at the end.
LONG_FILES = (
    # The docker unit first (``DOCKER_FILES``, ~15 min of one worker's time: the longest unit of all).
    "test_docker_testbed.py", "test_upgrade_promote_docker_testbed.py", "test_upgrade_docker_testbed.py",
    "test_incidents_testbed.py", "test_warm_restart_docker_testbed.py", "test_host_leftovers_testbed.py",
    "test_engine_truth_testbed.py", "test_supervise_testbed.py", "test_start_safe_testbed.py",
    "test_lifecycle_testbed.py", "test_supervise_limits_testbed.py", "test_supervise_recovery_testbed.py",
    "test_warm_restart_testbed.py", "test_run_history_testbed.py", "test_model_sync_testbed.py",
    "test_serving_pace_testbed.py", "test_status.py", "test_lifecycle_cli.py",
    "test_bench_profile_testbed.py", "test_standin_ray.py", "test_serving_testbed.py",
    "test_memory_guard_testbed.py",
    "test_start_explain_testbed.py", "test_bench_cli_testbed.py", "test_init.py", "test_backend_testbed.py",
)


#: The files that use the docker test bed (``docker_testbed``: two dockerds, the CI image loaded on each,
#: ~40 s and two cores' worth of work to build). Under ``--dist loadfile`` they go to one worker as one unit,
#: so the bed is built once per run, not once per worker, and two docker beds never compete for the cores.
DOCKER_FILES = frozenset({
    "test_docker_testbed.py", "test_upgrade_docker_testbed.py", "test_upgrade_promote_docker_testbed.py",
    "test_warm_restart_docker_testbed.py", "test_incidents_testbed.py", "test_host_leftovers_testbed.py",
})


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` with the docker files as one unit (``DOCKER_FILES``); other modes as xdist has
    them."""
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class DockerFilesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return "docker test bed" if os.path.basename(scope) in DOCKER_FILES else scope

    return DockerFilesTogether(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))  # stable: files stay whole


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


@pytest.fixture(scope="session")
def docker_testbed() -> Iterator[Testbed]:
    """Two hosts that each run their own dockerd, with the CI engine image (same image ID on both).

    Opt-in (only the tests that ask for it pay the ~30 s: dockerd ×2, image import, build, save/load; the
    first run on a machine also builds the cached root filesystem, ~3 min).
    """
    _require_testbed()
    reason = docker_unavailable_reason()
    if reason:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI cannot build the docker test bed: {reason}")
        pytest.skip(reason)
    bed = Testbed(("spark1", "spark2"), docker=True).up(timeout=60)
    try:
        docker_image.install(bed, progress=True)
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
