"""Start / restart / stop / smoke test from keys, buttons and the palette: confirmation, cancel, read-only,
an operation already running, a backend that refuses, key remapping."""

from __future__ import annotations

import asyncio

from sparktui.domain.events import (
    EngineChanged,
    EngineState,
    OperationChanged,
    OperationView,
    StepStatus,
    StepView,
)
from sparktui.ui.screens.confirm import ConfirmScreen
from tests.ui_fakes import FakeBackend, make_app, notifications, settle, wait_for_actions


async def test_start_key_starts_without_asking() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("s")
        await settle(pilot, app)
        assert backend.calls == ["start"]
        assert not isinstance(app.screen, ConfirmScreen)


async def test_stop_asks_and_cancel_does_nothing() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await settle(pilot, app)
        assert not isinstance(app.screen, ConfirmScreen)
        assert backend.calls == []


async def test_stop_confirmed_with_y() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("x")
        await pilot.pause()
        await pilot.press("y")
        await settle(pilot, app)
        assert backend.calls == ["stop"]


async def test_restart_through_buttons() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.click("#btn-restart")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.click("#confirm-yes")
        await settle(pilot, app)
        assert backend.calls == ["restart"]


async def test_escape_cancels_restart() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("escape")
        await settle(pilot, app)
        assert backend.calls == []


async def test_readonly_refuses_and_disables_buttons() -> None:
    app, backend = make_app(FakeBackend(readonly=True))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        for key in ("s", "r", "x"):
            await pilot.press(key)
            await settle(pilot, app)
        assert backend.calls == []
        assert not isinstance(app.screen, ConfirmScreen)
        assert any("read-only" in n for n in notifications(app))
        assert all(app.query_one(f"#btn-{a}").disabled for a in ("start", "restart", "stop"))


async def test_operation_running_refuses_with_a_message_and_shows_steps() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        op = OperationView("start", steps=(
            StepView("SSH reachable", "spark1", StepStatus.OK, 0.2),
            StepView("image present, same ID", None, StepStatus.FAILED, 1.0,
                     "spark2 has a different image ID"),
            StepView("RDMA link up", None, StepStatus.RUNNING),
        ))
        backend.post(OperationChanged(op), EngineChanged(EngineState.PREFLIGHT))
        await settle(pilot, app)
        assert app.query_one("#btn-start").disabled
        await pilot.press("s")
        await pilot.press("x")
        await settle(pilot, app)
        assert backend.calls == []
        assert any("start is running" in n for n in notifications(app))
        steps = str(app.query_one("#operation-steps").render())
        assert "✗" in steps and "spark2 has a different image ID" in steps and "✓" in steps
        # It finishes: the buttons come back.
        backend.post(OperationChanged(OperationView("start", running=False, ok=True)))
        await settle(pilot, app)
        assert not app.query_one("#btn-start").disabled


async def test_backend_refusal_is_shown() -> None:
    backend = FakeBackend()
    backend.refuse = "stop is running (started from another dashboard)"
    app, _ = make_app(backend)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("s")
        await settle(pilot, app)
        await wait_for_actions(app)
        assert backend.calls == ["start"]
        assert any("another dashboard" in n for n in notifications(app))


async def test_smoke_test_needs_ready_then_shows_the_answer() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("t")
        await settle(pilot, app)
        assert backend.calls == []
        assert any("not ready" in n for n in notifications(app))
        backend.post(EngineChanged(EngineState.READY))
        await settle(pilot, app)
        await pilot.press("t")
        await settle(pilot, app)
        await wait_for_actions(app)
        assert backend.calls == ["smoke_test"]
        assert any("Hello there" in n for n in notifications(app))


async def test_keys_remapped_from_config() -> None:
    # (a and u: free keys — g and k move in the log, e scrolls the engine; a shared key is a config error)
    app, backend = make_app(keys={"start": "a", "stop": "u"})
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("s")
        await pilot.press("a")
        await settle(pilot, app)
        assert backend.calls == ["start"]
        await pilot.press("u")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)


async def test_palette_offers_the_lifecycle_actions() -> None:
    app, _ = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in ("Start engine", "Restart engine", "Stop engine", "Smoke test"):
            assert title in titles


async def test_theme_from_config() -> None:
    app, _ = make_app(theme="nord")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        assert app.theme == "nord"


class SlowToCloseBackend(FakeBackend):
    """Its clean-up (like the SSH backend's closing of its channels) needs the loop for a while."""

    closed = False

    async def run(self, sink):  # type: ignore[no-untyped-def]
        try:
            await super().run(sink)
        finally:
            await asyncio.sleep(0.3)
            self.closed = True


async def test_closing_the_app_waits_for_the_backend_to_finish_closing() -> None:
    # Textual cancels workers at exit without waiting; the backend's clean-up is what hangs up the channels
    # that end the node-side helpers, so the app must have waited for it when it returns.
    app, backend = make_app(SlowToCloseBackend())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
    assert isinstance(backend, SlowToCloseBackend) and backend.closed


async def test_question_mark_toggles_the_keys_screen() -> None:
    from sparktui.ui.screens.keys_help import KeysScreen

    app, _ = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, KeysScreen)
        await pilot.press("question_mark")
        await pilot.pause()
        assert not isinstance(app.screen, KeysScreen)
        await pilot.press("question_mark", "escape")
        await pilot.pause()
        assert not isinstance(app.screen, KeysScreen)
