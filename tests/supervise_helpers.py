"""What the supervisor's test-bed tests share: ``sparktui supervise --json`` as a child and its lines,
whether the engine serves (a completion answered), the stand-in on the head, a bed set up for it."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import REPO, run_sparktui
from tests.leftovers import helpers_left, processes
from tests.lifecycle_helpers import lifecycle_overrides, make_model_dirs
from tests.testbed import Testbed
from tests.waiting import wait_until_sync

STANDIN = "sparktui.sim.vllm_standin serve"


class Supervise:
    """``sparktui supervise --json`` as a child; its lines read as they come (its incidents kept under
    ``state`` when given, never in the user's state directory)."""

    def __init__(self, config: Path, state: Path | None = None) -> None:
        env = {**os.environ, "XDG_STATE_HOME": str(state or config.parent / "state")}
        self.proc = subprocess.Popen([sys.executable, "-m", "sparktui", "--config", str(config), "supervise",
                                      "--json"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.lines.append(json.loads(line))
            except ValueError:
                self.lines.append({"event": "text", "detail": line.rstrip()})

    def seen(self, test: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        return [line for line in list(self.lines) if test(line)]

    def wait(self, test: Callable[[dict[str, Any]], bool], what: str, timeout: float = 120) -> None:
        wait_until_sync(lambda: self.seen(test), what, timeout=timeout, interval=0.2,
                        state=lambda: "\n".join(json.dumps(line) for line in self.lines))

    def decisions(self, action: str) -> list[dict[str, Any]]:
        return self.seen(lambda line: line.get("event") == "decision" and line.get("action") == action)

    def end(self, sig: int = signal.SIGTERM) -> int:
        """Ends it; nothing it started on this machine outlives it (its node-side helpers: ``ended``)."""
        children = descendants(self.proc.pid)
        self.proc.send_signal(sig)
        code = self.proc.wait(30)
        wait_until_sync(lambda: not [pid for pid in children if Path(f"/proc/{pid}").exists()],
                        "the supervisor's children ended with it", timeout=10, interval=0.2)
        return code

    def ended(self, bed: Testbed) -> None:
        assert not helpers_left(bed), "node-side helpers of the supervisor outlived it"


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` now (children of children too), from ``ps``."""
    parents: dict[int, list[int]] = {}
    listing = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout
    for line in listing.splitlines():
        child, parent = (int(field) for field in line.split())
        parents.setdefault(parent, []).append(child)
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def serves(bed: Testbed, port: int) -> bool:
    try:
        conn = http.client.HTTPConnection(bed.ip("spark1"), port, timeout=5)
        conn.request("POST", "/v1/chat/completions", body=json.dumps(
            {"model": "standin", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}),
            headers={"content-type": "application/json"})
        ok = conn.getresponse().status == 200
        conn.close()
        return ok
    except (OSError, http.client.HTTPException):
        return False


def vllm_running(bed: Testbed) -> bool:
    return any(STANDIN in line for line in processes(bed, "spark1"))


def supervised_bed(make_testbed: Callable[..., Testbed], tmp_path: Path, *, env: dict[str, str] | None = None,
                   **supervise: float) -> tuple[Testbed, Path, int]:
    """A bed with the model on each host and a config for it: a fast stand-in (``env`` added to the
    engine's), short supervise delays (``supervise`` overrides them); its config's path, the API port."""
    bed = make_testbed()
    make_model_dirs(bed)
    overrides = lifecycle_overrides(bed, pace=3.0, env=env or {})
    overrides["supervise"] = {"start_delay": 2.0, "worker_grace": 5.0, "max_restarts": 3, "window": 600.0,
                              **supervise}
    overrides["serving"] = {"wedge_seconds": 6.0}
    config = bed.write_config(tmp_path / "config.toml", **overrides)
    return bed, config, bed.spark_config(**overrides).engine.api_port


@pytest.fixture
def setup(make_testbed: Callable[..., Testbed], tmp_path: Path) -> tuple[Testbed, Path, int]:
    return supervised_bed(make_testbed, tmp_path)


def start_wait(config: Path) -> None:
    out = run_sparktui("--config", str(config), "start", "--wait", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr


