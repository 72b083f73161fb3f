"""``sparktui status``'s one round trip: the node script ``sparktui/node/status.py`` as shipped (run here
by ``python -I -c`` from an empty directory), and ``status_round`` over a local node's transport — the real
probe, the real detached-state script, a real tagged process and a log holding bytes that are not UTF-8."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sparktui import node
from sparktui.config import load_config
from sparktui.domain.lifecycle import argv as A
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle.presence_file import SUPERVISOR_FILE
from sparktui.domain.presence import SupervisorPresence
from sparktui.remote.status_round import round_request, status_round
from sparktui.remote.transport import LocalTransport
from tests.local_node import write_local_config


def run_status(tmp_path: Path, req: dict[str, Any], stdin: bytes = b"") -> dict[str, Any]:
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    res = subprocess.run([sys.executable, "-I", "-c", node.source("status"), json.dumps(req)], cwd=cwd,
                         input=stdin, capture_output=True, timeout=120, check=True)
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def test_the_parts_run_at_once_and_each_says_how_it_ended(tmp_path: Path) -> None:
    # Two commands that can only end together (each waits for the other's file): run one after the
    # other, the first would time out.
    wait = ('touch "$1"; i=0; while [ ! -e "$2" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; '
            '[ -e "$2" ]')
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    home = os.path.expanduser("~")
    listening = socket.create_server(("127.0.0.1", 0))
    try:
        doc = run_status(tmp_path, {
            "tag": "no-such-tag", "timeout": 60,
            "commands": {"a": ["sh", "-c", wait, "sh", a, b], "b": ["sh", "-c", wait, "sh", b, a],
                         "probe": ["cat"], "home": ["echo", "~/x", "~"], "missing": [str(tmp_path / "nope")]},
            "ray": {"gcs": ["127.0.0.1", listening.getsockname()[1]], "argv": ["echo", "RAYPROBE {}"]},
            "peers": [["up", "127.0.0.1", listening.getsockname()[1]]],
        }, stdin=b"the probe's source")
    finally:
        listening.close()
    cmds = doc["commands"]
    assert (cmds["a"]["rc"], cmds["b"]["rc"]) == (0, 0), cmds
    assert cmds["probe"]["stdout"] == "the probe's source"  # stdin goes to the probe only
    assert cmds["home"]["stdout"] == f"{home}/x {home}\n"
    assert cmds["missing"]["rc"] == 127 and "nope" in cmds["missing"]["stderr"]
    assert doc["gcs_open"] is True and doc["ray"]["stdout"] == "RAYPROBE {}\n"
    assert doc["reach"] == {"up": True}
    assert doc["host"]["hostname"] == os.uname().nodename and doc["host"]["uptime_seconds"] > 0
    assert doc["processes"] == [] and doc["log"] is None and doc["home"] == home


def test_a_slow_part_is_cut_at_its_bound_and_a_closed_gcs_is_not_asked(tmp_path: Path) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    closed = s.getsockname()[1]
    s.close()
    doc = run_status(tmp_path, {"tag": "t", "timeout": 1, "commands": {"slow": ["sleep", "30"]},
                                "ray": {"gcs": ["127.0.0.1", closed], "argv": ["false"]}})
    assert doc["commands"]["slow"]["rc"] == 124 and "timed out" in doc["commands"]["slow"]["stderr"]
    assert doc["gcs_open"] is False and doc["ray"] is None


async def test_status_round_reads_a_local_node_as_the_commands_of_before_would(tmp_path: Path) -> None:
    config = load_config(write_local_config(tmp_path / "config.toml", "round-test"))
    local = config.head
    tag = A.node_tag(config.engine.name_prefix, local.name)
    state = Path(P.state_dir(config, None, local.name))
    state.mkdir(parents=True)
    log = (b"INFO 12-01 10:00:00 [api_server.py:1] vLLM API server version 0.17.1\n"
           b"\xff\xfe not UTF-8 \x1b[0m\r\n")
    (state / A.VLLM_LOG).write_bytes(log)
    # The supervisor's presence, beside the desired state: read in the same round trip.
    presence = SupervisorPresence("spark1", 4242, 1000.0, 1010.0, boot_ids={local.name: "b-1"})
    (state / SUPERVISOR_FILE).write_text(presence.to_json())
    # A detached "engine" of ours: its environment carries our tag.
    engine = subprocess.Popen(["sleep", "60"], env={**os.environ, A.TAG_ENV: tag})
    try:
        (state / A.VLLM_PID).write_text(str(engine.pid))
        req = round_request(config, local)
        assert "ray" in req and req["peers"] == [] and set(req["commands"]) == {"probe", "detached",
                                                                                      "supervisor"}
        transport = LocalTransport(local.name)
        await transport.connect()
        answer = await status_round(config, local, transport)
        await transport.close()
    finally:
        engine.kill()
        engine.wait()
    assert answer.facts.hostname == os.uname().nodename and answer.facts.kernel == os.uname().release
    assert answer.detached is not None and (answer.detached.status, answer.detached.pid) == ("running",
                                                                                             engine.pid)
    assert answer.detached.log_size == len(log) and answer.detached.log_path == str(state / A.VLLM_LOG)
    assert answer.log == log  # byte for byte, through the JSON document
    assert [p["pid"] for p in answer.processes] == [engine.pid]
    assert "error" not in answer.sample and answer.sample["node"] == local.name, answer.sample
    assert answer.ray is None and answer.containers is None  # no GCS here; runtime "host"
    assert answer.supervisor is not None and SupervisorPresence.parse(answer.supervisor) == presence


def test_the_gcs_reply_decoder_reads_protobufs_field_by_field() -> None:
    """GcsNodeInfo as protobuf writes it: bytes, strings, an enum left out when 0 (ALIVE), a double map."""
    import struct

    from sparktui.node.gcs_grpc import GrpcError, _bytes_field, _node, fields

    def entry(key: str, value: float) -> bytes:
        return _bytes_field(1, key.encode()) + bytes([2 << 3 | 1]) + struct.pack("<d", value)

    node = (_bytes_field(1, bytes.fromhex("ab01")) + _bytes_field(2, b"10.0.0.2") + _bytes_field(8, b"spark2")
            + _bytes_field(11, entry("GPU", 1.0)) + _bytes_field(11, entry("CPU", 20.0)))
    assert _node(node) == {"node_id": "ab01", "ip": "10.0.0.2", "hostname": "spark2", "alive": True,
                           "gpu": 1.0, "is_head": False}
    dead = node + bytes([7 << 3, 1]) + _bytes_field(11, entry("node:__internal_head__", 1.0))
    assert _node(dead)["alive"] is False and _node(dead)["is_head"] is True
    assert fields(bytes([3 << 3, 0x96, 0x01])) == [(3, 150)]  # a two-byte varint
    with pytest.raises(GrpcError):
        fields(_bytes_field(2, b"cut")[:-1])
