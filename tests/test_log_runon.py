"""Run-on records (issue 31): a log pasted with its newlines lost is cut back into records at vLLM's record
starts before it is judged; a log with its newlines is left as it is; garbage never raises."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sparktui.domain.logs import LineSplitter, timeline_from_bytes
from sparktui.domain.logs.runon import record_cuts, restore_newlines
from tests.log_reading import read_live

DATA = Path(__file__).parent / "data"
PUBLIC = Path(__file__).parent / "public_logs"
RUN_ON = PUBLIC / "41-snippet-newlines-lost-apiserver-repository-not-found.log"
REAL_LOGS = sorted([*(DATA / "vllm-logs").glob("*.txt"), *(DATA / "synthetic-logs").glob("*.log"),
                    *(p for p in PUBLIC.glob("*.log") if p != RUN_ON)])


def test_the_pasted_run_on_log_is_split_and_judged() -> None:
    """vast-ai/base-image#128: one line, "(APIServer pid=2960)" after "(APIServer pid=2960)". Refused as "not
    a vLLM log" before; now its RepositoryNotFoundError is the failure, read the same live and in bulk."""
    data = RUN_ON.read_bytes()
    assert data.count(b"\n") == 1
    snap = timeline_from_bytes(data)
    assert snap.is_vllm_log and snap.outcome == "failed" and snap.failure is not None
    assert snap.failure.kind == "model_not_found"
    assert "huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error" in snap.failure.message
    live = read_live(data, 97)
    assert (live.outcome, live.failure) == (snap.outcome, snap.failure)


def _run_on(data: bytes) -> bytes:
    """A log as a paste that lost its newlines leaves it: each line end a space."""
    return data.replace(b"\r\n", b" ").replace(b"\n", b" ").replace(b"\r", b" ")


RUN_ON_CASES = [
    *sorted((DATA / "vllm-logs").glob("02_*.txt")),  # 155 KB: past a record's cap
    *sorted((DATA / "vllm-logs").glob("06a_*.txt")),
    *sorted((DATA / "vllm-logs").glob("09_*.txt")),
    *sorted((DATA / "synthetic-logs").glob("fail_triton_ptxas_*.log")),
    *sorted((DATA / "synthetic-logs").glob("fail_attention_backend_*.log")),
    *sorted((DATA / "synthetic-logs").glob("fail_jit_build_*.log")),
]


@pytest.mark.parametrize("path", RUN_ON_CASES, ids=[p.name[:48] for p in RUN_ON_CASES])
def test_a_whole_start_with_its_newlines_lost_reads_as_it_did_with_them(path: Path) -> None:
    """Every record of these starts carries a process prefix or a vLLM header, so with its newlines lost the
    log gets the verdict it gets with them, live as in bulk; past 64 KB (a record's most) the splitter gives
    the records up to the last record start instead of cutting the line at the cap and dropping the rest.
    (Lines with neither, such as a traceback printed raw without prefixes, stay run on: nothing marks where
    they began.)"""
    data = path.read_bytes()
    with_newlines = timeline_from_bytes(data)
    lost = _run_on(data)
    assert lost.count(b"\n") == 0
    snap = timeline_from_bytes(lost)
    assert snap.is_vllm_log
    assert (snap.outcome, snap.failure and snap.failure.kind) == (
        with_newlines.outcome, with_newlines.failure and with_newlines.failure.kind)
    live = read_live(lost, 4093)
    assert (live.outcome, live.failure) == (snap.outcome, snap.failure)


def test_a_run_on_line_longer_than_a_record_loses_nothing() -> None:
    record = b"(APIServer pid=7) INFO 03-01 10:00:00 [api_server.py:1] " + b"x" * 900 + b" "
    data = record * 200  # 190 KB, no line end
    splitter = LineSplitter()
    out = splitter.feed_raw(data) + b"".join(line.encode() + b"\n" for line in splitter.flush())
    assert out.count(b"(APIServer pid=7) INFO") == 200 and splitter.truncated_records == 0


@pytest.mark.parametrize("path", REAL_LOGS, ids=[p.name[:48] for p in REAL_LOGS])
def test_a_log_with_its_newlines_is_left_alone(path: Path) -> None:
    data = path.read_bytes()
    assert restore_newlines(data) == data


def test_record_starts_are_prefix_chains_and_headers_not_ray_error_text() -> None:
    line = (b"(EngineCore_DP0 pid=1) (RayWorkerWrapper pid=2, ip=10.0.0.2) INFO 03-01 10:00:00 [a.py:1] a "
            b"(EngineCore_DP0 pid=1) ERROR 03-01 10:00:01 [core.py:1] ray::RayWorkerWrapper.execute_method() "
            b"(pid=2, ip=10.0.0.2, actor_id=ab) failed INFO 03-01 10:00:02 [b.py:2] c")
    cuts = record_cuts(line)
    assert [line[c : c + 16] for c in cuts] == [b"(EngineCore_DP0 ", b"INFO 03-01 10:00"]


def test_garbage_never_raises() -> None:
    rng = random.Random(31)
    pieces = [b"(APIServer pid=1) ", b"(pid=", b"INFO 03-01 10:00:00 [x.py:1] ", b") ", b"\x1b[36m",
              b"\xff\xfe", b"] ", b"ERROR ", b"(", b")", b"\r", b" ", b"pid=9) "]
    for _ in range(300):
        parts = rng.randrange(80)
        blob = b"".join(rng.choice(pieces) + rng.randbytes(rng.randrange(0, 40)) for _ in range(parts))
        restore_newlines(blob * 8)
        timeline_from_bytes(blob * 8)
