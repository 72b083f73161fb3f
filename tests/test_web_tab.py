"""A ``--web`` tab's dashboard process (``sparktui.ui.web_tab``) in the state that made Textual's web driver
ignore every way to end it: its main thread blocked writing a frame into a stdout nobody reads (textual-serve
stops reading a tab whose websocket send failed). A signal, a ``quit`` or its stdin's EOF still end it, in
``EXIT_GRACE_S``. The process is the real dashboard (the demo) under the web driver, as textual-serve runs
it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparktui.ui.web import SERVER_PID_ENV, app_command
from sparktui.ui.web_tab import EXIT_GRACE_S

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _blocked_tab(tmp_path: Path) -> subprocess.Popen[bytes]:
    """A tab's process started as textual-serve starts one, whose stdout is never read: once the pipe is
    full its main thread sits in write(2)."""
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path), "SPARKTUI_CONFIG": "",
           "TEXTUAL_DRIVER": "textual.drivers.web_driver:WebDriver", "COLUMNS": "200", "ROWS": "60",
           SERVER_PID_ENV: str(os.getpid())}
    tab = subprocess.Popen([sys.executable, "-m", "sparktui", "--demo"], env=env, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if "pipe_write" in Path(f"/proc/{tab.pid}/wchan").read_text():
            return tab
        time.sleep(0.1)
    tab.kill()
    raise AssertionError("the tab's process did not fill its stdout within 60 s")


def _quit(tab: subprocess.Popen[bytes]) -> None:
    """textual-serve's quit message (a tab closed, the server stopping)."""
    assert tab.stdin is not None
    payload = json.dumps({"type": "quit"}).encode()
    tab.stdin.write(b"M" + len(payload).to_bytes(4, "big") + payload)
    tab.stdin.flush()


def _eof(tab: subprocess.Popen[bytes]) -> None:
    assert tab.stdin is not None
    tab.stdin.close()


# SIGINT takes SIGTERM's path (one handler for both).
@pytest.mark.parametrize("end", [lambda tab: tab.send_signal(signal.SIGTERM), _quit, _eof],
                         ids=["SIGTERM", "quit", "stdin-EOF"])
def test_a_blocked_tab_process_still_ends(tmp_path: Path, end) -> None:  # type: ignore[no-untyped-def]
    tab = _blocked_tab(tmp_path)
    try:
        asked = time.monotonic()
        end(tab)
        tab.wait(EXIT_GRACE_S + 5)
        assert time.monotonic() - asked < EXIT_GRACE_S + 2
    finally:
        tab.kill()
        tab.wait()
        for pipe in (tab.stdin, tab.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()


def test_a_tab_process_ends_when_its_server_is_gone(tmp_path: Path) -> None:
    """Started for a server that is not its parent (that server died before the tab got going): it ends at
    once rather than run unseen."""
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path), "SPARKTUI_CONFIG": "",
           "TEXTUAL_DRIVER": "textual.drivers.web_driver:WebDriver", SERVER_PID_ENV: "1"}
    done = subprocess.run([sys.executable, "-m", "sparktui", "--demo"], env=env, stdin=subprocess.PIPE,
                          capture_output=True, timeout=30)
    assert done.returncode == 0 and b"__GANGLION__" not in done.stdout


def test_the_tab_command_makes_the_dashboard_the_servers_own_child() -> None:
    """``exec``: no shell between the server and the dashboard (signals and the server's death reach it)."""
    assert (app_command(["--demo", "--web", "--port", "9000", "--readonly"], python="/usr/bin/python3")
            == "exec /usr/bin/python3 -m sparktui --demo --readonly")
