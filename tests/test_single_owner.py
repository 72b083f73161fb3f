"""Each fact the dashboard shows has one owner, which the others read: read-only mode (the backend's),
whether an operation runs (the backend's events), the log source shown, a link's state (typed fields)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.config import load_config
from sparktui.domain.events import (
    EngineChanged,
    EngineState,
    NodeLinkChanged,
    OperationBusy,
    OperationRefused,
)
from sparktui.remote.backend import SshBackend
from sparktui.remote.engine_nodes import EngineNodes
from sparktui.remote.operation_gate import OperationGate
from sparktui.remote.transport import LinkPhase, LinkState
from sparktui.ui.state import NodeState
from sparktui.ui.widgets.log_pane import LogPane
from tests.ui_fakes import FakeBackend, make_app, notifications, settle

CONFIG = Path(__file__).resolve().parents[1] / "config.toml"


def test_readonly_from_the_config_is_the_backends() -> None:
    config = load_config(CONFIG)
    watching = config.model_copy(update={"ui": config.ui.model_copy(update={"readonly": True})})
    assert SshBackend(watching).readonly and not SshBackend(config).readonly
    assert SshBackend(config, readonly=True).readonly   # --readonly


async def test_the_dashboard_reads_readonly_from_its_backend_only() -> None:
    backend = FakeBackend(readonly=True)
    app, _ = make_app(backend, readonly=False)   # [ui] readonly is the backend's to read, not the app's
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        assert app.readonly and app.query_one("#readonly-badge").display
        backend.readonly = False   # no copy of its own: the next look follows the backend
        backend.post(EngineChanged(EngineState.STOPPED))   # (redraws the controls)
        await settle(pilot, app)
        assert not app.readonly and not app.query_one("#readonly-badge").display


def test_a_link_event_is_facts_and_the_dashboard_words_them() -> None:
    retrying = NodeLinkChanged("spark2", "retrying", "Connection refused", retry_at=100.0)
    assert retrying.describe(now_monotonic=96.2) == "retrying in 4 s (Connection refused)"
    assert NodeLinkChanged("spark2", "failed", "host key mismatch").describe() == "failed (host key mismatch)"
    assert NodeLinkChanged("spark2", "connecting").describe() == "connecting"
    # The panel's countdown ticks from the same facts, no text of ours parsed back.
    node = NodeState("spark2", link_phase="retrying", link_error="Connection refused", retry_at=100.0)
    assert [node.link_text(now) for now in (91.0, 97.0, 101.0)] == [
        "retrying in 9 s (Connection refused)", "retrying in 3 s (Connection refused)",
        "retrying in 0 s (Connection refused)"]
    # ``sparktui status`` words a transport's state the same way.
    state = LinkState(LinkPhase.FAILED, last_error="host key mismatch")
    assert state.describe() == NodeLinkChanged("spark2", "failed", "host key mismatch").describe()


async def test_the_log_source_is_the_backends_and_the_pane_reads_it() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        pane = app.query_one(LogPane)
        await pilot.press("w")
        await settle(pilot, app)
        assert backend.calls == ["select_log:ray:spark1"]
        assert pane.source == backend.log_source == "ray:spark1"
        backend.log_source = "ray:spark2"   # the pane keeps no copy: it shows what the backend streams
        assert pane.source == "ray:spark2"


def test_the_ssh_backend_says_which_log_it_streams() -> None:
    backend = SshBackend(load_config(CONFIG))
    assert backend.log_source == "vllm"


async def test_an_operation_runs_while_the_backend_says_so() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(OperationBusy("start"))   # taken on, before its first step (the lock may take seconds)
        await settle(pilot, app)
        assert app.state.running_kind == "start" and app.query_one("#btn-stop").disabled
        await pilot.press("r")
        await settle(pilot, app)
        assert backend.calls == [] and "start is running — wait for it to finish" in notifications(app)
        backend.post(OperationBusy(None))
        await settle(pilot, app)
        assert app.state.running_kind is None and not app.query_one("#btn-stop").disabled


async def test_the_gate_says_when_it_takes_an_operation_on_and_when_it_is_done() -> None:
    told: list[str | None] = []
    gate = OperationGate(EngineNodes(load_config(CONFIG), {}), "a test", told.append)
    async with gate.exclusive("preflight"):   # (a preflight takes no lock: nothing to reach)
        assert told == ["preflight"]
        with pytest.raises(OperationRefused, match="preflight is running"):
            async with gate.exclusive("start"):
                pass
    assert told == ["preflight", None]
