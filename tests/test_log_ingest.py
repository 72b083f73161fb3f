"""LogIngest: every line reaches the timeline; display is bounded by a token bucket; skips are said."""

from __future__ import annotations

from pathlib import Path

from sparktui.domain.logs import LogIngest, LogReader

LOGS = Path(__file__).parent / "data" / "vllm-logs"
READY_LOG = LOGS / "12_single-node-tp2-h200-qwen3-next-80b-a3b-ready_v0.10.2.txt"
FLOOD_LINE = (b"(RayWorkerWrapper pid=77, ip=10.0.0.2) node2:77:77 [0] NCCL INFO Channel 00 : "
              b"1[1] -> 0[0] via NET/IB\n")


def test_reattach_burst_shows_the_whole_log_so_far() -> None:
    data = READY_LOG.read_bytes()
    ingest = LogIngest(display_cap=20_000)
    ingest.feed(data, now=1000.0)
    records = ingest.take_records(now=0.0)
    assert records == LogReader().feed(data)        # the same records a whole-file reader makes
    assert not any(r.message.startswith("[sparktui]") for r in records)
    assert ingest.timeline.snapshot().outcome == "ready"


def test_flood_reaches_the_timeline_but_display_is_rate_limited() -> None:
    ingest = LogIngest(display_cap=1000, display_rate=10_000)
    startup = READY_LOG.read_bytes()
    cut = startup.index(b"Application startup complete")
    cut = startup.rindex(b"\n", 0, cut) + 1
    ingest.feed(startup[:cut], now=1.0)
    ingest.take_records(now=0.0)                   # the burst is spent on the start-up
    shown = 0
    for tick in range(1, 11):                       # one second of 100,000 lines/s, 10 refreshes
        ingest.feed(FLOOD_LINE * 10_000, now=1.0 + tick / 10)
        if tick == 5:                               # the ready line, buried in the flood
            ingest.feed(startup[cut:], now=1.5)
        records = ingest.take_records(now=tick / 10)
        shown += sum(1 for r in records if not r.message.startswith("[sparktui]"))
        assert len(records) <= 1001
    assert ingest.timeline.snapshot().outcome == "ready"
    assert shown <= 10_000 + 1000                   # the rate (+ what the bucket had refilled)
    assert ingest.lines_seen > 100_000


def test_skipped_lines_are_announced_once() -> None:
    ingest = LogIngest(display_cap=100, display_rate=100)
    ingest.feed(FLOOD_LINE * 150, now=0.0)
    first = ingest.take_records(now=0.0)
    assert len(first) == 101 and "50 log lines not shown" in first[0].message
    ingest.feed(FLOOD_LINE * 10, now=0.0)
    assert ingest.take_records(now=0.0) == []       # no tokens left: nothing yet, skipped counted
    later = ingest.take_records(now=1.0)
    assert later == []                              # nothing pending any more
    ingest.feed(FLOOD_LINE * 5, now=2.0)
    again = ingest.take_records(now=2.0)
    assert "10 log lines not shown" in again[0].message and len(again) == 6


def test_reset_starts_a_fresh_timeline() -> None:
    ingest = LogIngest()
    ingest.feed(READY_LOG.read_bytes(), now=0.0)
    assert ingest.timeline.snapshot().outcome == "ready"
    ingest.reset()
    assert ingest.timeline.snapshot().outcome == "incomplete"
    assert ingest.take_records(now=0.0) == []
