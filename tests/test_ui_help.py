"""Keys a person can find (issue 31): ``?`` lists every bound action with its key now, grouped, Textual's
generic keys last; the palette offers every action that has a key; what cannot run now is greyed with the
reason; the footer is never cut (the least important keys go first)."""

from __future__ import annotations

import html
import re
from itertools import pairwise

import pytest
from textual.app import SystemCommand
from textual.command import CommandList
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Button

from sparktui.domain.events import (
    EngineChanged,
    EngineState,
    OperationChanged,
    OperationView,
)
from sparktui.domain.keys import DEFAULT_KEYS, KEY_GROUPS
from sparktui.ui.app import SparkApp
from sparktui.ui.bindings import FOOTER_RANK
from sparktui.ui.screens.keys_help import KeysScreen
from sparktui.ui.screens.processes import ProcessScreen
from sparktui.ui.textual_compat import FooterKey
from sparktui.ui.widgets.fitted_footer import FittedFooter
from tests.ui_fakes import make_app, notifications, settle
from tests.waiting import wait_until


def screen_text(app: SparkApp) -> str:
    """The screen's characters (from its SVG screenshot: the tags out, entities and no-break spaces back)."""
    return html.unescape(re.sub(r"<[^>]+>", "", app.export_screenshot())).replace("\xa0", " ")


def bound_actions(app: SparkApp) -> dict[str, set[str]]:
    """Binding id → its keys as the footer writes them, from the bindings Textual holds now (keymap
    applied), not from the app's own tables."""
    bound: dict[str, set[str]] = {}
    for active in app.screen_stack[0].active_bindings.values():
        if active.binding.id in DEFAULT_KEYS:
            bound.setdefault(active.binding.id, set()).add(app.get_key_display(active.binding))
    return bound


def test_every_binding_is_in_one_help_group() -> None:
    grouped = [i for ids in KEY_GROUPS.values() for i in ids]
    assert sorted(grouped) == sorted(DEFAULT_KEYS) and len(grouped) == len(set(grouped))
    assert set(SparkApp.key_bindings()) == set(DEFAULT_KEYS)


async def test_question_mark_lists_every_bound_action_with_its_key_now() -> None:
    app, _ = make_app(keys={"start": "a"})
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        bound = bound_actions(app)
        # Keys that a focused widget takes first are not the app's binding here; every other one is.
        assert len(bound) >= len(DEFAULT_KEYS) - 4 and bound["start"] == {"a"}
        await pilot.press("question_mark")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, KeysScreen)
        titles = [s.title for s in screen.sections]
        assert titles[:4] == ["Engine", "Log", "View", "App"] and titles[-1].startswith("Textual")
        rows = {row.label: row for s in screen.sections[:4] for row in s.rows}
        bindings = app.key_bindings()
        for binding_id, keys in bound.items():
            row = rows[bindings[binding_id].description]
            assert keys <= set(row.keys.split()), (binding_id, keys, row)
        assert rows["Start"].keys == "a"
        assert len(rows) == len(DEFAULT_KEYS)
        # Textual's own keys come last and never repeat one of ours.
        generic = screen.sections[-1].rows
        assert any(r.label == "Scroll Up" for r in generic)
        ours = {k for r in rows.values() for k in r.keys.split()}
        assert not ours & {k for r in generic for k in r.keys.split()}
        # An action that cannot run now says why (the engine is not up yet: nothing to smoke-test).
        assert rows["Smoke test"].not_now == "the engine is not ready: nothing to test yet"
        assert rows["Find"].not_now is None


async def test_the_help_screen_scrolls_at_80x24_and_starts_with_our_keys() -> None:
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("question_mark")
        await pilot.pause()
        scroll = app.screen.query_one("#keys-scroll")
        assert scroll.has_focus and scroll.max_scroll_y > 0
        shot = screen_text(app)
        assert "Engine" in shot and "Start" in shot and "Scroll Up" not in shot
        await pilot.press("end")
        await pilot.pause()
        assert scroll.scroll_y == scroll.max_scroll_y
        assert "Scroll Up" in screen_text(app)


