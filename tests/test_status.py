"""`sparktui status` as a user runs it: the real CLI in a subprocess against the test hosts."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import pytest

from sparktui.remote.transport import CommandResult, RemoteProcess
from tests.cli_helpers import run_sparktui
from tests.conftest import MakeTestbed
from tests.harness import open_harness, start_ready
from tests.lifecycle_helpers import lifecycle_config
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


def test_a_nodes_raylet_is_found_in_its_processes_by_the_probes_rule() -> None:
    from sparktui.commands.status import raylet_running

    raylet = ("/opt/venv/lib/python3.12/site-packages/ray/core/src/ray/raylet/raylet "
              "--raylet_socket_name=/tmp/ray/session_2026/sockets/raylet --store_socket_name=/tmp/ray/plasma")
    others = [{"pid": 7, "cmdline": "/opt/venv/bin/python -m ray.util.client.server --port 10001"},
              {"pid": 8, "cmdline": "ray::RayWorkerWrapper"},
              {"pid": 9, "cmdline": "tail -F /home/u/.cache/sparktui/raylet.out"}]
    assert raylet_running([*others, {"pid": 6, "cmdline": raylet}])
    assert not raylet_running(others)
    assert not raylet_running([])


def _steady(report: Any) -> Any:
    """A report without what changes from one reading to the next (times, rates, retry countdowns)."""
    volatile = {"seconds", "uptime_seconds", "sample", "retry_in", "attempts"}
    if isinstance(report, dict):
        return {k: _steady(v) for k, v in report.items() if k not in volatile}
    if isinstance(report, list):
        return [_steady(v) for v in report]
    return report


@pytest.mark.testbed
@pytest.mark.ray
async def test_status_asks_each_node_one_command_and_says_what_the_previous_way_said(
        testbed: Testbed, monkeypatch: pytest.MonkeyPatch) -> None:
    """At ready (real Ray, the stand-in engine): one remote command per node after connecting — counted on
    the SSH transport itself — and the same report as the several commands per node of before."""
    from sparktui.commands.status import gather_status
    from sparktui.remote.ssh import SSHTransport
    from sparktui.remote.status_round import status_round

    runs: dict[str, list[str]] = {}
    real_run, real_start = SSHTransport.run, SSHTransport.start

    async def counted_run(self: SSHTransport, argv: Sequence[str], **kw: Any) -> CommandResult:
        runs.setdefault(self.name, []).append(argv[0])
        return await real_run(self, argv, **kw)

    async def counted_start(self: SSHTransport, argv: Sequence[str], **kw: Any) -> RemoteProcess:
        runs.setdefault(self.name, []).append(argv[0])
        return await real_start(self, argv, **kw)

    async with open_harness(testbed, lifecycle_config(testbed, pace=1.0)) as h:
        await start_ready(h)
        config = h.config
        previous = await gather_status(config, timeout=60, one_round=False)
        monkeypatch.setattr(SSHTransport, "run", counted_run)
        monkeypatch.setattr(SSHTransport, "start", counted_start)
        report = await gather_status(config, timeout=60)
        monkeypatch.undo()
        head = await status_round(config, config.head, h.transports["spark1"])
    assert head.ray_note == ""  # Ray's node list came over gRPC (no `import ray` on the head)
    assert head.ray is not None and [n.alive for n in head.ray.nodes] == [True, True]
    assert {name: len(argvs) for name, argvs in runs.items()} == {"spark1": 1, "spark2": 1}, runs
    engine = report["engine"]
    assert report["all_reachable"] and engine["state"] == "ready", engine
    assert engine["ray_ready"] is True and len(engine["ray"]["nodes"]) == 2, engine["ray"]
    assert engine["timeline"]["outcome"] == "ready" and engine["vllm"]["spark1"]["status"] == "running"
    assert all("error" not in n["sample"] for n in report["nodes"]), report["nodes"]
    # The head's records (the supervisor's presence, the image an upgrade promoted, the last upgrade) came
    # with the one round; the several commands of before never read them.
    records = ("supervisor", "image", "upgrade")
    # The serving pace (the engine's /metrics against the last benchmark) is the one round's alone too.
    assert engine.pop("pace")["verdict"] is None
    assert _steady({k: v for k, v in report.items() if k not in records}) == _steady(previous)
