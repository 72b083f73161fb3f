"""A backend's ``EventStream``: the consumer sees every event, each observer only the kinds it subscribed to
(so an event passes no observer that does not read it), a failing observer is skipped; and the demo told
from real nodes by the ``SimulatedCluster`` Protocol."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sparktui.config import load_config
from sparktui.domain.bench import PowerTap
from sparktui.domain.events import (
    EVENT_KINDS,
    ClusterBackend,
    EngineChanged,
    EngineState,
    Event,
    EventStream,
    Notice,
    OperationBusy,
    SimulatedCluster,
)
from sparktui.domain.export_state import ExportState
from sparktui.remote.backend import SshBackend
from sparktui.sim.demo import DemoBackend

CONFIG = Path(__file__).resolve().parents[1] / "config.toml"


def test_the_consumer_sees_every_event_and_an_observer_only_its_kinds() -> None:
    stream = EventStream()
    shown: list[Event] = []
    busy: list[Event] = []
    everything: list[Event] = []
    stream.observe(busy.append, (OperationBusy,))
    stream.observe(everything.append)
    stream.sink = shown.append
    events: list[Event] = [Notice("hello"), OperationBusy("start"), EngineChanged(EngineState.READY)]
    for event in events:
        stream.post(event)
    assert shown == everything == events
    assert busy == [OperationBusy("start")]


def test_before_run_only_the_observers_see_the_stream() -> None:
    stream = EventStream()
    seen: list[Event] = []
    stream.observe(seen.append)
    stream.post(Notice("early"))
    assert seen == [Notice("early")]


def test_an_observer_that_raises_is_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    stream = EventStream()
    shown: list[Event] = []
    after: list[Event] = []

    def broken(_event: Event) -> None:
        raise ValueError("observer bug")

    stream.observe(broken)
    stream.observe(after.append)
    stream.sink = shown.append
    with caplog.at_level(logging.ERROR):
        stream.post(Notice("x"))
    assert shown == after == [Notice("x")]
    assert "observer" in caplog.text and "observer bug" in caplog.text


def test_every_kind_is_an_event_and_observers_name_real_kinds() -> None:
    assert Notice in EVENT_KINDS and len(set(EVENT_KINDS)) == len(EVENT_KINDS)
    for observer in (PowerTap, ExportState):
        assert set(observer.kinds) <= set(EVENT_KINDS), observer


def test_both_backends_have_a_stream_and_the_protocol_names_it() -> None:
    members = {name for name in vars(ClusterBackend) if not name.startswith("_")}
    assert members == {"node_names", "events", "readonly", "detached", "run", "start", "stop", "restart",
                       "smoke_test", "select_log", "log_source"}
    demo: ClusterBackend = DemoBackend(frozen_at=0)
    real: ClusterBackend = SshBackend(load_config(CONFIG))
    assert isinstance(demo.events, EventStream) and isinstance(real.events, EventStream)


def test_the_demo_is_a_simulated_cluster_and_real_nodes_are_not() -> None:
    demo = DemoBackend(frozen_at=0)
    real = SshBackend(load_config(CONFIG))
    assert isinstance(demo, SimulatedCluster) and not demo.detached
    assert not isinstance(real, SimulatedCluster) and real.detached
