"""The log pane: batched writes, bounded buffer, filter by text/level/node, find, follow, progress bars
collapsed into one line, switching to a node's Ray worker log, full-screen mode."""

from __future__ import annotations

from sparktui.config import UIConfig
from sparktui.domain.events import LogRecords
from sparktui.domain.logs import is_probe_request, parse_line
from sparktui.sim.recording import DEFAULT_RECORDING, recording_text
from sparktui.ui.app import SparkApp
from sparktui.ui.widgets.log_pane import LogPane
from tests.ui_fakes import FakeBackend, make_app, settle

REAL_LINES = [line for line in recording_text(DEFAULT_RECORDING).splitlines() if line.strip()]


def records(lines: list[str]) -> list[object]:
    return [parse_line(line) for line in lines]


def shown(app: object) -> list[str]:
    return list(app.query_one(LogPane).log_widget.lines)  # type: ignore[attr-defined]


async def test_a_burst_is_written_in_one_batch() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        pane = app.query_one(LogPane)
        before = pane.flushes
        plain = [line for line in REAL_LINES if not parse_line(line).is_progress
                 and not is_probe_request(parse_line(line).message)][:600]
        for i in range(0, 600, 3):   # many small events, as a follower posts them
            backend.post(LogRecords("vllm", records(plain[i : i + 3])))
        await settle(pilot, app)
        assert pane.flushes == before + 1
        assert pane.log_widget.line_count == 600


async def test_buffer_is_bounded() -> None:
    app, backend = make_app(log_buffer_lines=100)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        lines = [f"INFO 01-01 00:00:00 [x.py:1] line {i}" for i in range(1000)]
        backend.post(LogRecords("vllm", records(lines)))
        await settle(pilot, app)
        pane = app.query_one(LogPane)
        assert pane.log_widget.line_count == 100
        assert len(pane.buffers["vllm"]) == 100
        assert shown(app)[-1].endswith("line 999")


async def test_filter_by_text_level_and_node() -> None:
    app, backend = make_app()
    lines = [
        "INFO 04-14 16:08:05 [config.py:600] This model supports multiple tasks",
        "WARNING 04-14 16:08:05 [arg_utils.py:1] Chunked prefill is enabled by default",
        "ERROR 04-14 16:08:06 [core.py:2] something broke",
        "\x1b[36m(RayWorkerWrapper pid=327, ip=10.0.0.2)\x1b[0m "
        "INFO 04-14 16:08:10 [worker.py:3] worker says hi",
    ]
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(LogRecords("vllm", records(lines)))
        await settle(pilot, app)
        assert len(shown(app)) == 4
        # Text filter through the input line.
        await pilot.press("f")
        await pilot.press(*"chunked")
        await pilot.press("enter")
        await settle(pilot, app)
        assert len(shown(app)) == 1 and "Chunked prefill" in shown(app)[0]
        await pilot.press("f")
        await pilot.press("escape")   # clears the filter
        await settle(pilot, app)
        assert len(shown(app)) == 4
        # Level: all → INFO → WARNING.
        await pilot.press("l", "l")
        await settle(pilot, app)
        assert [("WARNING" in s or "ERROR" in s) for s in shown(app)] == [True, True]
        await pilot.press("l", "l")   # → ERROR → all
        await settle(pilot, app)
        assert len(shown(app)) == 4
        # Node: all → head → 10.0.0.2.
        await pilot.press("o", "o")
        await settle(pilot, app)
        assert len(shown(app)) == 1 and "worker says hi" in shown(app)[0]
        # New lines respect the filter too.
        backend.post(LogRecords("vllm", records(["INFO 04-14 16:08:11 [x.py:1] head again"])))
        await settle(pilot, app)
        assert len(shown(app)) == 1


async def test_follow_pauses_when_scrolled_up_and_resumes_at_end() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        pane = app.query_one(LogPane)
        log = pane.log_widget
        backend.post(LogRecords("vllm", records(REAL_LINES[:300])))
        await settle(pilot, app)
        assert pane.follow and log.is_vertical_scroll_end
        log.scroll_home(animate=False, immediate=True)
        await pilot.pause()
        backend.post(LogRecords("vllm", records(REAL_LINES[300:400])))
        await settle(pilot, app)
        assert not pane.follow
        assert log.scroll_y == 0
        assert "paused" in str(app.query_one("#log-status").render())
        await pilot.press("end")
        await settle(pilot, app)
        backend.post(LogRecords("vllm", records(REAL_LINES[400:450])))
        await settle(pilot, app)
        assert pane.follow and log.is_vertical_scroll_end
        assert "following" in str(app.query_one("#log-status").render())


async def test_progress_updates_collapse_into_one_line() -> None:
    app, backend = make_app()
    bars = [f"Loading safetensors checkpoint shards:  {p}% Completed | {n}/30 [00:0{n % 10}<00:03,  7.20it/s]"
            for n, p in ((1, 3), (2, 7), (15, 50), (30, 100))]
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        first = ["INFO 04-14 16:11:21 [weight_utils.py:1] loading", *bars[:2]]
        backend.post(LogRecords("vllm", records(first)))
        await settle(pilot, app)
        # While the bar moves it is shown in the progress line, not in the log.
        assert not any("safetensors" in s for s in shown(app))
        assert "2/30" in str(app.query_one("#log-progress").render())
        backend.post(LogRecords("vllm", records([*bars[2:], "INFO 04-14 16:11:27 [loader.py:447] Loading "
                                                 "weights took 5.60 seconds"])))
        await settle(pilot, app)
        bar_lines = [s for s in shown(app) if "safetensors" in s]
        assert len(bar_lines) == 1 and "30/30" in bar_lines[0]
        assert "Loading weights took" in shown(app)[-1]
        assert not app.query_one("#log-progress").display


