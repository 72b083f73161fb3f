"""Reading Ray's cluster state and judging "every node and every GPU" with a diagnosis naming the culprit."""

from __future__ import annotations

import json

import pytest

from sparktui.domain.lifecycle.ray_state import (
    ExpectedNode,
    ProbeError,
    evaluate,
    last_probe_state,
    parse_probe_line,
    parse_ray_status,
)

EXPECTED = (ExpectedNode("spark1", "192.168.100.10", 1.0), ExpectedNode("spark2", "192.168.100.11", 1.0))


def probe(*nodes: tuple[str, bool, float], gpu_total: float | None = None) -> str:
    data = {"ray_version": "2.60.0", "nodes": [{"ip": ip, "alive": alive, "gpu": gpu, "node_id": f"id{i}",
                                                "hostname": "h", "is_head": i == 0}
                                               for i, (ip, alive, gpu) in enumerate(nodes)],
            "gpu_total": gpu_total if gpu_total is not None else sum(g for _, a, g in nodes if a)}
    return "RAYPROBE " + json.dumps(data)


def test_ready_when_every_node_and_gpu_is_there() -> None:
    state = parse_probe_line(probe(("192.168.100.10", True, 1.0), ("192.168.100.11", True, 1.0)))
    assert state is not None and state.ray_version == "2.60.0"
    r = evaluate(state, EXPECTED)
    assert r.ready and "2 node(s) and 2 GPU(s)" in r.diagnosis


def test_missing_worker_is_named() -> None:
    r = evaluate(parse_probe_line(probe(("192.168.100.10", True, 1.0))), EXPECTED)
    assert not r.ready and r.missing_nodes == ("spark2",)
    assert "spark2 (192.168.100.11) is missing: not registered with Ray" in r.diagnosis


def test_dead_worker_is_named_as_dead() -> None:
    state = parse_probe_line(probe(("192.168.100.10", True, 1.0), ("192.168.100.11", False, 0.0)))
    r = evaluate(state, EXPECTED)
    assert "spark2 (192.168.100.11) is missing: Ray reports it dead" in r.diagnosis


def test_gpu_short_node_duplicate_and_stranger() -> None:
    r = evaluate(parse_probe_line(probe(("192.168.100.10", True, 1.0), ("192.168.100.11", True, 0.0))),
                 EXPECTED)
    assert r.short_gpus == ("spark2",) and "has 0 of 1 GPU(s)" in r.diagnosis
    r = evaluate(parse_probe_line(probe(("192.168.100.10", True, 1.0), ("192.168.100.11", True, 1.0),
                                        ("192.168.100.11", True, 1.0))), EXPECTED)
    assert not r.ready and "registered 2 times" in r.diagnosis
    r = evaluate(parse_probe_line(probe(("192.168.100.10", True, 1.0), ("10.0.0.7", True, 1.0))), EXPECTED)
    assert "spark2" in r.diagnosis and "unexpected addresses: 10.0.0.7" in r.diagnosis


def test_probe_noise_and_errors() -> None:
    assert parse_probe_line("2026-11-29 INFO worker.py -- Connecting to existing Ray cluster") is None
    with pytest.raises(ProbeError, match="cannot import ray"):
        parse_probe_line('RAYPROBE_ERROR {"error": "cannot import ray: No module named \'ray\'"}')
    text = "noise\n" + probe(("192.168.100.10", True, 1.0)) + "\n" + probe(("192.168.100.10", True, 1.0),
                                                                           ("192.168.100.11", True, 1.0))
    state = last_probe_state(text)
    assert state is not None and len(state.nodes) == 2
    assert evaluate(None, EXPECTED).missing_nodes == ("spark1", "spark2")


V1 = """======== Autoscaler status: 2026-11-29 16:58:31.120915 ========
Node status
---------------------------------------------------------------
Active:
 1 node_87db4a5bf6ede40e8039b4203cbeea90d85d170408bae2024232984a
 1 node_1c5b67b9a66b4af80b9aebd38899c490eba4052b77b41ce45325e6f1
Pending:
 (no pending nodes)
Recent failures:
 (no failures)

Resources
---------------------------------------------------------------
Total Usage:
 0.0/4.0 CPU
 0.0/2.0 GPU
 0B/45.77GiB memory

Total Constraints:
 (no request_resources() constraints)
Total Demands:
 (no resource demands)
"""

V2_IDLE = """======== Autoscaler status: 2026-11-29 17:00:01 ========
Node status
--------------------------------------------------------
Active:
 (no active nodes)
Idle:
 1 node_aaaa
 1 node_bbbb
Pending:
 (no pending nodes)
Recent failures:
 (no failures)

Resources
--------------------------------------------------------
Total Usage:
 0.0/4.0 CPU
 0.0/2.0 GPU
"""


def test_ray_status_text_fallback_v1_and_v2() -> None:
    for text in (V1, "\x1b[1m" + V1, V2_IDLE):
        state = parse_ray_status(text)
        assert state is not None and state.counts_only
        assert state.counted_nodes == 2 and state.gpu_total == 2.0
        assert evaluate(state, EXPECTED).ready
    second = " 1 node_1c5b67b9a66b4af80b9aebd38899c490eba4052b77b41ce45325e6f1\n"
    one = parse_ray_status(V1.replace(second, "").replace("0.0/2.0 GPU", "0.0/1.0 GPU"))
    assert one is not None
    r = evaluate(one, EXPECTED)
    assert not r.ready and "1 of 2 nodes" in r.diagnosis and "1 of 2 GPU(s)" in r.diagnosis
    assert parse_ray_status("No cluster status. It may take a few seconds …") is None
