"""The keys an expert terminal user already knows (issue 15): the log speaks less/vim from anywhere, find
counts and marks its matches, wrap, save and copy; focus you can see; read-only that looks read-only; a quit
that says the engine keeps running; screenshots where the config says."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Button

from sparktui.domain.events import EngineChanged, EngineState, LogRecords
from sparktui.domain.logs import parse_line
from sparktui.ui.widgets.log_pane import LogPane
from tests.ui_fakes import FakeBackend, make_app, notifications, settle

LINES = [f"INFO 01-01 00:00:{i % 60:02d} [x.py:1] line {i}" + (" needle" if i % 50 == 7 else "")
         for i in range(400)]


def records(lines: list[str]) -> list[object]:
    return [parse_line(line) for line in lines]


async def _filled(pilot, app, backend, lines=LINES):  # type: ignore[no-untyped-def]
    await settle(pilot, app)
    backend.post(LogRecords("vllm", records(lines)))
    await settle(pilot, app)
    return app.query_one(LogPane)


async def test_movement_keys_work_from_anywhere_and_end_always_resumes() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await _filled(pilot, app, backend)
        log = pane.log_widget
        app.query_one("#btn-start", Button).focus()   # not the log: the keys must still reach it
        await pilot.pause()
        for _ in range(7):   # End after PageUp left "paused" in 3 of 7 tries before
            await pilot.press("pageup")
            await settle(pilot, app)
            assert not pane.follow and log.scroll_y < log.max_scroll_y
            await pilot.press("end")
            await settle(pilot, app)
            assert pane.follow and log.scroll_y == log.max_scroll_y
            assert "following" in str(app.query_one("#log-status").render())
        await pilot.press("g")
        await settle(pilot, app)
        assert log.scroll_y == 0 and not pane.follow
        await pilot.press("j", "j", "j")
        await settle(pilot, app)
        assert log.scroll_y == 3
        await pilot.press("k")
        await settle(pilot, app)
        assert log.scroll_y == 2
        await pilot.press("pagedown")
        await settle(pilot, app)
        assert log.scroll_y == 2 + log.scrollable_content_region.height
        await pilot.press("G")
        await settle(pilot, app)
        assert pane.follow and log.scroll_y == log.max_scroll_y
        await pilot.press("home")
        await settle(pilot, app)
        assert log.scroll_y == 0
        # With the log focused, its own keys go the same way (no animation racing the follow check).
        log.focus()
        await pilot.press("pageup", "end")
        await settle(pilot, app)
        assert pane.follow and log.scroll_y == log.max_scroll_y


async def test_find_counts_marks_and_n_is_next_N_previous() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await _filled(pilot, app, backend)
        log = pane.log_widget
        needles = [y for y, line in enumerate(log.lines) if "needle" in line]
        assert len(needles) == 8
        await pilot.press("slash", *"needle", "enter")
        await settle(pilot, app)
        status = str(app.query_one("#log-status").render())
        # From a following log the search lands on the newest match, counted, and the box is closed.
        assert log.current_line == needles[-1] and "[8/8]" in status
        assert not app.query_one("#log-input").display
        await pilot.press("N")   # previous = earlier
        await settle(pilot, app)
        assert log.current_line == needles[-2] and "[7/8]" in str(app.query_one("#log-status").render())
        await pilot.press("n")   # next = later
        await settle(pilot, app)
        assert log.current_line == needles[-1]
        await pilot.press("n")   # past the last: wraps to the first, and says so
        await settle(pilot, app)
        status = str(app.query_one("#log-status").render())
        assert log.current_line == needles[0] and "[1/8]" in status and "wrapped" in status
        # The current match looks unlike the others: its line carries the current-match background.
        top = int(log.scroll_y)
        strip = log.render_line(needles[0] - top)
        other = log.render_line(next(y for y in needles[1:] if top <= y < top + log.size.height) - top) \
            if any(top <= y < top + log.size.height for y in needles[1:]) else None
        marked = log.CURRENT_MATCH_STYLE.bgcolor
        assert any(seg.style and seg.style.bgcolor == marked for seg in strip)
        if other is not None:
            assert not any(seg.style and seg.style.bgcolor == marked for seg in other)
        await pilot.press("escape")   # clears the find
        await settle(pilot, app)
        assert pane.find_term == "" and log.current_line is None


async def test_keys_typed_into_the_find_box_stay_there() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await _filled(pilot, app, backend)
        await pilot.press("slash", *"jkgGnNW")
        await settle(pilot, app)
        assert pane.find_term == "jkgGnNW"
        # None of them moved the log (it still follows at its end) or folded it.
        log = pane.log_widget
        assert pane.follow and log.scroll_y == log.max_scroll_y and not pane.wrap
        assert backend.calls == []


async def test_wrap_toggle_folds_long_lines() -> None:
    app, backend = make_app()
    long = "INFO 01-01 00:00:00 [x.py:1] " + "word " * 100
    async with app.run_test(size=(120, 40)) as pilot:
        pane = await _filled(pilot, app, backend, [long, "INFO 01-01 00:00:01 [x.py:1] short"])
        assert pane.log_widget.line_count == 2
        await pilot.press("W")
        await settle(pilot, app)
        width = pane.log_widget.scrollable_content_region.width
        assert pane.wrap and pane.log_widget.line_count > 3
        assert all(len(line) <= width for line in pane.log_widget.lines)
        assert "wrap" in str(app.query_one("#log-status").render())
        await pilot.press("W")
        await settle(pilot, app)
        assert not pane.wrap and pane.log_widget.line_count == 2


async def test_a_filter_that_hides_everything_says_so() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await _filled(pilot, app, backend)
        await pilot.press("l", "l", "l")   # → ERROR: none of the INFO lines pass
        await settle(pilot, app)
        empty = app.query_one("#log-empty")
        assert empty.display and "no matching lines" in str(empty.render())
        assert "level ≥ ERROR" in str(empty.render())
        await pilot.press("l")   # → all
        await settle(pilot, app)
        assert not empty.display


async def test_ctrl_s_saves_the_view_where_the_config_says(tmp_path: Path) -> None:
    app, backend = make_app(screenshot_dir=str(tmp_path / "out"))
    async with app.run_test(size=(120, 40)) as pilot:
        await _filled(pilot, app, backend)
        await pilot.press("f", *"needle", "enter")
        await settle(pilot, app)
        await pilot.press("ctrl+s")
        await settle(pilot, app)
        saved = list((tmp_path / "out").glob("sparktui-log-vllm-*.txt"))
        assert len(saved) == 1
        lines = saved[0].read_text().splitlines()
        assert len(lines) == 8 and all("needle" in line for line in lines)
        assert any(str(saved[0]) in n and "filtered view" in n for n in notifications(app))


async def test_c_copies_the_current_line_through_osc52() -> None:
    app, backend = make_app()
    copied: list[str] = []
    async with app.run_test(size=(120, 40)) as pilot:
        app.copy_to_clipboard = copied.append  # type: ignore[method-assign]
        await _filled(pilot, app, backend)
        await pilot.press("c")   # no match: the last line in view
        await settle(pilot, app)
        assert copied[-1].endswith("line 399")
        await pilot.press("slash", *"needle", "enter", "N")
        await settle(pilot, app)
        await pilot.press("c")
        await settle(pilot, app)
        assert copied[-1].endswith("line 307 needle")


async def test_focus_is_visible() -> None:
    app, _ = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        start, stop = app.query_one("#btn-start", Button), app.query_one("#btn-stop", Button)
        start.focus()
        await pilot.pause()
        assert "reverse" in str(start.styles.text_style) and "reverse" not in str(stop.styles.text_style)


async def test_readonly_shows_a_badge_and_hides_the_control_keys() -> None:
    app, backend = make_app(FakeBackend(readonly=True))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        assert app.query_one("#readonly-badge").display
        assert not any(app.query_one(f"#btn-{a}").display for a in ("start", "restart", "stop"))
        shown_keys = {b.binding.action for b in app.screen.active_bindings.values() if b.binding.show}
        assert not shown_keys & {"start", "restart", "stop"} and "quit" in shown_keys
        await pilot.press("s")   # still answers, with the reason
        await settle(pilot, app)
        assert backend.calls == [] and any("read-only" in n for n in notifications(app))
    app, _ = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        assert not app.query_one("#readonly-badge").display


async def test_quit_with_an_engine_running_says_it_keeps_running() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(EngineChanged(EngineState.READY))
        await settle(pilot, app)
        await pilot.press("q")
        await pilot.pause()
    assert app.exit_message == "the engine keeps running on the nodes — `sparktui stop` stops it"
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(EngineChanged(EngineState.STOPPED))
        await settle(pilot, app)
        await pilot.press("q")
        await pilot.pause()
    assert app.exit_message is None


async def test_screenshots_go_to_the_configured_folder(tmp_path: Path) -> None:
    app, _ = make_app(screenshot_dir=str(tmp_path / "shots"))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        saved = app.deliver_screenshot()
        await settle(pilot, app)
        assert saved is not None and Path(saved).parent == tmp_path / "shots" and Path(saved).exists()
        assert any(saved in n for n in notifications(app))


async def test_charts_say_their_scale_and_window_and_p_pauses_them() -> None:
    app, _ = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        panel = app.query_one("#node-spark1")
        assert panel.border_subtitle == "charts: last 2 min"   # 120 points at the default 1 s
        assert str(app.query_one("#caption-gpu").render()) == "gpu\n100%"
        assert str(app.query_one("#caption-roce").render()).startswith("net\n")
        await pilot.press("p")
        await settle(pilot, app)
        assert all(p.paused for p in app.query(".node-panel"))
        assert "paused" in str(panel.border_subtitle)
        await pilot.press("p")
        await settle(pilot, app)
        assert not panel.paused and panel.border_subtitle == "charts: last 2 min"


async def test_L_runs_the_link_test_and_tells_its_verdict() -> None:
    from sparktui.ui.app import SparkApp
    from tests.ui_fakes import FakeBackend

    async def runner() -> str:
        return "all_reduce_perf busbw 23.1 GB/s ≥ 21.875 GB/s pass mark: the cable is good"

    app = SparkApp(FakeBackend(), roles={"spark1": "head", "spark2": "worker"}, linktest=runner)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("L")
        for _ in range(20):   # the runner is a worker: let it finish
            await settle(pilot, app)
            if any("busbw 23.1 GB/s" in n for n in notifications(app)):
                break
        assert any("busbw 23.1 GB/s" in n for n in notifications(app))
    app, _ = make_app()   # no runner (the demo): it says what it needs
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("L")
        await settle(pilot, app)
        assert any("needs real nodes" in n for n in notifications(app))
