"""`sparktui supervise` on the test bed, the policy branches that need a whole restart or a second
supervisor: a worker lost after ready is seen within 10 s, waited for (``worker_grace``), then every rank and
Ray restarted until a completion answers; the supervisor SIGKILLed leaves nothing of its own behind, and a
new one adopts the serving engine without touching it."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_helpers import run_sparktui
from tests.supervise_helpers import Supervise, serves, start_wait, supervised_bed
from tests.test_engine_truth_testbed import LOST_WITHIN, kill_ours
from tests.testbed import Testbed
from tests.waiting import wait_until_sync

pytestmark = [pytest.mark.testbed, pytest.mark.ray]


def test_a_lost_worker_is_seen_in_10s_waited_for_then_everything_restarted(
        make_testbed: Callable[..., Testbed], tmp_path: Path) -> None:
    bed, config, port = supervised_bed(make_testbed, tmp_path, worker_grace=5.0)
    start_wait(config)
    supervisor = Supervise(config)
    try:
        supervisor.wait(lambda line: line.get("event") == "state" and line.get("state") == "ready",
                        "the serving engine adopted")
        kill_ours(bed, "spark2")   # the worker's raylet and everything of ours beside it
        killed = time.monotonic()
        supervisor.wait(lambda line: line.get("event") == "state" and line.get("state") == "degraded",
                        "the worker lost", timeout=60)
        seen_after = time.monotonic() - killed
        print(f"worker lost seen by the supervisor after {seen_after:.1f} s")
        assert seen_after <= LOST_WITHIN, f"the lost worker was seen after {seen_after:.1f} s"
        assert "spark2" in supervisor.seen(lambda line: line.get("state") == "degraded")[0]["detail"]

        supervisor.wait(lambda line: line.get("event") == "decision" and line.get("cause") == "worker_lost"
                        and line.get("action") == "full_restart", "a full restart after the grace",
                        timeout=120)
        waited = supervisor.decisions("wait")
        assert waited and waited[0]["cause"] == "worker_lost", "the grace was not waited first"
        supervisor.wait(lambda line: line.get("event") == "incident" and line.get("cause") == "worker_lost",
                        "the incident kept before the restart", timeout=240)
        wait_until_sync(lambda: serves(bed, port), "serving again on both nodes", timeout=240, interval=1)
        print(f"worker lost → serving again after {time.monotonic() - killed:.1f} s")
    finally:
        assert supervisor.end() == 0
    supervisor.ended(bed)
    assert run_sparktui("--config", str(config), "stop", timeout=300).returncode == 0


def test_a_supervisor_killed_leaves_nothing_and_the_next_adopts_the_engine(
        make_testbed: Callable[..., Testbed], tmp_path: Path) -> None:
    bed, config, port = supervised_bed(make_testbed, tmp_path)
    start_wait(config)
    first = Supervise(config)
    try:
        first.wait(lambda line: line.get("event") == "state" and line.get("state") == "ready",
                   "the serving engine adopted")
    finally:
        assert first.end(signal.SIGKILL) == -signal.SIGKILL
    # Its node-side helpers (the log follower, the probes) end with their links.
    first.ended(bed)
    assert serves(bed, port), "killing the supervisor must leave the engine serving"

    second = Supervise(config)
    try:
        second.wait(lambda line: line.get("event") == "state" and line.get("state") == "ready",
                    "the serving engine adopted again")
        second.wait(lambda line: line.get("event") == "desired" and line.get("state") == "serving",
                    "the desired state read", timeout=30)
        assert serves(bed, port)
        assert not second.decisions("start") and not second.decisions("restart") \
            and not second.decisions("full_restart"), second.lines
    finally:
        assert second.end() == 0
    second.ended(bed)
    assert run_sparktui("--config", str(config), "stop", timeout=300).returncode == 0
