"""Each exit status means one thing (``sparktui.commands.exit_status``): a refusal because another operation
holds the lock is BUSY (5), not "not implemented" nor "failed"."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from sparktui.commands.exit_status import ExitStatus
from sparktui.config import load_config
from sparktui.domain.lifecycle.oplock import LockAnswer, LockHolder, take_argv
from tests.cli_helpers import run_sparktui
from tests.local_node import write_local_config


def test_the_statuses_are_the_documented_ones() -> None:
    assert {s.name: int(s) for s in ExitStatus} == {
        "OK": 0, "NOT_WELL": 1, "USAGE": 2, "NOT_IMPLEMENTED": 3, "CANNOT_SERVE": 4, "BUSY": 5, "STOPPED": 6,
        "ROLLED_BACK": 7, "REFUSED": 8, "INTERRUPTED": 130, "BROKEN_PIPE": 141}
    assert ExitStatus.of(True) is ExitStatus.OK and ExitStatus.of(False) is ExitStatus.NOT_WELL


def test_a_start_refused_because_another_operation_holds_the_lock_exits_busy(tmp_path: Path) -> None:
    path = write_local_config(tmp_path / "config.toml", "busy-test")
    config = load_config(path)
    holder = LockHolder("restart", "`sparktui restart`", "laptop2", 4242, time.time())
    # The real lock script, run here as the head (a local node) runs it: held while its stdin is open.
    lock = subprocess.Popen(take_argv(config, None, holder), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert lock.stdout is not None
        assert LockAnswer.parse(lock.stdout.readline().decode()) == LockAnswer("taken", None)
        out = run_sparktui("--config", str(path), "start", "--no-preflight")
        assert out.returncode == ExitStatus.BUSY, out.stdout + out.stderr
        assert "cannot start: restart by `sparktui restart` on laptop2 (pid 4242)" in out.stderr
        assert "is running; wait for it to finish" in out.stderr
    finally:
        assert lock.stdin is not None
        lock.stdin.close()
        lock.wait(timeout=10)
