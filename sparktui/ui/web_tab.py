"""The process behind one ``sparktui --web`` tab ends with its tab and with its server — always.

textual-serve talks to a tab's process over pipes: it writes input and a ``quit`` message to its stdin and
reads the screen from its stdout. Textual's web driver leaves three ways for that process to outlive its
tab (each seen, measured with the demo):

* its stdin's EOF (the server died) ends the input thread and nothing else: the dashboard goes on, unseen;
* ``quit``, SIGTERM and SIGINT only *post* an exit to the event loop. A main thread that does not get back
  to the loop never acts on them: blocked writing a frame into a pipe the server no longer reads (it stops
  reading when a send to a closed websocket fails), the process ignores them all, for as long as the
  server keeps the pipe;
* a parent that is SIGKILLed tells nobody.

So here: every end (``quit``, stdin's EOF, SIGTERM/SIGINT, the server's death via ``PR_SET_PDEATHSIG``) asks
the app to exit *and* arms a deadline; an app that has not exited by then is ended with ``os._exit`` from a
thread of its own, which needs neither the event loop nor the main thread.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING, Any

from textual import messages
from textual.drivers.web_driver import WebDriver

if TYPE_CHECKING:
    from textual.app import App

#: Seconds a tab's app has to exit cleanly once asked (it takes ~0.05 s) before the process is ended.
EXIT_GRACE_S = 3.0
_PR_SET_PDEATHSIG = 1   # <linux/prctl.h>


def end_with_server(server_pid: int) -> None:
    """SIGTERM this process when the server that started it ends, even by SIGKILL (Linux); a server that is
    already gone (it died while this process was starting) ends it now."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    # Checked after the request, so a death between our start and the prctl is not missed.
    if os.getppid() != server_pid:
        os._exit(0)


class TabDriver(WebDriver):
    """Textual's web driver, but every way a tab ends ends its process (see the module's note)."""

    def __init__(self, app: App[Any], *args: Any, **kwargs: Any) -> None:
        super().__init__(app, *args, **kwargs)
        # Our own references (the driver's are private): it is made on the app's loop, in its thread.
        self.tab_app = app
        self.tab_loop = asyncio.get_running_loop()
        self._ending = threading.Lock()

    def start_application_mode(self) -> None:
        super().start_application_mode()
        # Python-level handlers run in the main thread even while it is blocked in a write (the write is
        # interrupted, the handler runs, the write resumes); the loop's own handlers would wait for the loop.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.end(128 + signum)

    def run_input_thread(self) -> None:
        super().run_input_thread()
        if not self.exit_event.is_set():   # stdin's EOF (or a broken input thread): the server is gone
            self.end(0)

    def on_meta(self, packet_type: str, payload: dict[str, object]) -> None:
        if packet_type == "quit":           # the tab closed, or the server is stopping
            self.end(0)
        else:
            super().on_meta(packet_type, payload)

    def end(self, status: int) -> None:
        """Ask the app to exit, and end the process in ``EXIT_GRACE_S`` if it has not. Safe from any thread
        and from a signal handler; only the first call arms the deadline."""
        if not self._ending.acquire(blocking=False):
            return
        deadline = threading.Timer(EXIT_GRACE_S, os._exit, args=(status,))
        deadline.daemon = True
        deadline.start()
        if not self.tab_loop.is_closed():
            self.tab_loop.call_soon_threadsafe(self.tab_app.post_message, messages.ExitApp())
