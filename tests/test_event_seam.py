"""The event seam's payloads are built on the producer side, once: the engine's TimelineView from the real
stage machine, a node's NodeReading (rates, charts) from real samples, staleness by one rule at draw time."""

from __future__ import annotations

from types import MappingProxyType

from sparktui.domain.engine_session import EngineSession
from sparktui.domain.engine_view import EngineFeed, timeline_view
from sparktui.domain.events import EngineChanged, EngineState, Event, TimelineView
from sparktui.domain.logs import STAGES, LogIngest
from sparktui.domain.logs.stages import Timeline
from sparktui.domain.node_reading import NodeFeed
from sparktui.domain.telemetry import STALE_INTERVALS, STALE_SLACK_S, stale_seconds
from sparktui.sim.recording import DEFAULT_RECORDING, recording_text
from tests.test_ui_panels import gb10_sample

NOW = 1_767_225_600.0


def _fed(upto: str, now: float = NOW) -> Timeline:
    timeline = Timeline(expected_nodes=2)
    lines = recording_text(DEFAULT_RECORDING).splitlines()
    cut = next(i for i, line in enumerate(lines) if upto in line)
    timeline.feed_text("\n".join(lines[: cut + 1]) + "\n", now=now)
    return timeline


def test_the_view_holds_every_stage_in_order_with_progress_and_facts() -> None:
    snap = _fed("Loading safetensors checkpoint shards:  33% Completed | 10/30").snapshot()
    view = timeline_view(snap)
    assert [s.name for s in view.stages] == list(STAGES)
    assert view.running is not None and view.running.name == "weights"
    assert (view.running.done, view.running.total) == (10.0, 30.0)
    assert view.outcome == "incomplete" and view.failure is None
    assert view.facts["vllm_version"] == snap.vllm_version      # merged in from the snapshot's own field
    assert isinstance(view.facts, MappingProxyType)              # immutable, as the event is


def test_the_stall_is_evaluated_when_drawn_not_when_posted() -> None:
    view = timeline_view(_fed("Loading safetensors checkpoint shards:  33% Completed | 10/30").snapshot())
    assert view.stall_seconds(NOW) == 0.0
    assert view.stall_seconds(NOW + 300) == 300.0       # the same event, drawn five minutes on
    assert TimelineView().stall_seconds(NOW) is None     # nothing posted yet: no stall


def test_no_stall_once_the_start_is_over() -> None:
    timeline = Timeline(expected_nodes=2)
    timeline.feed_text(recording_text(DEFAULT_RECORDING), now=NOW)
    view = timeline_view(timeline.snapshot())
    assert view.outcome == "ready" and view.running is None
    assert view.stall_seconds(NOW + 3600) is None


def test_the_engine_feed_posts_the_state_with_the_stage_bars_once_per_move() -> None:
    """The log follower's bytes go into ``EngineFeed``; each flush posts what moved, once."""
    session = EngineSession(())
    session.discovered(EngineState.STARTING, "vllm serve running")
    posted: list[Event] = []
    feed = EngineFeed(session, LogIngest(2), posted.append, clock=lambda: NOW)
    feed.publish_moved()
    assert [type(e) for e in posted] == [EngineChanged]
    lines = recording_text(DEFAULT_RECORDING).splitlines()
    cut = next(i for i, line in enumerate(lines) if "Loading safetensors checkpoint shards:  33%" in line)
    text = ("\n".join(lines[: cut + 1]) + "\n").encode()
    for i in range(0, len(text), 4096):      # as the follower hands it over: chunks, cut anywhere
        feed.log_bytes(text[i:i + 4096])
    assert len(posted) == 1                   # nothing until the flush
    feed.flush()
    feed.publish_moved()
    last = posted[-1]
    assert len(posted) == 2 and isinstance(last, EngineChanged)
    assert last.state is EngineState.STARTING
    assert last.timeline is not None and last.timeline.running is not None
    assert last.timeline.running.name == "weights" and last.timeline.running.done == 10.0
    feed.flush()
    feed.publish_moved()
    assert len(posted) == 2                   # nothing moved: nothing posted
    feed.log_reset()                          # the next engine run's log
    feed.flush()
    feed.publish_moved()
    assert len(posted) == 3 and isinstance(posted[-1], EngineChanged)
    assert posted[-1].timeline is not None and posted[-1].timeline.running is None


def test_the_reading_carries_rates_and_the_charts_from_one_history() -> None:
    feed = NodeFeed()
    step = 25_000_000_000 // 8 // 4
    first = feed.sampled("spark1", gb10_sample(1, 0, util=50.0), now=0.0)
    second = feed.sampled("spark1", gb10_sample(2, step, util=60.0), now=1.0)
    assert first.reading.roce_history == (0.0,)         # no rate from one sample
    assert second.reading.gpu_history == (50.0, 60.0)
    assert second.reading.cables and second.reading.cables[0].tx_gbps is not None
    assert second.reading.roce_history[-1] > 0
    assert len(second.reading.mem_history) == 2
    assert second.sample is not None and second.sample.seq == 2   # the raw sample rides along
    assert second.rates is not None and second.rates.cables      # with the rates computed from it
    other = feed.sampled("spark2", gb10_sample(1, 0), now=1.0)
    assert other.reading.gpu_history == (0.0,)           # one history per node



def test_a_node_feed_with_a_sink_posts_each_reading() -> None:
    posted: list[Event] = []
    feed = NodeFeed(posted.append)                       # as the probe runner feeds the backend's
    event = feed.sampled("spark1", gb10_sample(1, 0), now=0.0)
    assert posted == [event]


def test_staleness_is_one_rule() -> None:
    limit = STALE_INTERVALS * 1.0 + STALE_SLACK_S
    assert stale_seconds(None, 100.0, 1.0) is None
    assert stale_seconds(100.0, 100.0 + limit, 1.0) is None
    assert stale_seconds(100.0, 100.0 + limit + 1, 1.0) == limit + 1
