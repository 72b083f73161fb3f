"""A start that needs no person, on the test bed (two SSH hosts, runtime host, real Ray, the stand-in):
the worker's sshd killed during `ray start` → no traceback, exit 1, nothing of ours left on either host
(checked from outside, in each host's namespace); a short cut of the worker's cable during the start,
within ``engine.link_grace_s`` → the start completes; a cut longer than the grace → a clear failure naming
the node and its link, nothing left; a person's `stop` during `start --wait` → reported as a stop."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sparktui.commands.exit_status import ExitStatus
from tests.cli_helpers import REPO, run_sparktui
from tests.lifecycle_helpers import lifecycle_overrides
from tests.test_lifecycle_testbed import leftovers
from tests.testbed import Testbed
from tests.waiting import wait_until_sync

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

#: The head's `ray start` while it runs, as `start` prints it: a fault injected then meets the worker's
#: `ray start` (which begins when the head's GCS answers) every time, never a step already done.
HEAD_RAY_RUNNING = "spark1     ray start (head)"


def _config(bed: Testbed, tmp: Path, grace: float, **engine: Any) -> Path:
    overrides = lifecycle_overrides(bed, **engine)
    overrides["engine"]["link_grace_s"] = grace
    # Ray's own health check is slower than the cut (the grace is ours to test, not Ray's).
    overrides["engine"]["env"].update({"RAY_health_check_period_ms": "1000",
                                       "RAY_health_check_failure_threshold": "60"})
    bed.make_model_dirs()
    return bed.write_config(tmp / "config.toml", **overrides)


class Start:
    """`sparktui start --wait` in a subprocess; ``on_line`` sees each line of its stdout as it comes."""

    def __init__(self, config: Path, *extra: str) -> None:
        env = {k: v for k, v in os.environ.items() if k != "SPARKTUI_CONFIG"}
        self.proc = subprocess.Popen([sys.executable, "-m", "sparktui", "--config", str(config), "start",
                                      "--wait", "--timeout", "120", *extra], cwd=REPO, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []

    def until(self, predicate: Callable[[str], bool], timeout: float = 120) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        for line in self.proc.stdout:
            self.lines.append(line)
            if predicate(line):
                return line
            if time.monotonic() > deadline:
                break
        raise AssertionError("never seen; output:\n" + "".join(self.lines))

    def finish(self, timeout: float = 180) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout)
        self.lines.append(out)
        return self.proc.returncode, "".join(self.lines), err


def _nothing_left(bed: Testbed) -> None:
    # The worker's raylet, told nothing, leaves once the head's GCS is gone: wait for it, bounded.
    for name in ("spark1", "spark2"):
        wait_until_sync(lambda n=name: leftovers(bed, n) == [],  # type: ignore[misc]
                        f"no process of ours left on {name}", timeout=90)


def test_worker_sshd_killed_during_ray_start_fails_cleanly(make_testbed: Callable[..., Testbed],
                                                           tmp_path: Path) -> None:
    bed = make_testbed()
    config = _config(bed, tmp_path, grace=5.0)
    start = Start(config)
    try:
        start.until(lambda line: HEAD_RAY_RUNNING in line and "..." in line)
        bed.kill_sshd("spark2")
        code, out, err = start.finish()
    finally:
        if start.proc.poll() is None:
            start.proc.kill()
    assert "Traceback" not in err and "CancelledError" not in err, err
    assert code == ExitStatus.NOT_WELL, (out, err)
    assert "spark2" in out and "link" in out, out
    assert "undone" in out, out
    _nothing_left(bed)
    # The next start is not refused by what this one left.
    bed.start_sshd("spark2")
    again = run_sparktui("--config", str(config), "start", "--wait", "--timeout", "120", timeout=180)
    assert again.returncode == 0, again.stdout + again.stderr
    stop = run_sparktui("--config", str(config), "stop", timeout=120)
    assert stop.returncode == 0, stop.stdout + stop.stderr


def test_short_link_cut_during_start_is_ridden_out(make_testbed: Callable[..., Testbed],
                                                   tmp_path: Path) -> None:
    bed = make_testbed()
    config = _config(bed, tmp_path, grace=25.0)
    start = Start(config)
    try:
        start.until(lambda line: HEAD_RAY_RUNNING in line and "..." in line)
        bed.link_down("spark2")
        time.sleep(8)   # the cut itself: 8 s with no packet (the fault, not a wait for a condition)
        bed.link_up("spark2")
        code, out, err = start.finish()
    finally:
        bed.link_up("spark2")
        if start.proc.poll() is None:
            start.proc.kill()
    try:
        assert "Traceback" not in err, err
        assert code == ExitStatus.OK, (out, err)
        assert "engine: ready" in out, out
    finally:
        run_sparktui("--config", str(config), "stop", timeout=120)


def test_link_cut_longer_than_the_grace_fails_and_undoes(make_testbed: Callable[..., Testbed],
                                                         tmp_path: Path) -> None:
    bed = make_testbed()
    config = _config(bed, tmp_path, grace=5.0)
    start = Start(config)
    try:
        start.until(lambda line: HEAD_RAY_RUNNING in line and "..." in line)
        bed.link_down("spark2")
        code, out, err = start.finish()
    finally:
        bed.link_up("spark2")
        if start.proc.poll() is None:
            start.proc.kill()
    assert "Traceback" not in err, err
    assert code == ExitStatus.NOT_WELL, (out, err)
    assert "spark2" in out and "link lost" in out and "5 s" in out, out
    assert "undone" in out, out
    _nothing_left(bed)


def test_a_persons_stop_during_start_wait_is_reported_as_a_stop(make_testbed: Callable[..., Testbed],
                                                                tmp_path: Path) -> None:
    bed = make_testbed()
    config = _config(bed, tmp_path, grace=5.0, pace=20.0)
    start = Start(config)
    try:
        start.until(lambda line: "stage" in line)
        stop = run_sparktui("--config", str(config), "stop", timeout=120)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        code, out, err = start.finish()
    finally:
        if start.proc.poll() is None:
            start.proc.kill()
    assert "Traceback" not in err, err
    assert code == ExitStatus.STOPPED, (out, err)
    assert "engine: stopped: stopped by `sparktui stop`" in out, out
    assert "exited before it was ready" not in out, out
