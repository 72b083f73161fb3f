"""A headless Chromium driven over the Chrome DevTools Protocol, for the web-mode test.

Debian's ``chromium`` package and aiohttp's websocket client (aiohttp comes with textual-serve) are all it
needs: no browser download, no webdriver. Only what the tests use: open a page, click, type, press keys,
take a screenshot, read a tab the page opened, open and close tabs.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp

#: Windows virtual key codes CDP wants for the non-printing keys the test presses.
_KEYS = {"Enter": ("Enter", 13, "\r"), "Escape": ("Escape", 27, "")}


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    def __init__(self, width: int = 1600, height: int = 1000) -> None:
        self.size = (width, height)
        self._profile = tempfile.mkdtemp(prefix="sparktui-chromium-")
        self._proc: subprocess.Popen[str] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._page: aiohttp.ClientWebSocketResponse | None = None
        self._browser: aiohttp.ClientWebSocketResponse | None = None
        self._id = 0
        self._port = 0

    async def __aenter__(self) -> Browser:
        exe = chromium()
        assert exe, "chromium is not installed (apt-get install chromium)"
        self._proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--remote-debugging-port=0", f"--user-data-dir={self._profile}",
             f"--window-size={self.size[0]},{self.size[1]}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        browser_url = await asyncio.to_thread(self._devtools_url)
        self._port = int(re.search(r":(\d+)/", browser_url).group(1))  # type: ignore[union-attr]
        self._session = aiohttp.ClientSession()
        page = (await self.pages())[0]
        self._page = await self._session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        self._browser = await self._session.ws_connect(browser_url, max_msg_size=0)
        await self.call("Page.enable")
        return self

    def _devtools_url(self, timeout: float = 30.0) -> str:
        assert self._proc is not None and self._proc.stderr is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self._proc.stderr.readline()
            if not line and self._proc.poll() is not None:
                break
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            if found:
                return found.group(1)
        raise RuntimeError("chromium did not start its DevTools endpoint")

    async def __aexit__(self, *exc: tuple[type[BaseException] | None, BaseException | None,
                                          TracebackType | None]) -> None:
        if self._browser is not None:
            # Asked to close, Chromium ends its renderers and itself at once; SIGTERM takes it ~10 s.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.call("Browser.close", browser=True), 5)
        for ws in (self._page, self._browser):
            if ws is not None:
                await ws.close()
        if self._session is not None:
            await self._session.close()
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)
            # Its whole process group: a renderer left behind would hold the stderr pipe open.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(5)
        shutil.rmtree(self._profile, ignore_errors=True)

    async def call(self, method: str, *, browser: bool = False, **params: Any) -> dict[str, Any]:
        ws = self._browser if browser else self._page
        assert ws is not None
        self._id += 1
        mine = self._id
        await ws.send_json({"id": mine, "method": method, "params": params})
        while True:
            msg = await asyncio.wait_for(ws.receive_json(), 30)
            if msg.get("id") == mine:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))

    async def pages(self) -> list[dict[str, Any]]:
        """The browser's open pages (tabs), as DevTools lists them."""
        assert self._session is not None
        targets = await (await self._session.get(f"http://127.0.0.1:{self._port}/json/list")).json()
        return [t for t in targets if t["type"] == "page"]

    async def page_text(self, url_part: str) -> str | None:
        """The document of an open tab whose address contains ``url_part`` (e.g. a file the page opened in a
        new tab), read through that tab, which is then closed; None while there is none."""
        assert self._session is not None
        page = next((p for p in await self.pages() if url_part in p.get("url", "")), None)
        if page is None:
            return None
        async with self._session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            await ws.send_json({"id": 1, "method": "Runtime.evaluate",
                                "params": {"expression": "document.documentElement.outerHTML",
                                           "returnByValue": True}})
            while True:
                msg = await asyncio.wait_for(ws.receive_json(), 30)
                if msg.get("id") == 1:
                    text = str(msg.get("result", {}).get("result", {}).get("value", ""))
                    break
        await self._session.get(f"http://127.0.0.1:{self._port}/json/close/{page['id']}")
        return text

    async def open(self, url: str) -> None:
        await self.call("Page.navigate", url=url)

    async def new_tab(self, url: str) -> str:
        """Opens ``url`` in a tab of its own; returns the tab's id for ``close_tab``."""
        return str((await self.call("Target.createTarget", browser=True, url=url))["targetId"])

    async def close_tab(self, tab: str) -> None:
        await self.call("Target.closeTarget", browser=True, targetId=tab)

    async def click(self, x: int, y: int) -> None:
        for kind in ("mousePressed", "mouseReleased"):
            await self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    async def type(self, text: str) -> None:
        await self.call("Input.insertText", text=text)

    async def press(self, key: str, *, ctrl: bool = False) -> None:
        """A named key (Enter, Escape) or a letter, optionally with Ctrl."""
        name, code, text = _KEYS[key] if key in _KEYS else (key, ord(key.upper()), "" if ctrl else key)
        dom_code = f"Key{key.upper()}" if len(key) == 1 else name
        for kind in ("keyDown", "keyUp"):
            await self.call("Input.dispatchKeyEvent", type=kind, key=name, code=dom_code,
                            windowsVirtualKeyCode=code, modifiers=2 if ctrl else 0,
                            text=text if kind == "keyDown" else "")

    async def screenshot(self, path: Path) -> Path:
        shot = await self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))
        return path
