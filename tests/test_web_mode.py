"""``sparktui --web`` in a real headless Chromium (Debian's package, driven over the DevTools protocol): the
page shows the dashboard — both node panels and the stage bars, read from the SVG screenshot the app
delivers *through the browser* (it opens in a new tab) — and key presses typed into the page reach the app.
No tab's dashboard process outlives its tab or its server, however the server ends."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from tests.browser_cdp import Browser, chromium

pytestmark = pytest.mark.skipif(
    chromium() is None and os.environ.get("CI") != "true",
    reason="chromium is missing: apt-get install chromium (CI installs it)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"sparktui --web did not listen on {port} within {timeout} s")


async def _until(check, timeout: float, step, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await step()
        found = check()
        if found:
            return found
    raise AssertionError(f"timed out waiting for {what}")


async def test_the_dashboard_in_a_browser(tmp_path: Path) -> None:
    import asyncio

    port = _free_port()
    state = tmp_path / "state"
    env = {**os.environ, "XDG_STATE_HOME": str(state), "SPARKTUI_CONFIG": ""}
    out = (tmp_path / "server.log").open("w")
    server = subprocess.Popen([sys.executable, "-m", "sparktui", "--demo", "--web", "--port", str(port)],
                              env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_port(port, 30)
        async with Browser() as browser:
            await browser.open(f"http://127.0.0.1:{port}/")

            # A key typed into the page reaches the app: ctrl+s saves its log into the state directory.
            async def press_save() -> None:
                await asyncio.sleep(2)
                await browser.click(800, 600)
                await browser.press("s", ctrl=True)

            saved = await _until(lambda: list((state / "sparktui").glob("sparktui-log-vllm-*.txt")), 60,
                                 press_save, "ctrl+s in the browser to save the log")
            assert saved

            # The screen: the palette's screenshot, which textual-serve hands to the browser (a new tab).
            # Taken again until the demo is past preflight (its steps stand where the stage bars go).
            wanted = ("spark1", "spark2", "head", "worker", "Ray placement", "weights", "CUDA graphs",
                      "API server", "Start", "Stop")
            screens: list[str] = []

            async def screenshot() -> None:
                await browser.press("p", ctrl=True)
                await asyncio.sleep(1)
                await browser.type("screenshot")
                await asyncio.sleep(1)
                await browser.press("Enter")
                for _ in range(20):
                    await asyncio.sleep(0.5)
                    text = await browser.page_text("/download/")
                    if text:
                        for space in ("&nbsp;", "\xa0", "&#160;"):
                            text = text.replace(space, " ")
                        screens.append(text)
                        return

            await _until(lambda: screens and all(t in screens[-1] for t in wanted), 90, screenshot,
                         "a screenshot of the dashboard past preflight")
            svg = screens[-1]
            for text in wanted:
                assert text in svg, f"{text!r} is not on the page's screen"
            png = await browser.screenshot(tmp_path / "web.png")
            assert png.stat().st_size > 20_000   # a rendered dashboard, not a blank page
    finally:
        os.killpg(server.pid, 15)
        server.wait(15)
        out.close()


def _ours(token: str) -> list[psutil.Process]:
    """Every process started with ``token`` in its environment: servers, tabs' dashboards, anything left."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if "sparktui" in " ".join(proc.info["cmdline"] or ()) and proc.environ().get(_TOKEN) == token:
                found.append(proc)
    return found


def _cpu(procs: list[psutil.Process]) -> list[str]:
    """Each process with its CPU share over a second, for a failure to show what is left and what spins."""
    shares = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.cpu_percent()
    time.sleep(1)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            shares.append(f"{proc.pid} {' '.join(proc.cmdline())} {proc.cpu_percent():.0f} % CPU")
    return shares


_TOKEN = "SPARKTUI_TEST_WEB_RUN"


async def test_no_dashboard_process_outlives_its_tab_or_server(tmp_path: Path) -> None:
    """Three servers, one stopped each way (SIGTERM, SIGINT, SIGKILL: the tab's process must see its server
    die), each with a tab open; the first also with a tab that is closed. Afterwards nothing of ours runs."""
    import asyncio

    token = uuid.uuid4().hex
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "SPARKTUI_CONFIG": "", _TOKEN: token}
    stops = (signal.SIGTERM, signal.SIGINT, signal.SIGKILL)
    servers: dict[signal.Signals, tuple[subprocess.Popen[bytes], int]] = {}
    try:
        for how in stops:
            port = _free_port()
            log = (tmp_path / f"server-{how.name}.log").open("w")
            servers[how] = (subprocess.Popen(
                [sys.executable, "-m", "sparktui", "--demo", "--web", "--port", str(port)], env=env,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True), port)
        for _, port in servers.values():
            _wait_port(port, 60)

        def tabs(how: signal.Signals) -> list[psutil.Process]:
            with contextlib.suppress(psutil.Error):
                return [p for p in psutil.Process(servers[how][0].pid).children() if p.is_running()
                        and p.status() != psutil.STATUS_ZOMBIE]
            return []

        async def tick() -> None:
            await asyncio.sleep(0.2)

        async with Browser() as browser:
            for _, port in servers.values():
                await browser.new_tab(f"http://127.0.0.1:{port}/")
            closing = await browser.new_tab(f"http://127.0.0.1:{servers[signal.SIGTERM][1]}/")
            await _until(lambda: all(len(tabs(how)) == (2 if how == signal.SIGTERM else 1) for how in stops),
                         60, tick, "a dashboard process for every tab")

            await browser.close_tab(closing)
            # The server learns of the close from the websocket: at once from a close frame, or (a connection
            # that just drops) from aiohttp's heartbeat, 15 s + its pong wait. The tab's process then has
            # EXIT_GRACE_S. On a loaded CI box the first path alone has taken over 10 s.
            await _until(lambda: len(tabs(signal.SIGTERM)) == 1, 40, tick, "the closed tab's process to end")

            # The servers stop while their tabs are still open.
            for how, (server, _) in servers.items():
                server.send_signal(how)
            for how, (server, _) in servers.items():
                assert server.wait(15) == (-9 if how == signal.SIGKILL else 0), how.name

        deadline = time.monotonic() + 10
        while _ours(token) and time.monotonic() < deadline:
            await tick()
        left = _ours(token)
        assert not left, "left behind after 10 s:\n" + "\n".join(_cpu(left))
    finally:
        for proc in _ours(token):
            with contextlib.suppress(psutil.Error):
                proc.kill()
