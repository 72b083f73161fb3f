"""Generalisation: synthetic logs written from vLLM's format strings for every version family, launcher
shape and failure kind (tests/synthetic_vllm_logs.py) against hand-written expectations (manifest.json).

These are not the real logs the parser was developed on, so a rule tuned to those files fails here."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from sparktui.domain.logs import (
    FAILURE_KINDS,
    LineSplitter,
    LogReader,
    Timeline,
    parse_line,
    strip_ansi,
    timeline_from_bytes,
)
from tests.log_reading import read_live
from tests.synthetic_vllm_logs import OUT, SCENARIOS, build, manifest, readme

MANIFEST: list[dict[str, Any]] = json.loads((OUT / "manifest.json").read_text(encoding="utf-8"))
_SKIP_END = (
    "EngineCore failed to start", "Engine core initialization failed", "Engine process failed to start",
)


def test_checked_in_logs_are_current() -> None:
    """The files under tests/data/synthetic-logs are what the generator writes (regenerate with
    ``.venv/bin/python -m tests.synthetic_vllm_logs``)."""
    assert manifest() == MANIFEST
    assert (OUT / "README.md").read_text(encoding="utf-8") == readme()
    assert {p.name for p in OUT.glob("*.log")} == {spec.name + ".log" for spec, _ in SCENARIOS}
    for spec, fn in SCENARIOS:
        assert (OUT / (spec.name + ".log")).read_bytes() == build(spec, fn), spec.name


def test_every_failure_kind_is_covered() -> None:
    kinds = {e["expect"].get("failure_kind") for e in MANIFEST}
    assert set(FAILURE_KINDS) <= kinds


_CASES = [(e, None) for e in MANIFEST] + [(e, e["cluster_nodes"]) for e in MANIFEST if e["cluster_nodes"] > 1]


_CASE_IDS = [e["file"].removesuffix(".log") + ("" if n is None else f"-nodes{n}") for e, n in _CASES]


@pytest.mark.parametrize(("entry", "expected_nodes"), _CASES, ids=_CASE_IDS)
def test_synthetic_log(entry: dict[str, Any], expected_nodes: int | None) -> None:
    """Without a node count (the CLI), and with the cluster's (the dashboard passes len(config.nodes))."""
    exp = entry["expect"]
    snap = timeline_from_bytes((OUT / entry["file"]).read_bytes(), expected_nodes)
    got = snap.to_json()
    assert snap.outcome == exp["outcome"], got
    if "vllm_release" in exp:
        assert snap.facts.get("vllm_release") == exp["vllm_release"]
    if "model" in exp:
        assert snap.model == exp["model"]
    for key, value in exp.get("facts", {}).items():
        assert snap.facts.get(key) == value, (key, dict(snap.facts))
    statuses = {s.name: s.status for s in snap.stages}
    for name, status in exp.get("stages", {}).items():
        assert statuses[name] == status, (name, statuses)
    for name, (done, total) in exp.get("progress", {}).items():
        prog = snap.stage(name).progress
        assert prog is not None and (prog.done, prog.total) == (done, total), (name, prog)
    longest = exp.get("max_stage_seconds", 3000)
    for st in snap.stages:  # durations are never negative, nor hours long in these few-minute starts
        assert st.seconds is None or 0 <= st.seconds <= longest, (st.name, st.seconds)
    for st in snap.stages:  # stage times read in the head node's clock
        for when in (st.started, st.ended):
            assert when is None or when.startswith(exp.get("times_start", "")), (st.name, when)
    if "nodes" in exp:
        assert list(snap.nodes) == exp["nodes"]
    if "current" in exp:
        assert snap.current == exp["current"]
    if exp["outcome"] == "failed":
        assert snap.failure is not None
        assert snap.failure.kind == exp["failure_kind"], snap.failure
        assert snap.failure.stage == exp["failure_stage"], snap.failure
        assert exp["root_cause"] in snap.failure.message, snap.failure.message
        assert not snap.failure.message.startswith(_SKIP_END), snap.failure.message
        assert snap.failure.hint
        assert exp.get("hint", "") in snap.failure.hint, snap.failure.hint
        if "failure_node" in exp:
            assert snap.failure.node == exp["failure_node"], snap.failure
    else:
        assert snap.failure is None, snap.failure


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["file"].removesuffix(".log") for e in MANIFEST])
def test_live_reading_agrees_with_the_bulk_path(entry: dict[str, Any]) -> None:
    """A dashboard tails the log in arbitrary chunks (LogReader + Timeline.feed per record): same verdict."""
    data = (OUT / entry["file"]).read_bytes()
    bulk = timeline_from_bytes(data)
    snap = read_live(data, 97)
    assert snap.outcome == bulk.outcome
    assert [(s.name, s.status) for s in snap.stages] == [(s.name, s.status) for s in bulk.stages]
    assert dict(snap.facts) == dict(bulk.facts)
    assert snap.failure == bulk.failure