async def test_palette_offers_every_action_that_has_a_key() -> None:
    app, _ = make_app(keys={"processes": "ctrl+o"})
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        commands = list(app.get_system_commands(app.screen))
        for binding_id, keys in bound_actions(app).items():
            shown = app.key_display(binding_id)
            assert set(shown.split()) >= keys
            assert any(what(c).endswith(f"({shown})") for c in commands), binding_id
        assert sum(what(c).endswith(f"({app.key_display(i)})") for c in commands for i in DEFAULT_KEYS) \
            >= len(DEFAULT_KEYS)
        for title in ("Processes", "Find in log", "Link test", "Pause charts", "Wrap log lines", "Save log",
                      "Log of one node", "Fix failed check", "Probe lines in the log", "Copy line"):
            assert title in [c.title for c in commands]
        # Chosen in the real palette, a command does what its key does.
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"processes")
        found = app.screen.query_one(CommandList)

        def offered() -> str:
            at = found.highlighted
            return "" if at is None else str(found.get_option_at_index(at).prompt)

        await wait_until(lambda: "Processes" in offered(), "the palette offering Processes", pilot=pilot,
                         state=offered)
        await pilot.press("enter")
        await wait_until(lambda: isinstance(app.screen, ProcessScreen), "the process screen", pilot=pilot,
                         state=lambda: app.screen)


def what(command: SystemCommand) -> str:
    """A palette command's help without the reason it cannot run now."""
    return command.help.split(" — not now: ")[0]


def footer_key(app: SparkApp, action: str) -> FooterKey:
    return next(k for k in app.query(FooterKey) if k.action == action)


async def test_start_is_greyed_with_the_reason_while_the_engine_is_ready() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        assert not footer_key(app, "start").has_class("-disabled")
        assert footer_key(app, "smoke_test").has_class("-disabled")
        backend.post(EngineChanged(EngineState.READY))
        await settle(pilot, app)
        await pilot.pause()
        start = footer_key(app, "start")
        assert start.has_class("-disabled") and "stop it first, or restart" in str(start.tooltip)
        assert not footer_key(app, "smoke_test").has_class("-disabled")
        assert not footer_key(app, "stop").has_class("-disabled")
        button = app.query_one("#btn-start", Button)
        assert button.disabled and "stop it first" in str(button.tooltip)
        await pilot.press("s")
        await settle(pilot, app)
        assert backend.calls == []
        assert any("the engine is ready: stop it first, or restart" in n for n in notifications(app))
        # The palette says it too, and refuses the same way.
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Start engine")
        assert command.help.endswith("— not now: the engine is ready: stop it first, or restart")
        await command.callback()
        assert backend.calls == []
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, KeysScreen)
        row = app.screen.sections[0].rows[0]
        assert row.label == "Start" and row.not_now and "stop it first" in row.not_now


async def test_an_operation_running_greys_start_restart_stop_and_back() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(OperationChanged(OperationView("stop")), EngineChanged(EngineState.STOPPING))
        await settle(pilot, app)
        await pilot.pause()
        for action in ("start", "restart", "stop"):
            key = footer_key(app, action)
            assert key.has_class("-disabled") and "stop is running" in str(key.tooltip)
            assert app.query_one(f"#btn-{action}", Button).disabled
        backend.post(OperationChanged(OperationView("stop", running=False, ok=True)),
                     EngineChanged(EngineState.STOPPED))
        await settle(pilot, app)
        await pilot.pause()
        assert not any(footer_key(app, a).has_class("-disabled") for a in ("start", "restart", "stop"))


