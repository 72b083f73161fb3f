"""The headless verbs: `sparktui start|stop|restart [--wait] [--json] [--dry-run]`, `sparktui logs`, and the
engine part of `sparktui status --json`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import run_sparktui
from tests.lifecycle_helpers import lifecycle_overrides, make_model_dirs
from tests.testbed import Testbed

REPO = Path(__file__).resolve().parent.parent


def sparktui(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return run_sparktui(*args, timeout=timeout)


def test_dry_run_prints_every_command_and_touches_nothing() -> None:
    out = sparktui("--config", str(REPO / "config.toml"), "restart", "--dry-run", timeout=60)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.index("# sparktui stop") < text.index("# sparktui start")
    assert "docker run -d --name sparktui-ray-head --init --network host" in text
    # (the worker's start through the join script: it waits for the head's node in the GCS, then runs it)
    assert ("docker exec sparktui-ray-spark2 timeout -k 5 120 python3 -c '<ray-join.py>' 192.168.100.10 6379 "
            "120 0.05 ray start --address 192.168.100.10:6379") in text
    assert "--distributed-executor-backend ray" in text and "docker rm -f sparktui-ray-spark2" in text


@pytest.mark.testbed
@pytest.mark.ray
def test_start_wait_logs_status_stop(testbed: Testbed, tmp_path: Path) -> None:
    make_model_dirs(testbed)
    config = testbed.write_config(tmp_path / "config.toml", **lifecycle_overrides(testbed))
    c = ("--config", str(config))
    try:
        # Stop when nothing runs is a success.
        stop = sparktui(*c, "stop", "--json")
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert json.loads(stop.stdout)["operation"]["ok"] is True

        start = sparktui(*c, "start", "--wait")
        assert start.returncode == 0, start.stdout + start.stderr
        assert "ok     spark1     ray start (head): Ray runtime started." in start.stdout
        assert "stage  weights" in start.stdout
        assert "engine: ready: Application startup complete." in start.stdout

        logs = sparktui(*c, "logs", timeout=60)
        assert logs.returncode == 0 and "Application startup complete." in logs.stdout
        worker_log = sparktui(*c, "logs", "--node", "spark2", timeout=60)
        assert worker_log.returncode == 0, worker_log.stderr

        status = sparktui(*c, "status", "--json", timeout=120)
        engine = json.loads(status.stdout)["engine"]
        assert engine["state"] == "ready" and engine["vllm"]["spark1"]["status"] == "running", engine
        assert engine["ray_ready"] is True
    finally:
        stop = sparktui(*c, "stop", "--json")
    report = json.loads(stop.stdout)
    assert report["operation"]["ok"] is True, report
    assert {s["name"] for s in report["operation"]["steps"]} >= {"stop vLLM", "stop Ray", "nothing left"}


@pytest.mark.testbed
@pytest.mark.ray
def test_testbed_up_config_starts_to_ready_as_it_is() -> None:
    """`python -m tests.testbed up` prints a config that starts unchanged: the model directory it names
    exists on every host (a hand-built test bed used to fail preflight before anything started)."""
    from tests.conftest import _require_testbed

    _require_testbed()
    up = subprocess.run([sys.executable, "-m", "tests.testbed", "up", "--pace", "4"],
                        capture_output=True, text=True,
                        cwd=REPO, timeout=120)
    assert up.returncode == 0, up.stderr
    bed_id = re.search(r"^# test bed (\S+):", up.stdout, re.M)
    config = re.search(r"^# config: (\S+)$", up.stdout, re.M)
    assert bed_id and config, up.stdout
    c = ("--config", config.group(1))
    try:
        start = sparktui(*c, "start", "--wait", timeout=480)
        assert start.returncode == 0, start.stdout + start.stderr
        assert "preflight: model files: 2 files" in start.stdout
        assert "engine: ready: Application startup complete." in start.stdout
    finally:
        sparktui(*c, "stop", timeout=120)
        subprocess.run([sys.executable, "-m", "tests.testbed", "down", bed_id.group(1)], cwd=REPO,
                       timeout=120, check=False)
