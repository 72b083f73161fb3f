"""Incidents without a node: the record (ids sorted by time, JSON round trip), the store's retention by
count and by size, the evidence files' words, the node-side reader run here on a real tagged process, and
`sparktui incidents` listing and showing (an unknown id: exit 2 naming the ids there are)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui import node
from sparktui.config import parse_config
from sparktui.domain import evidence_files as F
from sparktui.domain.incidents import (
    Incident,
    IncidentStore,
    UnknownIncident,
    incident_id,
    is_incident_id,
)
from tests.cli_helpers import run_sparktui
from tests.waiting import wait_until_sync


def make(store: IncidentStore, at: float, size: int = 10, cause: str = "crashed") -> Incident:
    incident = Incident(id=store.new_id(at), at=at, cause=cause, node="spark2", detail="vLLM exited 137")
    return store.save(incident, {"vllm-spark1.log": b"x" * size, "nccl.txt": b"NCCL_DEBUG=INFO\n"})


def test_ids_sort_by_time_and_two_in_one_millisecond_differ(tmp_path: Path) -> None:
    store = IncidentStore(tmp_path)
    times = [1_780_000_000.0, 1_780_000_000.5, 1_780_000_061.0, 1_790_000_000.0]
    ids = [make(store, t).id for t in reversed(times)]
    assert sorted(ids) == list(reversed(ids))           # later moment → larger id
    assert store.ids() == sorted(ids)
    assert incident_id(1_780_000_000.123) == "20260528-202640-123"
    twin = make(store, 1_790_000_000.0)
    assert twin.id == incident_id(1_790_000_000.0) + "-1" and is_incident_id(twin.id)
    assert not is_incident_id("../etc") and not is_incident_id("20260528-202640")


def test_the_record_round_trips_and_lists_its_files_with_their_sizes(tmp_path: Path) -> None:
    store = IncidentStore(tmp_path)
    saved = make(store, 1_780_000_000.0, size=1234)
    assert {(f.name, f.size) for f in saved.files} == {("vllm-spark1.log", 1234), ("nccl.txt", 16)}
    again = store.get(saved.id)
    assert again == saved
    assert Incident.from_json(json.loads(json.dumps(saved.to_json()))) == saved
    assert saved.to_json()["time"].startswith("2026-")
    assert (tmp_path / saved.id / "vllm-spark1.log").read_bytes() == b"x" * 1234
    updated = store.update(saved.id, action="restart vllm", serving_again_s=21.5)
    assert store.get(saved.id) == updated and updated.serving_again_s == 21.5
    assert updated.action == "restart vllm" and updated.files == saved.files
    with pytest.raises(ValueError):
        Incident.from_json({"id": "x"})
    with pytest.raises(ValueError, match="not an evidence file name"):
        store.save(Incident(id=store.new_id(1.0), at=1.0, cause="x"), {"../escape": b""})


def test_an_unknown_id_names_the_ids_there_are(tmp_path: Path) -> None:
    store = IncidentStore(tmp_path)
    first = make(store, 1_780_000_000.0)
    with pytest.raises(UnknownIncident) as caught:
        store.get("20990101-000000-000")
    assert caught.value.known == (first.id,)


def test_retention_removes_the_oldest_by_count_then_by_size_never_the_newest(tmp_path: Path) -> None:
    store = IncidentStore(tmp_path, keep=3, max_size=10_000)
    made = [make(store, 1_780_000_000.0 + i, size=100) for i in range(5)]
    assert store.ids() == [i.id for i in made[-3:]]       # count: the 3 newest
    big = IncidentStore(tmp_path, keep=50, max_size=2_500)
    newest = make(big, 1_780_000_100.0, size=2_400)       # over the bound with any other one
    assert big.ids() == [newest.id]
    huge = make(big, 1_780_000_200.0, size=5_000)         # alone over the bound: still kept
    assert big.ids() == [huge.id]
    # A half-written folder (a crash during save) is never listed.
    (tmp_path / ".new-abc").mkdir()
    (tmp_path / "20260101-000000-000").mkdir()
    assert big.ids() == [huge.id]


def test_the_incidents_config_has_defaults_and_takes_sizes() -> None:
    base = {"nodes": [{"name": "a", "host": "10.0.0.1", "role": "head"}],
            "engine": {"model": "/m", "tensor_parallel_size": 1}}
    config = parse_config(base)
    assert config.incidents.keep == 50 and int(config.incidents.max_size) == 200 * 1024 * 1024
    config = parse_config({**base, "incidents": {"keep": 5, "max_size": "1MiB", "log_lines": 100}})
    assert (config.incidents.keep, int(config.incidents.max_size)) == (5, 1024 * 1024)


def test_the_stacks_file_says_clearly_when_py_spy_is_missing_and_keeps_proc() -> None:
    answer = {"node": "spark2", "stacks": {"tool": None, "missing": "py-spy not found on spark2 (…)"},
              "processes": [{"pid": 7, "argv": ["python", "-m", "vllm"], "state": "S (sleeping)",
                             "wchan": "futex_wait_queue", "started_at": 1_780_000_000.0, "env": {}}]}
    text = F.stacks_text(answer)
    assert text.startswith("py-spy not found on spark2")
    assert "pid 7  state S (sleeping)  wchan futex_wait_queue" in text and "argv: python -m vllm" in text


def test_the_kernel_file_falls_back_to_dmesg_and_says_so() -> None:
    report = {"current": {"error": "no journalctl: No such file or directory"}}
    dmesg = F.dmesg_matching("boot\n[ 9.1] Out of memory: Killed process 42 (python)\nother\n",
                             ["Out of memory"])
    text = F.kernel_text("spark1", report, dmesg, 1_780_000_000.0)
    assert "journal not read: no journalctl" in text and "Killed process 42" in text
    assert "none: no OOM kill" in F.kernel_text("spark1", {"current": {"lines": []}}, None, None)


def test_nccl_and_argv_files_show_the_environment_and_the_running_argv() -> None:
    answers = {"spark1": {"vllm_log": {"path": "/s/vllm.log", "nccl": ["NCCL INFO Channel 00"]},
                          "processes": [{"pid": 5, "argv": ["vllm", "serve", "/m"],
                                         "env": {"NCCL_IB_HCA": "x"}},
                                        {"pid": 6, "argv": ["ray::RayWorkerWrapper"],
                                         "env": {"NCCL_IB_HCA": "x"}}]}}
    nccl = F.nccl_text(answers)
    assert "NCCL INFO Channel 00" in nccl and "pid 5, 6" in nccl and "NCCL_IB_HCA=x" in nccl
    argv = F.argv_text(answers, {"spark1": ["vllm", "serve", "/m", "--tensor-parallel-size", "2"]})
    assert "pid 5: vllm serve /m" in argv and "ray::" not in argv and "--tensor-parallel-size 2" in argv


def test_the_node_reader_stands_alone_and_reads_a_tagged_process(tmp_path: Path) -> None:
    """The shipped script (3.8 grammar, nothing of sparktui) run here: the log's tail and NCCL lines, a Ray
    session's worker log, a tagged process's argv/state/wchan and NCCL env, py-spy missing said clearly."""
    text = node.source("evidence")
    ast.parse(text, feature_version=(3, 8))
    assert "import sparktui" not in text and "from sparktui" not in text
    log = tmp_path / "vllm.log"
    log.write_text("".join(f"INFO line {i}\n" for i in range(50)) + "NCCL WARN timeout\nlast\n")
    logs = tmp_path / "ray" / "session_2026-12-04_10-00-00_1" / "logs"
    logs.mkdir(parents=True)
    (logs / "worker-aa-01000000-77.err").write_text(":actor_name:RayWorkerWrapper\nstarted\n")
    (logs / "raylet.out").write_text("raylet up\n")
    tag = f"test-evidence/{os.getpid()}"
    env = {**os.environ, "SPARKTUI_TAG": tag, "NCCL_SOCKET_IFNAME": "enp1s0", "UCX_TLS": "tcp",
           "PATH": "/usr/bin:/bin"}   # no py-spy there
    # A py-spy stand-in on the PATH of the second reading: what it prints lands in the stacks file.
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "py-spy").write_text('#!/bin/sh\necho "Thread 1 (idle): MainThread, dumped $*"\n')
    (tools / "py-spy").chmod(0o755)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        cwd = tmp_path / "cwd"
        cwd.mkdir()
        # The tag is in the sleeper's environment as soon as it exists.
        wait_until_sync(lambda: Path(f"/proc/{sleeper.pid}/cmdline").read_bytes(), "the sleeper's argv")
        argv = [sys.executable, "-I", "-c", text, "spark1", tag, str(log), "10", str(tmp_path / "ray"), ""]
        out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, env=env, check=True)
        with_tool = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, check=True,
                                   env={**env, "PATH": f"{tools}:/usr/bin:/bin"})
    finally:
        sleeper.kill()
        sleeper.wait()
    report = json.loads(out.stdout)
    assert report["vllm_log"]["lines"][-1] == "last" and len(report["vllm_log"]["lines"]) == 10
    assert report["vllm_log"]["nccl"] == ["NCCL WARN timeout"]
    names = [f["name"] for f in report["ray_logs"]["files"]]
    assert names == ["raylet.out", "worker-aa-01000000-77.err"]
    (proc,) = report["processes"]
    assert proc["pid"] == sleeper.pid and proc["argv"][1] == "-c" and proc["state"]
    assert proc["env"] == {"NCCL_SOCKET_IFNAME": "enp1s0", "UCX_TLS": "tcp"}
    assert proc["started_at"] > 1_700_000_000
    assert report["stacks"]["missing"].startswith("py-spy not found on spark1")
    stacks = F.stacks_text(report)
    assert f"pid {sleeper.pid}" in stacks and "pip install py-spy" in stacks
    dumped = F.stacks_text(json.loads(with_tool.stdout))
    assert dumped.startswith(f"stack dumps by {tools}/py-spy:\n==> pid {sleeper.pid} <==\n")
    assert f"MainThread, dumped dump --pid {sleeper.pid}" in dumped


def test_incidents_lists_shows_and_refuses_an_unknown_id(tmp_path: Path) -> None:
    store = IncidentStore(tmp_path)
    saved = make(store, 1_780_000_000.0, size=300)
    store.update(saved.id, action="restart", serving_again_s=23.0)
    listed = run_sparktui("incidents", "--dir", str(tmp_path), "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)["incidents"]
    assert (row["id"], row["cause"], row["node"], row["action"], row["serving_again_s"]) == \
        (saved.id, "crashed", "spark2", "restart", 23.0)
    assert {f["name"] for f in row["files"]} == {"vllm-spark1.log", "nccl.txt"}
    human = run_sparktui("incidents", "--dir", str(tmp_path))
    assert saved.id in human.stdout and "restart" in human.stdout and "23s" in human.stdout
    shown = run_sparktui("incidents", "--dir", str(tmp_path), "show", saved.id, "--json")
    assert json.loads(shown.stdout)["evidence"]["nccl.txt"] == "NCCL_DEBUG=INFO\n"
    text = run_sparktui("incidents", "--dir", str(tmp_path), "show", saved.id, "--lines", "3")
    assert "=== vllm-spark1.log (300 B; its last 3 lines) ===" in text.stdout
    unknown = run_sparktui("incidents", "--dir", str(tmp_path), "show", "20990101-000000-000")
    assert unknown.returncode == 2
    assert f"no incident '20990101-000000-000' (incidents kept: {saved.id})" in unknown.stderr


async def test_the_supervisors_keeper_takes_the_evidence_then_fills_in_the_outcome(tmp_path: Path) -> None:
    """One local node (no Ray, no engine): the incident is kept with what there is, the node's reader ran;
    the action and the time to serving again are filled in afterwards."""
    from sparktui.domain.supervise import Cause
    from sparktui.remote.evidence import IncidentKeeper
    from sparktui.remote.transport import LocalTransport

    config = parse_config({
        "nodes": [{"name": "a", "host": "127.0.0.1", "role": "head", "local": True}],
        "engine": {"model": "/m", "tensor_parallel_size": 1, "state_dir": str(tmp_path / "state"),
                   "ray_python": [sys.executable], "ray_start_args": ["--temp-dir", str(tmp_path / "ray")]},
        "incidents": {"node_timeout": 30},
    })
    clock = iter([1_780_000_000.0, 1_780_000_042.5])
    keeper = IncidentKeeper(config, lambda: {"a": LocalTransport("a")}, store=IncidentStore(tmp_path / "inc"),
                            timeline_text=lambda: "the timeline\n", clock=lambda: next(clock))
    await keeper(Cause.CRASHED, "a", "vLLM exited 137")
    keeper.acted("restart vllm")
    keeper.serving_again()
    (incident,) = keeper.store.all()
    assert (incident.cause, incident.node, incident.action, incident.serving_again_s) == \
        ("crashed", "a", "restart vllm", 42.5)
    names = {f.name for f in incident.files}
    assert {"vllm-a.log", "ray-a.log", "stacks-a.txt", "nccl.txt", "ray-nodes.txt", "argv.txt",
            "config.json", "timeline.txt"} <= names, names
    folder = keeper.store.root / incident.id
    assert "not readable" in (folder / "vllm-a.log").read_text()
    assert (folder / "timeline.txt").read_text() == "the timeline\n"
    assert keeper.open is None