async def test_find_jumps_to_a_match_and_pauses_follow() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(LogRecords("vllm", records(REAL_LINES[:400])))
        await settle(pilot, app)
        pane = app.query_one(LogPane)
        await pilot.press("slash")
        await pilot.press(*"placement group")
        await pilot.press("enter")
        await settle(pilot, app)
        assert pane.find_term == "placement group"
        assert not pane.follow
        log = pane.log_widget
        top = int(log.scroll_y)
        visible = log.lines[top : top + log.scrollable_content_region.height]
        assert any("placement group" in line.lower() for line in visible)
        await pilot.press("escape")
        await settle(pilot, app)
        assert pane.find_term == ""


async def test_switch_to_a_nodes_ray_worker_log() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(LogRecords("vllm", records(["INFO 04-14 16:08:05 [x.py:1] engine line"])))
        await settle(pilot, app)
        await pilot.press("w")
        await settle(pilot, app)
        assert backend.calls == ["select_log:ray:spark1"]
        assert "@spark1" in str(app.query_one("#log-status").render())
        assert shown(app) == []
        backend.post(LogRecords("ray:spark1", records(["INFO 04-14 16:08:06 [worker.py:1] raylet says hi"])),
                     LogRecords("vllm", records(["INFO 04-14 16:08:07 [x.py:1] more engine"])))
        await settle(pilot, app)
        assert len(shown(app)) == 1 and "raylet says hi" in shown(app)[0]
        await pilot.press("w", "w")   # → ray:spark2 → back to the vLLM log, which kept its lines
        await settle(pilot, app)
        assert backend.calls[-1] == "select_log:vllm"
        assert len(shown(app)) == 2
        assert shown(app)[0].endswith("engine line") and shown(app)[1].endswith("more engine")


async def test_full_screen_log_toggles() -> None:
    app, _ = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        before = app.query_one(LogPane).size.height
        await pilot.press("z")
        await pilot.pause()
        assert not app.query_one("#top").display or app.query_one(LogPane).size.height > before
        assert app.query_one(LogPane).size.height > before
        await pilot.press("z")
        await pilot.pause()
        assert app.query_one(LogPane).size.height == before


async def test_worker_lines_name_the_node_not_its_address() -> None:
    backend = FakeBackend()
    app = SparkApp(backend, UIConfig(), roles={"spark1": "head", "spark2": "worker"},
                   node_addresses={"192.168.100.11": "spark2"})
    line = ("\x1b[36m(RayWorkerWrapper pid=327, ip=192.168.100.11)\x1b[0m "
            "INFO 04-14 16:08:10 [worker.py:3] worker says hi")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(LogRecords("vllm", records([line, "INFO 04-14 16:08:11 [x.py:1] head says hi"])))
        await settle(pilot, app)
        assert "[spark2 RayWorkerWrapper] worker says hi" in shown(app)[0]
        await pilot.press("o", "o")   # all → head → spark2
        await settle(pilot, app)
        assert app.query_one(LogPane).node_filter == "spark2"
        assert len(shown(app)) == 1 and "worker says hi" in shown(app)[0]


async def test_typing_in_the_filter_line_never_triggers_a_control() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("f")
        await pilot.press(*"stxrq")
        await settle(pilot, app)
        assert backend.calls == []
        assert app.query_one(LogPane).filter_text == "stxrq"
        assert app.is_running


async def test_probe_lines_are_hidden_counted_and_shown_on_h() -> None:
    app, backend = make_app()
    lines = [
        "INFO 04-14 16:08:05 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000",
        'INFO:     127.0.0.1:40000 - "GET /health HTTP/1.1" 200 OK',
        'INFO:     127.0.0.1:40002 - "GET /metrics HTTP/1.1" 200 OK',
        'INFO:     10.0.0.5:45344 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        'INFO:     127.0.0.1:40004 - "GET /health HTTP/1.1" 503 Service Unavailable',
    ]
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(LogRecords("vllm", records(lines)))
        await settle(pilot, app)
        pane = app.query_one(LogPane)
        assert [s.rstrip()[-19:] for s in shown(app)] == [
            "http://0.0.0.0:8000", 'ons HTTP/1.1" 200 OK'[-19:], "Service Unavailable"]
        assert pane.probes_hidden == 2
        assert "probes hidden (h)" in str(app.query_one("#log-status").render())
        assert len(pane.buffers["vllm"]) == 5   # kept: h shows them
        await pilot.press("h")
        await settle(pilot, app)
        assert len(shown(app)) == 5 and "GET /metrics" in shown(app)[2]
        assert "hidden" not in str(app.query_one("#log-status").render())
        assert "GET /health" in pane.view_text()
        await pilot.press("h")
        await settle(pilot, app)
        assert len(shown(app)) == 3 and pane.probes_hidden == 2
        assert "GET /metrics" not in pane.view_text()
        # The one-by-one path (a bar moving) hides them too; the bar's last state goes to the log.
        bar = "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.00s/it]"
        backend.post(LogRecords("vllm", records([bar, lines[1]])))
        await settle(pilot, app)
        assert pane.probes_hidden == 3 and len(shown(app)) == 4 and "shards" in shown(app)[-1]
