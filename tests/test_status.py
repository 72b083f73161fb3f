"""`sparktui status` as a user runs it: the real CLI in a subprocess against the test hosts."""

from __future__ import annotations

import json
import os

import pytest

from tests.cli_helpers import run_sparktui
from tests.conftest import MakeTestbed
from tests.testbed import Testbed


@pytest.mark.testbed
def test_status_json_reports_both_hosts_reachable(testbed: Testbed) -> None:
    proc = run_sparktui("status", "--json", "--config", str(testbed.config_path))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["all_reachable"] is True
    nodes = {n["name"]: n for n in report["nodes"]}
    assert [n["name"] for n in report["nodes"]] == ["spark1", "spark2"]
    for name in ("spark1", "spark2"):
        node = nodes[name]
        assert node["reachable"] is True
        assert node["hostname"] == name
        assert node["ssh"]["phase"] == "connected"
        assert node["kernel"] == os.uname().release  # the hosts share this kernel
        assert node["uptime_seconds"] > 0


@pytest.mark.testbed
def test_status_table_and_exit_status(testbed: Testbed) -> None:
    proc = run_sparktui("status", "--config", str(testbed.config_path))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:3] == ["NODE", "ROLE", "SSH"]
    assert lines[1].split()[:4] == ["spark1", "head", "connected", "spark1"]
    assert lines[2].split()[:4] == ["spark2", "worker", "connected", "spark2"]
    assert "2/2 nodes reachable" in proc.stdout


@pytest.mark.testbed
def test_status_with_a_host_down_exits_1_and_says_why(make_testbed: MakeTestbed) -> None:
    bed = make_testbed()
    bed.kill_sshd("spark2")
    proc = run_sparktui("status", "--json", "--timeout", "15", "--config", str(bed.config_path))
    assert proc.returncode == 1
    nodes = {n["name"]: n for n in json.loads(proc.stdout)["nodes"]}
    assert nodes["spark1"]["reachable"] and nodes["spark1"]["hostname"] == "spark1"
    assert not nodes["spark2"]["reachable"]
    assert nodes["spark2"]["ssh"]["phase"] == "retrying"
    assert "connection refused" in nodes["spark2"]["ssh"]["last_error"]


def test_shipped_example_config_points_to_the_demo() -> None:
    proc = run_sparktui("status")  # ./config.toml is the repo's example
    assert proc.returncode == 2
    assert "example" in proc.stderr and "--demo" in proc.stderr


def test_exit_status_says_when_the_engine_cannot_serve() -> None:
    from sparktui.commands.status import exit_code, render

    nodes = [{"name": "spark1", "role": "head", "reachable": True, "ssh": {"phase": "connected"},
              "hostname": "spark1", "kernel": "6.11", "uptime_seconds": 60.0}]
    report = {"cluster": "c", "all_reachable": True, "nodes": nodes,
              "engine": {"state": "degraded", "detail": "degraded: Ray lost spark2 (10.0.0.2) at 10:02:13"}}
    assert exit_code(report) == 4
    assert "engine: degraded — degraded: Ray lost spark2" in render(report)
    assert exit_code({**report, "engine": {"state": "wedged", "detail": "wedged: …"}}) == 4
    assert exit_code({**report, "engine": {"state": "ready", "detail": ""}}) == 0
    assert exit_code({**report, "all_reachable": False}) == 1