def assert_footer_whole(app: SparkApp) -> list[str]:
    """Every key in the footer lies whole inside it, none over another or under the palette's key; returns
    the binding ids shown."""
    footer = app.query_one(FittedFooter)
    keys = list(footer.query(FooterKey))
    palette = [k for k in keys if k.has_class("-command-palette")]
    assert len(palette) == 1
    right = palette[0].region.x
    spans = sorted((k.region.x, k.region.right) for k in keys if k not in palette)
    assert spans and spans[-1][1] <= right <= footer.region.right
    assert all(a[1] <= b[0] for a, b in pairwise(spans))
    # Each is drawn as wide as its text: key and description whole.
    line = screen_text(app)
    for key in keys:
        assert key.region.width >= len(key.key_display) + len(key.description) + 1
        assert key.description in line
    ids = app.key_bindings()
    return [next(i for i, b in ids.items() if b.action == a) for a in footer.shown_actions]


@pytest.mark.parametrize("width", [80, 100, 120, 200])
async def test_the_footer_is_never_cut(width: int) -> None:
    app, _ = make_app()
    async with app.run_test(size=(width, 40)) as pilot:
        await settle(pilot, app)
        await pilot.pause()
        shown = assert_footer_whole(app)
        assert {"help", "quit", "start", "stop"} <= set(shown)
        # What is left out is always less important than everything shown.
        ranks = [FOOTER_RANK.index(i) for i in shown]
        assert set(range(len(shown))) == set(ranks)
        if width >= 200:
            assert set(shown) == set(FOOTER_RANK)
        # In the bindings' order, not in the order of importance.
        order = list(app.key_bindings())
        assert shown == sorted(shown, key=order.index)


async def test_the_footer_fits_again_after_a_resize() -> None:
    app, _ = make_app()
    async with app.run_test(size=(200, 40)) as pilot:
        await settle(pilot, app)
        assert len(assert_footer_whole(app)) == len(FOOTER_RANK)
        await pilot.resize_terminal(80, 24)
        footer = app.query_one(FittedFooter)

        def refitted() -> bool:   # the footer recomposes after the resize's refresh
            keys = list(footer.query(FooterKey))
            return footer.region.width == 80 and bool(keys) and all(
                k.region.width and k.region.right <= footer.region.right for k in keys)

        await wait_until(refitted, "the footer refitted to 80 columns", pilot=pilot,
                         state=lambda: [k.region for k in footer.query(FooterKey)])
        await pilot.pause()
        shown = assert_footer_whole(app)
        assert len(shown) < len(FOOTER_RANK) and {"help", "quit"} <= set(shown)


async def test_a_greyed_key_typed_into_a_text_box_is_text_not_a_refusal() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("n")   # nothing searched yet: n says why it does nothing
        await settle(pilot, app)
        assert any("nothing to find yet" in n for n in notifications(app))
        app.clear_notifications()
        await pilot.press("slash", "n", "N", "s", "t")
        await settle(pilot, app)
        assert notifications(app) == [] and backend.calls == []
        assert app.query_one("#log-input").value == "nNst"


async def tooltip_over(pilot: Pilot[int], app: SparkApp, widget: Widget, expected: str) -> str:
    """Hover ``widget`` and wait (up to 3 s) for the tooltip to say ``expected``; what it says then."""
    await pilot.hover(widget)
    text = ""
    for _ in range(60):
        await pilot.pause(0.05)
        tooltip = app.screen.query_one("#textual-tooltip")
        text = str(tooltip.render()) if tooltip.display else ""
        if text == expected:
            break
    return text


async def test_hovering_a_greyed_start_says_why() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40), tooltips=True) as pilot:
        await settle(pilot, app)
        backend.post(EngineChanged(EngineState.READY))
        await settle(pilot, app)
        reason = "the engine is ready: stop it first, or restart"
        for widget, says in ((app.query_one("#btn-start"), f"not now: {reason}"),
                             (footer_key(app, "start"), f"Start: not now — {reason}")):
            assert await tooltip_over(pilot, app, widget, says) == says
