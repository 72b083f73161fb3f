# ruff: noqa: E501  (verbatim vLLM log lines as test data)
"""Byte-stream splitter, and the property that nothing thrown at the log layers makes them raise."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.domain.logs import LineSplitter, LogReader, Timeline, parse_line, timeline_from_bytes


def test_lf_crlf_and_cr_boundaries() -> None:
    s = LineSplitter()
    assert s.feed(b"a\nb\r\nc\rd") == ["a", "b", "c"]
    assert s.flush() == ["d"]


def test_crlf_split_across_chunks_counts_once() -> None:
    s = LineSplitter()
    assert s.feed(b"one\r") == ["one"]
    assert s.feed(b"\ntwo\n") == ["two"]


def test_cr_progress_updates_arrive_live() -> None:
    s = LineSplitter()
    out: list[str] = []
    for update in (b"\rCapturing: 0%| | 0/3 [00:00<?, ?it/s]", b"\rCapturing: 33%| | 1/3 [00:01<00:02, 1.0it/s]",
                   b"\rCapturing: 67%| | 2/3 [00:02<00:01, 1.0it/s]"):
        out += s.feed(update)
    # each update is complete once the next one starts: a line reader would have seen nothing yet
    progress = [parse_line(r).progress for r in out]
    assert [p.done for p in progress if p is not None] == [0, 1]


def test_invalid_utf8_is_replaced() -> None:
    s = LineSplitter()
    assert s.feed(b"bad \xff\xfe byte\n") == ["bad \ufffd\ufffd byte"]


def test_utf8_split_across_chunks_survives() -> None:
    s = LineSplitter()
    data = "█ version 0.20.0\n".encode()
    assert s.feed(data[:1]) == []
    assert s.feed(data[1:]) == ["█ version 0.20.0"]


def test_endless_line_is_cut_and_memory_stays_bounded() -> None:
    s = LineSplitter(max_record_bytes=1024)
    out: list[str] = []
    for _ in range(1000):
        out += s.feed(b"x" * 1000)
        assert s.buffered_bytes <= 1024
    out += s.feed(b"tail of the long line\nnext\n")
    assert out[0] == "x" * 1024
    assert out[1:] == ["next"]
    assert s.truncated_records == 1


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096), st.integers(min_value=1, max_value=64))
def test_random_bytes_never_raise_and_stay_bounded(data: bytes, chunk: int) -> None:
    reader = LogReader(max_record_bytes=256)
    timeline = Timeline()
    for i in range(0, len(data), chunk):
        for rec in reader.feed(data[i : i + chunk]):
            timeline.feed(rec, now=float(i))
        assert reader.splitter.buffered_bytes <= 256 + chunk
    for rec in reader.flush():
        timeline.feed(rec)
    timeline.snapshot()
    timeline.stall_seconds(1e9)
    timeline_from_bytes(data).to_json()


_SOUP = st.sampled_from([
    "\x1b[36m", "\x1b[0m", "\x1b[", "\x1b", "(", ")", "(EngineCore_DP0 pid=1) ", "(RayWorkerWrapper pid=2, ip=1.2.3.4) ",
    "INFO 04-08 23:32:43 [core.py:101] ", "ERROR 13-45 99:99:99 [x:1] ", "\r", "\n", "\r\n", "\x00", "\ufffd",
    "Capturing CUDA graphs (decode, FULL):  50%|█████     | 1/2 [00:00<00:00,  2.56it/s]", " [repeated 3x across cluster]",
    "ValueError: x", "Traceback (most recent call last):", "EngineCore failed to start.", "0: ",
    "2026-05-12T08:01:39.331095044Z ", "Model loading took 1 GiB and 2 seconds", "█  version 9.9.9", "%|", "|",
    # shapes the generalisation audit added rules for
    "1 validation error for ModelConfig", "  Value error, ", "Value error, Model architectures ['X'] are not supported",
    "vllm serve: error: ", "Uvicorn running on socket ('", "', 8000)", "Uvicorn running on http://",
    "(Worker_TP1 pid=3) ", "(RayWorkerProc pid=4, ip=10.0.0.2) ", "INFO 12-31 23:59:59 [x:1] ",
    "INFO 01-01 00:00:01 [y:2] ", "Worker failed with error 'x', please check the stack trace above for the root cause",
    "Application startup complete.", "Graph capturing finished in 3 secs, took 1.0 GiB",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(_SOUP, max_size=60))
def test_ansi_and_prefix_soup_never_raises(parts: list[str]) -> None:
    text = "".join(parts)
    rec = parse_line(text)
    assert "\x1b" not in rec.raw
    timeline = Timeline(expected_nodes=2)
    timeline.feed(rec, now=1.0)
    timeline.feed_text(text, now=2.0)
    timeline.snapshot().to_json()


@settings(max_examples=20, deadline=None)
@given(st.sampled_from([b"x", b"\x00", b"\xff", b"\xe2\x96", "█".encode(), b"(pid=1) "]))
def test_one_megabyte_lines(unit: bytes) -> None:
    data = unit * (1_000_000 // len(unit)) + b"\nINFO 04-08 23:32:43 [core.py:101] after\n"
    reader = LogReader()
    records = reader.feed(data)
    assert reader.splitter.buffered_bytes == 0
    assert records[-1].message == "after"
    parse_line(data.decode("utf-8", "replace"))
    snap = timeline_from_bytes(data)
    assert snap.outcome == "incomplete"


_SYNTHETIC = sorted((Path(__file__).parent / "data" / "synthetic-logs").glob("*.log"))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(_SYNTHETIC), st.integers(min_value=0), st.integers(min_value=7, max_value=4096),
       st.binary(max_size=64))
def test_mangled_synthetic_logs_never_raise(path: Path, cut: int, chunk: int, junk: bytes) -> None:
    """A faithful log cut anywhere, with garbage spliced in, read in any chunk size: never raises."""
    data = path.read_bytes()
    at = cut % (len(data) + 1)
    data = data[:at] + junk + data[at:]
    reader = LogReader(max_record_bytes=512)
    timeline = Timeline(expected_nodes=2)
    for i in range(0, len(data), chunk):
        for rec in reader.feed(data[i : i + chunk]):
            timeline.feed(rec, now=float(i))
        timeline.snapshot(now=float(i))
    timeline.snapshot().to_json()
    timeline_from_bytes(data[: at // 2] + junk + data[at // 2 :]).to_json()


def test_nul_bytes_and_garbage_headers() -> None:
    for text in ("\x00\x00INFO\x00", "INFO 99-99 99:99:99 [a:1] x", "(pid=) (", "((((((((", "[W999 :] "):
        parse_line(text)