_HEADER = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d")


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["file"].removesuffix(".log") for e in MANIFEST])
def test_every_vllm_record_is_peeled(entry: dict[str, Any]) -> None:
    """Whatever wraps a vLLM record (launcher stamps, nested prefixes, VLLM_LOGGING_PREFIX, colours), the
    line layer finds its level and time, and the message no longer holds the header."""
    data = (OUT / entry["file"]).read_bytes()
    for text in LineSplitter().feed(data + b"\n"):
        plain = strip_ansi(text)
        if not _HEADER.search(plain) or plain.lstrip().startswith("{"):
            continue
        rec = parse_line(text)
        assert rec.level is not None and rec.time is not None, text
        assert not _HEADER.search(rec.message), text


_GROUP = re.compile(r"\((?:([^()]*?) )?pid=\d+(?:, ip=([^)\s]+))?\)")


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["file"].removesuffix(".log") for e in MANIFEST])
def test_role_and_node_are_the_innermost_name_and_the_ray_ip(entry: dict[str, Any]) -> None:
    """For every vLLM record: role = the innermost named process group before the header, node = the
    Ray group's ip= (none: the head)."""
    data = (OUT / entry["file"]).read_bytes()
    for text in LineSplitter().feed(data + b"\n"):
        plain = strip_ansi(text)
        head = _HEADER.search(plain)
        if head is None or plain.lstrip().startswith("{"):
            continue
        groups = _GROUP.findall(plain[: head.start()])
        if not groups:
            continue
        names = [name for name, _ in groups if name]
        ips = [ip for _, ip in groups if ip]
        rec = parse_line(text)
        assert rec.role == (names[-1] if names else None), text
        assert rec.node == (ips[-1] if ips else None), text


def test_hang_reads_as_a_stall_in_weights() -> None:
    """Fed live (arrival time = the line's time), the shm_broadcast heartbeats of a hung start are not
    progress: the dashboard can say 'no progress for 3 min during weights'."""
    data = (OUT / "incomplete_v0.22.1_hang-after-load-start_plain.log").read_bytes()
    reader, timeline = LogReader(), Timeline()
    clock = 0.0
    for rec in reader.feed(data) + reader.flush():
        clock = rec.seconds if rec.seconds is not None else clock
        timeline.feed(rec, now=clock)
    snap = timeline.snapshot(now=clock)
    assert snap.current == "weights"
    assert snap.stall_seconds(clock) == 180.0


@pytest.mark.parametrize("name", ["happy_v0.19.1_v1-ray_docker", "happy_v0.31.0_v1-rayv2_plain",
                                  "happy_v0.20.2_v1-mp-tp2_plain", "happy_v0.9.2_v1-mp-tp2_plain"])
def test_cuda_graph_capture_animates_while_the_line_is_open(name: str) -> None:
    """tqdm writes every capture update on one physical line: tailed in small chunks, the stage's
    progress moves before that line ends (Ray-relayed, mp-prefixed and unprefixed bars alike)."""
    data = (OUT / (name + ".log")).read_bytes()
    reader, timeline = LogReader(), Timeline()
    seen: set[int] = set()
    for i in range(0, len(data), 64):
        for rec in reader.feed(data[i : i + 64]):
            timeline.feed(rec)
        stage = timeline.snapshot().stage("cuda_graphs")
        if stage.status == "running" and stage.progress is not None:
            seen.add(stage.progress.done)
    assert len(seen) > 5 and min(seen) < max(seen)
