"""The node-side scripts of ``sparktui/node`` as they reach a node: their shipped text (helpers inlined),
run here by ``python -I -c`` from an empty directory (nothing of sparktui importable) against temp dirs
and fake sysfs trees with real names; Python 3.8's grammar accepts every one."""

from __future__ import annotations

import ast
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui import node
from sparktui.domain.lifecycle import scripts as S
from sparktui.domain.lifecycle.links import LinkFacts

SCRIPTS = ["tagged", "facts", "ray_probe", "follow", "ray_logs", "read", "link", "lock", "model_info", "host",
           "reach", "peer_reach", "gcs_wait", "ray_join", "status", "audit",
           "read_rate"]


def run(tmp_path: Path, name: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The shipped text of ``name`` as the node runs it: isolated (-I), from a directory without sparktui."""
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-I", "-c", node.source(name), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=check)


@pytest.mark.parametrize("name", SCRIPTS)
def test_shipped_text_stands_alone_and_parses_as_python_3_8(name: str) -> None:
    text = node.source(name)
    imports = [line for line in text.splitlines() if line.startswith(("import", "from"))]
    assert not [line for line in imports if "sparktui" in line]
    assert text.startswith("from __future__ import annotations\n")
    assert text.count("from __future__") == 1
    ast.parse(text, feature_version=(3, 8))


def test_a_helper_is_inlined_once_and_the_constants_are_the_shipped_text() -> None:
    assert node.source("tagged").count("def ours(") == 1
    assert node.source("follow").count("def end_with_stdin(") == 1
    assert node.source("tagged") == S.TAGGED_PY and node.source("lock") == S.LOCK_PY


def test_read_gives_the_tail_and_exit_3_when_missing(tmp_path: Path) -> None:
    f = tmp_path / "vllm.log"
    f.write_bytes(b"first\nsecond\nthird\n")
    assert run(tmp_path, "read", str(f)).stdout == "first\nsecond\nthird\n"
    assert run(tmp_path, "read", str(f), "6").stdout == "third\n"
    assert run(tmp_path, "read", str(tmp_path / "absent"), check=False).returncode == 3


def test_ray_logs_lists_the_newest_session_and_the_actor_markers(tmp_path: Path) -> None:
    temp = tmp_path / "ray"
    old = temp / "session_2026-12-01_09-00-00_000001_100" / "logs"
    new = temp / "session_2026-12-01_10-00-00_000001_200" / "logs"
    for d in (old, new):
        d.mkdir(parents=True)
    os.utime(old.parent, (1, 1))
    # session_latest points where Ray wrote it (inside a container): it does not resolve here.
    (temp / "session_latest").symlink_to("/tmp/ray-in-a-container/session_x")
    (new / "raylet.out").write_text("raylet\n")
    (new / "worker-0123-01000000-777.err").write_text(":job_id:01000000\n:actor_name:RayWorkerWrapper\nhi\n")
    out = json.loads(run(tmp_path, "ray_logs", str(temp)).stdout)
    assert out["dir"] == str(new.resolve())
    files = {f["name"]: f for f in out["files"]}
    assert files["raylet.out"]["size"] == 7
    worker = files["worker-0123-01000000-777.err"]
    assert (worker["actor"], worker["job"]) == ("RayWorkerWrapper", "01000000")
    missing = json.loads(run(tmp_path, "ray_logs", str(tmp_path / "none")).stdout)
    assert missing["files"] == [] and "error" in missing


def _fake_sys(root: Path) -> None:
    """A Spark's cable as sysfs shows it: two RDMA devices on one port each, RoCE v2 GIDs, the netdev."""
    for dev, netdev, state in (("rocep1s0f1", "enp1s0f1np1", "4: ACTIVE"), ("roceP2p1s0f1", "enP2p1s0f1np1",
                                                                           "1: DOWN")):
        port = root / "class" / "infiniband" / dev / "ports" / "1"
        (port / "gid_attrs" / "types").mkdir(parents=True)
        (port / "gid_attrs" / "ndevs").mkdir(parents=True)
        (port / "state").write_text(state + "\n")
        (port / "link_layer").write_text("Ethernet\n")
        (port / "rate").write_text("200 Gb/sec (2X NDR)\n")
        (port / "gid_attrs" / "types" / "0").write_text("IB/RoCE v1\n")
        (port / "gid_attrs" / "types" / "1").write_text("RoCE v2\n")
        (port / "gid_attrs" / "ndevs" / "0").write_text(netdev + "\n")
        net = root / "class" / "net" / netdev
        net.mkdir(parents=True)
        (net / "speed").write_text("200000\n")
        (net / "mtu").write_text("9000\n")
        (net / "operstate").write_text("up\n")


def test_link_reads_the_cable_and_asks_the_peers(tmp_path: Path) -> None:
    root = tmp_path / "sys"
    _fake_sys(root)
    listening = socket.create_server(("127.0.0.1", 0))
    try:
        port = listening.getsockname()[1]
        req = {"sys_root": str(root), "interface": "enp1s0f1np1", "peers": ["127.0.0.1"], "port": port}
        out = json.loads(run(tmp_path, "link", json.dumps(req)).stdout)
    finally:
        listening.close()
    ports = {p["device"]: p for p in out["rdma"]}
    assert ports["rocep1s0f1"]["state"] == "4: ACTIVE" and ports["rocep1s0f1"]["rocev2_gids"] == [1]
    assert ports["roceP2p1s0f1"]["netdev"] == "enP2p1s0f1np1"
    assert out["netdevs"]["enp1s0f1np1"] == {"exists": True, "speed": "200000", "mtu": "9000",
                                            "operstate": "up"}
    assert out["reach"] == {"127.0.0.1": "ok"} and out["source"] is None  # no such interface here
    LinkFacts.parse(json.dumps(out))  # what preflight's link checks read


def test_facts_reports_memory_ports_and_the_model_directory(tmp_path: Path) -> None:
    model = tmp_path / "model"
    (model / ".cache").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model-00001-of-00001.safetensors").write_bytes(b"\0" * 1000)
    (model / ".cache" / "skip").write_text("x")
    listening = socket.create_server(("127.0.0.1", 0))
    try:
        busy = listening.getsockname()[1]
        req = {"tag": "sparktui-test/none", "ports": [busy], "model_path": str(model)}
        out = json.loads(run(tmp_path, "facts", json.dumps(req)).stdout)
    finally:
        listening.close()
    assert out["hostname"] == socket.gethostname() and out["mem_total_kb"] > 0
    assert out["ports_busy"] == [busy] and out["processes"] == []
    assert out["model"]["exists"] and out["model"]["total_bytes"] == 1002
    assert sorted(f[0] for f in out["model"]["files"]) == ["config.json", "model-00001-of-00001.safetensors"]


def test_ray_probe_says_why_when_ray_cannot_be_imported(tmp_path: Path) -> None:
    # -S: no site-packages, as on a node whose python3 has no Ray.
    res = subprocess.run([sys.executable, "-I", "-S", "-c", node.source("ray_probe"), "127.0.0.1:1",
                          "127.0.0.1", "0.1", "1"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert res.returncode == 3
    assert res.stdout.startswith('RAYPROBE_ERROR {"error": "cannot import ray: No module named')


def test_model_info_scan_finds_the_hf_cache_snapshot_and_home_models(tmp_path: Path) -> None:
    home = tmp_path / "home"
    repo = home / ".cache" / "huggingface" / "hub" / "models--org--tiny"
    snap = repo / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    (snap / "config.json").write_text('{"model_type": "llama"}')
    (snap / "model.safetensors").write_bytes((16).to_bytes(8, "little") + b"{}" + b" " * 14)
    local = home / "models" / "mine"
    local.mkdir(parents=True)
    (local / "config.json").write_text("{}")
    env = {"HOME": str(home), "PATH": os.environ["PATH"]}
    res = subprocess.run([sys.executable, "-I", "-c", node.source("model_info"), json.dumps({"scan": True})],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=True)
    found = json.loads(res.stdout)["models"]
    assert [m.get("hf_id") for m in found] == ["org/tiny", None]
    assert found[0]["config"] == {"model_type": "llama"}
    assert found[0]["safetensors"] == [["model.safetensors", 24, 16]]
    assert found[1]["path"] == str(local)


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port


def test_host_reach_and_peer_reach_answer_over_loopback(tmp_path: Path) -> None:
    host = json.loads(run(tmp_path, "host").stdout)
    assert host["hostname"] == socket.gethostname() and host["kernel"] == os.uname().release
    lo = next(i for i in host["interfaces"] if i["name"] == "lo")
    assert (lo["ipv4"], lo["prefix"]) == ("127.0.0.1", 8)
    assert set(host["tools"]) == {"docker", "vllm", "ray", "nvidia-smi", "ibdev2netdev"}
    listening = socket.create_server(("127.0.0.1", 0))
    try:
        port = listening.getsockname()[1]
        closed = _closed_port()
        assert run(tmp_path, "reach", "127.0.0.1", str(port), "3").stdout == "ok\n"
        assert run(tmp_path, "reach", "127.0.0.1", str(closed), "3").stdout.startswith(
            "ConnectionRefusedError: ")
        rounds = run(tmp_path, "peer_reach", "0.1", "2", f"up=127.0.0.1:{port}",
                     f"refused=127.0.0.1:{closed}").stdout.splitlines()
    finally:
        listening.close()
    # A refusing node answers: it is there.
    assert [json.loads(r) for r in rounds] == [{"up": True, "refused": True}] * 2


def test_a_watch_prints_a_round_only_when_it_changed(tmp_path: Path) -> None:
    listening = socket.create_server(("127.0.0.1", 0))
    try:
        port = listening.getsockname()[1]
        args = ("0.05", "4", f"up=127.0.0.1:{port}")
        every = run(tmp_path, "peer_reach", *args).stdout.splitlines()
        changed = run(tmp_path, "peer_reach", *args, "changes").stdout.splitlines()
    finally:
        listening.close()
    assert len(every) == 4 and changed == every[:1]


_FAKE_RAY = '''
import json, os
__version__ = "2.60.0"
_n = [0]
def init(**kw): pass
def cluster_resources(): return {"GPU": 2.0}
def nodes():
    # A node goes dead at the third reading (RAYPROBE_DEAD_AT).
    _n[0] += 1
    dead = _n[0] >= int(os.environ["RAYPROBE_DEAD_AT"])
    return [{"NodeID": "a", "NodeManagerAddress": "10.0.0.1", "NodeManagerHostname": "spark1", "Alive": True,
             "Resources": {"GPU": 1.0, "node:__internal_head__": 1.0}},
            {"NodeID": "b", "NodeManagerAddress": "10.0.0.2", "NodeManagerHostname": "spark2",
             "Alive": not dead, "Resources": {"GPU": 1.0}}]
'''


def test_the_ray_watch_prints_a_reading_only_when_it_changed(tmp_path: Path) -> None:
    # A stand-in ``ray`` module (the probe's use of it: init, nodes, cluster_resources); Ray's real node
    # table is read by the same code on the test bed.
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "ray.py").write_text(_FAKE_RAY)
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "fake"), "RAYPROBE_DEAD_AT": "3"}

    def probe(*flags: str) -> list[dict[str, object]]:
        argv = [sys.executable, "-S", "-c", node.source("ray_probe"), "10.0.0.1:6379", "10.0.0.1", "0.02",
                "5"]
        res = subprocess.run([*argv, *flags], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=60, check=True)
        return [json.loads(line.removeprefix("RAYPROBE ")) for line in res.stdout.splitlines()]

    every, changed = probe(), probe("changes")
    assert len(every) == 5
    alive = [[n["alive"] for n in r["nodes"]] for r in changed]  # type: ignore[attr-defined]
    assert alive == [[True, True], [True, False]]   # the first reading, then the one that changed


def test_ray_join_without_ray_in_its_python_waits_then_runs_the_configured_ray(tmp_path: Path) -> None:
    """`engine.ray_python` without Ray (the config's `ray` runs on another Python): the join still waits for
    the head's node (here: nothing listens, so it says it could not read it) and runs the configured `ray`
    with the start's arguments in its place."""
    fake_ray = tmp_path / "ray"
    fake_ray.write_text('#!/bin/sh\necho "fake ray: $*"\n')
    fake_ray.chmod(0o755)
    with socket.socket() as s:   # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    # `-S`: no site-packages, so no Ray, whichever Python runs the tests.
    res = subprocess.run([sys.executable, "-I", "-S", "-c", node.source("ray_join"), "127.0.0.1", str(port),
                          "5", "0.05", str(fake_ray), "start", "--address", f"127.0.0.1:{port}"],
                         cwd=cwd, capture_output=True, text=True, timeout=60, check=True)
    assert "no Ray in this Python" in res.stderr
    assert "ray_join: head node not read" in res.stdout
    assert res.stdout.rstrip().endswith(f"fake ray: start --address 127.0.0.1:{port}")
