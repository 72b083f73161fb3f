"""``sparktui --web``: the same dashboard in a browser, through textual-serve.

textual-serve runs one dashboard process per browser tab (the command below, with the web driver) and
relays its screen and keys over a websocket. Every tab is a dashboard of its own that attaches to the
engine, as a second terminal would; the engine stays detached on the nodes.

Bound to loopback unless told otherwise: the dashboard can start and stop the engine, so a wider address is
said out loud (and ``--readonly`` is the way to share a view).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence

from sparktui.domain.addresses import is_loopback

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8566
#: The dashboard's own options that make no sense for the process a tab runs (it is the web server's).
WEB_OPTIONS = {"--web": 0, "--host": 1, "--port": 1}


def app_command(argv: Sequence[str], python: str = sys.executable) -> str:
    """The shell command textual-serve runs per tab: this sparktui, with the same options, minus the web
    server's. textual-serve hands it to a shell, so every word is quoted."""
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
    return shlex.join([python, "-m", "sparktui", *kept])


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
    Server(command, host=host, port=port, title="sparktui").serve()
    return 0
