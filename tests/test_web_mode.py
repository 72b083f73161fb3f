"""``sparktui --web`` in a real headless Chromium (Debian's package, driven over the DevTools protocol): the
page shows the dashboard — both node panels and the stage bars, read from the SVG screenshot the app
delivers *through the browser* (it opens in a new tab) — and key presses typed into the page reach the app."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

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
