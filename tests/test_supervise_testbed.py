"""`sparktui supervise` on the test bed (real sshd, real Ray, the stand-in engine), no dashboard open: it
adopts a serving engine without restarting it, restarts a crashed one until a completion answers again,
never undoes a person's stop, starts at "boot" an engine whose desired state is serving, and ends on
SIGTERM leaving the engine serving."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import run_sparktui
from tests.supervise_helpers import STANDIN, Supervise, serves, setup, start_wait, vllm_running
from tests.test_engine_truth_testbed import kill_ours
from tests.testbed import Testbed
from tests.waiting import wait_until_sync

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

__all__ = ["setup"]   # the fixture, shared with the other supervise test files


def test_adopts_restarts_a_crash_and_honours_a_persons_stop(setup: tuple[Testbed, Path, int]) -> None:
    bed, config, port = setup
    start_wait(config)
    supervisor = Supervise(config)
    try:
        supervisor.wait(lambda line: line.get("event") == "state" and line.get("state") == "ready",
                        "the serving engine adopted")
        supervisor.wait(lambda line: line.get("event") == "desired" and line.get("state") == "serving",
                        "the desired state read from the head", timeout=30)
        assert not supervisor.decisions("restart") and not supervisor.decisions("start")

        bed.exec("spark1", ["pkill", "-KILL", "-f", STANDIN])
        killed = time.monotonic()
        wait_until_sync(lambda: not serves(bed, port), "the engine down", timeout=30)
        supervisor.wait(lambda line: line.get("event") == "decision" and line.get("cause") == "crashed"
                        and line.get("action") == "restart", "a restart for the crash")
        wait_until_sync(lambda: serves(bed, port), "a completion answered again", timeout=180, interval=1)
        print(f"crash → serving again after {time.monotonic() - killed:.1f} s")

        stop = run_sparktui("--config", str(config), "stop", timeout=300)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        supervisor.wait(lambda line: line.get("event") == "desired" and line.get("state") == "stopped",
                        "the person's stop seen", timeout=30)
        supervisor.wait(lambda line: line.get("event") == "decision" and line.get("action") == "hold",
                        "the stopped engine left stopped", timeout=30)
        after_stop = supervisor.lines.index(supervisor.decisions("hold")[-1])
        assert not [line for line in supervisor.lines[after_stop:]
                    if line.get("event") == "decision" and line.get("action") in ("start", "restart")]
        assert not vllm_running(bed)
    finally:
        assert supervisor.end() == 0
    assert supervisor.seen(lambda line: line.get("event") == "ended")
    supervisor.ended(bed)


def supervisor_in_status(config: Path) -> dict[str, Any] | None:
    out = run_sparktui("--config", str(config), "status", "--json", timeout=120)
    report: dict[str, Any] | None = json.loads(out.stdout)["supervisor"]
    return report


def test_at_boot_starts_what_should_serve_and_sigterm_leaves_it_serving(
        setup: tuple[Testbed, Path, int], tmp_path: Path) -> None:
    """Also: the head "rebooted" — a boot id other than its own in the supervisor's record on the head (its
    /proc is real; the record is what the supervisor remembers across its own restart) — is looked into and
    kept as an incident; ``status`` shows the supervisor while it runs, and "ended" after its SIGTERM."""
    from sparktui.config import load_config
    from sparktui.domain.lifecycle.presence_file import SUPERVISOR_FILE
    from sparktui.domain.presence import SupervisorPresence
    from sparktui.node import source

    bed, config, port = setup
    start_wait(config)
    for name in ("spark1", "spark2"):   # "the head rebooted": nothing of ours runs; the desired state stays
        kill_ours(bed, name)
    wait_until_sync(lambda: not vllm_running(bed), "nothing of ours on the head", timeout=30)
    before = SupervisorPresence("spark1", 1, time.time() - 3600, time.time() - 600,
                                boot_ids={"spark1": "the-boot-before"})
    record = f"{load_config(config).engine.state_dir}/{SUPERVISOR_FILE}"
    wrote = bed.exec("spark1", ["python3", "-c", source("json_file"), "write", record, before.to_json()])
    assert wrote.returncode == 0, wrote.stderr
    supervisor = Supervise(config, tmp_path / "state")
    try:
        # The head's vLLM left its pid file behind: seen as exited unasked, so what is up is stopped first.
        supervisor.wait(lambda line: line.get("event") == "decision"
                        and line.get("action") in ("start", "restart"), "the boot's start", timeout=120)
        supervisor.wait(lambda line: line.get("event") == "rebooted" and line.get("node") == "spark1",
                        "the head's reboot looked into", timeout=180)
        wait_until_sync(lambda: serves(bed, port), "serving after the boot's start", timeout=180, interval=1)
        seen = supervisor_in_status(config)
        assert seen is not None and seen["live"] and seen["text"].startswith("supervised by"), seen
        assert seen["pid"] == supervisor.proc.pid
    finally:
        code = supervisor.end()
    assert code == 0
    assert serves(bed, port), "SIGTERM of the supervisor must leave the engine serving"
    supervisor.ended(bed)
    seen = supervisor_in_status(config)
    assert seen is not None and seen["ended"] and not seen["live"], seen
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    listed = json.loads(run_sparktui("incidents", "--json", env=env).stdout)["incidents"]
    [rebooted] = [i for i in listed if i["cause"] == "rebooted"]
    assert rebooted["node"] == "spark1" and rebooted["action"] == "recorded", rebooted
    assert "previous boot" in rebooted["detail"], rebooted
    assert {"postmortem-spark1.json", "kernel-spark1.txt"} <= {f["name"] for f in rebooted["files"]}
    out = run_sparktui("--config", str(config), "stop", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_unit_runs_this_config(setup: tuple[Testbed, Path, int]) -> None:
    _bed, config, _port = setup
    out = run_sparktui("--config", str(config), "supervise", "--unit", timeout=60)
    assert out.returncode == 0
    assert f"--config {config.resolve()} supervise" in out.stdout and "WantedBy=default.target" in out.stdout
    assert "KillMode=mixed" in out.stdout and "Restart=on-failure" in out.stdout
    system = subprocess.run(["systemd-analyze", "--version"], capture_output=True, text=True)
    if system.returncode == 0:
        unit = config.parent / "sparktui-supervise.service"
        unit.write_text(out.stdout)
        check = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
        assert "Unknown" not in check.stderr and "Invalid" not in check.stderr, check.stderr


def evidence_ok(report: dict[str, Any]) -> None:
    """Every piece of evidence there, none empty; the supervisor's telemetry among them."""
    names = {f["name"] for f in report["files"]}
    assert {"vllm-spark1.log", "ray-spark1.log", "ray-spark2.log", "stacks-spark1.txt", "stacks-spark2.txt",
            "kernel-spark1.txt", "kernel-spark2.txt", "nccl.txt", "ray-nodes.txt", "argv.txt",
            "timeline.txt", "telemetry.jsonl"} <= names, names
    assert all(f["size"] > 0 for f in report["files"]), report["files"]


