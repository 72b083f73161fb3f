"""``sparktui --web``: the same dashboard in a browser, through textual-serve.

textual-serve runs one dashboard process per browser tab (the command below, with the web driver) and
relays its screen and keys over a websocket. Every tab is a dashboard of its own that attaches to the
engine, as a second terminal would; the engine stays detached on the nodes.

No tab's process outlives its tab or the server: ``sparktui.ui.web_tab`` ends it (its tab closed, its stdin
at EOF, a signal, the server's death), and a server that stops ends any that are left.

Bound to loopback unless told otherwise: the dashboard can start and stop the engine, so a wider address is
said out loud (and ``--readonly`` is the way to share a view).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
import time
from collections.abc import Sequence
from typing import Any

import psutil

from sparktui.domain.addresses import is_loopback

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8566
#: The dashboard's own options that make no sense for the process a tab runs (it is the web server's).
WEB_OPTIONS = {"--web": 0, "--host": 1, "--port": 1}
#: Set for the tabs' processes: the server's pid, whose death ends them (``web_tab.end_with_server``).
SERVER_PID_ENV = "SPARKTUI_WEB_SERVER_PID"
#: Seconds a stopped server gives the tabs' processes left to end on their own before it kills them.
TABS_END_WITHIN_S = 5.0


def app_command(argv: Sequence[str], python: str = sys.executable) -> str:
    """The shell command textual-serve runs per tab: this sparktui, with the same options, minus the web
    server's. textual-serve hands it to a shell, so every word is quoted; ``exec`` makes the dashboard the
    server's own child instead of the shell's (signals reach it, and it sees the server die)."""
    kept: list[str] = []
    skip = 0
    for word in argv:
        if skip:
            skip -= 1
            continue
        name = word.split("=", 1)[0]
        if name in WEB_OPTIONS:
            skip = WEB_OPTIONS[name] if "=" not in word else 0
            continue
        kept.append(word)
    return "exec " + shlex.join([python, "-m", "sparktui", *kept])


def serve(argv: Sequence[str], host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> int:
    try:
        from textual_serve.server import Server
    except ImportError:
        print("sparktui --web needs textual-serve: pip install 'sparktui[web]'",
              file=sys.stderr)
        return 2
    if not is_loopback(host):
        print(f"warning: serving the dashboard on {host}:{port} — anyone who reaches this address can start "
              "and stop the engine; add --readonly to share a view only", file=sys.stderr)
    command = app_command(argv)
    os.environ[SERVER_PID_ENV] = str(os.getpid())   # textual-serve passes its environment to every tab

    class TabEndingServer(Server):
        async def on_shutdown(self, app: Any) -> None:
            # aiohttp's shutdown waits for the open websockets (20 s and more with a tab open); a tab's
            # process that ends says "exit", and textual-serve closes that tab's websocket. Waited for
            # here, while the loop that watches them still runs (asyncio warns of a child it outlives).
            await super().on_shutdown(app)
            tabs = terminate_tabs()
            deadline = time.monotonic() + TABS_END_WITHIN_S
            while running(tabs) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)

    try:
        TabEndingServer(command, host=host, port=port, title="sparktui").serve()
    finally:
        end_tabs()
    return 0


def served_by() -> int | None:
    """In a tab's process: the pid of the ``sparktui --web`` server that started it; None elsewhere. Taken
    out of the environment, so that what the dashboard starts does not read itself as a tab."""
    value = os.environ.pop(SERVER_PID_ENV, "")
    return int(value) if value.isdigit() else None


def terminate_tabs() -> list[psutil.Process]:
    """SIGTERM the tabs' processes (the server's children: ``exec`` made them so); returns them."""
    tabs = psutil.Process().children()
    for tab in tabs:
        with contextlib.suppress(psutil.Error):
            tab.terminate()
    return tabs


def running(tabs: list[psutil.Process]) -> list[psutil.Process]:
    """Those of ``tabs`` that have not ended (a zombie has)."""
    alive = []
    for tab in tabs:
        with contextlib.suppress(psutil.Error):
            if tab.status() != psutil.STATUS_ZOMBIE:
                alive.append(tab)
    return alive


def end_tabs(within: float = TABS_END_WITHIN_S) -> None:
    """Once the server has stopped: the tabs' processes still running (a server stopped before its loop
    ran its shutdown) get SIGTERM, and SIGKILL if not gone ``within`` seconds."""
    _, alive = psutil.wait_procs(terminate_tabs(), timeout=within)
    for tab in alive:
        with contextlib.suppress(psutil.Error):
            tab.kill()