def test_a_wedge_is_kept_as_an_incident_then_restarted(setup: tuple[Testbed, Path, int],
                                                       tmp_path: Path) -> None:
    bed, config, port = setup
    start_wait(config)
    supervisor = Supervise(config, tmp_path / "state")
    try:
        supervisor.wait(lambda line: line.get("event") == "state" and line.get("state") == "ready",
                        "the serving engine adopted")
        bed.exec("spark1", ["pkill", "-USR1", "-f", STANDIN])
        serves(bed, port)    # a request that hangs: the wedge rule needs one running
        supervisor.wait(lambda line: line.get("event") == "incident" and line.get("cause") == "wedged",
                        "the wedge's incident", timeout=240)
        wait_until_sync(lambda: serves(bed, port), "serving again after the wedge", timeout=180, interval=1)
        # Ready again after the incident (the ready before the wedge does not count): the time to serving
        # again is recorded at that moment, before the line is said.
        incident_at = supervisor.lines.index(supervisor.seen(lambda x: x.get("event") == "incident")[0])
        supervisor.wait(lambda line: line.get("event") == "state" and line.get("state") == "ready"
                        and supervisor.lines.index(line) > incident_at, "ready after the restart",
                        timeout=240)
    finally:
        assert supervisor.end() == 0
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    listed = json.loads(run_sparktui("incidents", "--json", env=env).stdout)["incidents"]
    said = ([{k: i.get(k) for k in ("cause", "action", "detail", "node")} for i in listed],
            [line for line in supervisor.lines if line.get("event") in ("state", "decision", "incident")])
    # Oldest first. The wedge's incident and its restart; once in a CI run (two cores, a docker test bed
    # beside it) Ray then lost the worker during the restart, and the supervisor rightly kept that as an
    # incident of its own and restarted every rank: allowed, and shown if it happens.
    wedge = listed[0]
    assert wedge["cause"] == "wedged" and wedge["action"] == "restart", said
    assert all(i["cause"] == "worker_lost" and i["action"] == "full_restart" for i in listed[1:]), said
    if len(listed) > 1:
        print("after the wedge's restart:", said)
    evidence_ok(wedge)
    wait_until_sync(lambda: json.loads(run_sparktui("incidents", "--json", env=env).stdout)["incidents"][-1]
                    ["serving_again_s"] is not None, "the time to serving again recorded", timeout=30)
    assert run_sparktui("--config", str(config), "stop", timeout=300).returncode == 0
