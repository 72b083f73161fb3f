"""[notify]: which state changes are told, the rate limit, a real command receiving each change once
(JSON on its stdin), a webhook, and notifier failures that are logged and never raised."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sparktui.config import NotifyConfig, parse_config
from sparktui.domain.events import (
    EngineChanged,
    EngineState,
    Event,
    EventStream,
    NodeLinkChanged,
    NodeReading,
    NodeSampled,
)
from sparktui.domain.notify import NotificationFilter
from sparktui.remote.notifier import Notifier

#: A dashboard's life: idle cluster found, start, ready (told twice), wedged, a node lost (and retried),
#: degraded, failed, stopped — with repeats that must say nothing.
STREAM: list[Event] = [
    EngineChanged(EngineState.UNKNOWN),
    NodeLinkChanged("spark2", "connected"),
    EngineChanged(EngineState.STOPPED),
    EngineChanged(EngineState.STARTING, "weights 3/12"),
    EngineChanged(EngineState.READY, "ready in 4m"),
    EngineChanged(EngineState.READY, "ready in 4m"),
    EngineChanged(EngineState.WEDGED, "requests run but no tokens for 60 s"),
    NodeLinkChanged("spark2", "retrying", "Connection refused"),
    NodeLinkChanged("spark2", "retrying", "Connection refused"),
    EngineChanged(EngineState.DEGRADED, "spark2 left Ray"),
    EngineChanged(EngineState.FAILED, "crashed after 2h 3m"),
    EngineChanged(EngineState.FAILED, "crashed after 2h 3m"),
    EngineChanged(EngineState.STOPPING),
    EngineChanged(EngineState.STOPPED),
]
EXPECTED = ["ready", "wedged", "node_lost", "degraded", "failed", "stopped"]


def test_filter_tells_each_change_once_and_rate_limits() -> None:
    now = [1000.0]
    f = NotificationFilter("lab", EXPECTED, min_interval=60, clock=lambda: now[0])
    told = [n for n in (f.feed(e) for e in STREAM) if n is not None]
    assert [n.event for n in told] == EXPECTED
    assert told[2].node == "spark2" and "Connection refused" in told[2].detail
    assert told[0].previous == "starting"
    # Flapping: ready again within a minute is held back, and counted in the next one that goes out.
    for state in (EngineState.STARTING, EngineState.READY, EngineState.STARTING, EngineState.READY):
        assert f.feed(EngineChanged(state)) is None
    now[0] += 61
    f.feed(EngineChanged(EngineState.STARTING))
    again = f.feed(EngineChanged(EngineState.READY))
    assert again is not None and again.suppressed == 2
    assert again.payload()["suppressed"] == 2 and again.payload()["cluster"] == "lab"
    # Only the events asked for.
    only = NotificationFilter("lab", ["failed"], 0)
    assert [n.event for n in (only.feed(e) for e in STREAM) if n is not None] == ["failed"]


RECORDER = """\
import json, sys
payload = json.load(sys.stdin)
with open(sys.argv[1], "a") as out:
    out.write(json.dumps(payload) + "\\n")
"""


async def test_command_receives_each_state_change_once(tmp_path: Path) -> None:
    script = tmp_path / "record.py"
    script.write_text(RECORDER)
    received = tmp_path / "received.jsonl"
    config = NotifyConfig(command=(sys.executable, str(script), str(received)), min_interval=0)
    notifier = Notifier(config, "lab")

    # As a backend posts its stream: the dashboard's sink first, then the notifier for the kinds it reads.
    stream = EventStream()
    shown: list[Event] = []
    stream.sink = shown.append
    stream.observe(notifier, notifier.kinds)
    for event in STREAM:
        stream.post(event)
        await asyncio.sleep(0)
    await notifier.drain()
    assert shown == STREAM                           # the dashboard still sees everything
    lines = [json.loads(line) for line in received.read_text().splitlines()]
    assert sorted(p["event"] for p in lines) == sorted(EXPECTED)   # each once (delivery runs concurrently)
    wedged = next(p for p in lines if p["event"] == "wedged")
    assert wedged["detail"] == "requests run but no tokens for 60 s" and wedged["source"] == "sparktui"
    assert notifier.failures == []


async def test_webhook_gets_the_payload() -> None:
    bodies: list[dict[str, object]] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        notifier = Notifier(NotifyConfig(webhook=url), "lab")
        notifier(EngineChanged(EngineState.STARTING))
        notifier(EngineChanged(EngineState.READY, "ready"))
        await notifier.drain()
    finally:
        server.shutdown()
        server.server_close()
    assert [b["event"] for b in bodies] == ["ready"]
    assert notifier.failures == []


async def test_failing_notifiers_are_logged_never_raised(tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    failing = tmp_path / "fail.py"
    failing.write_text("import sys; sys.stdin.read(); print('pager down', file=sys.stderr); sys.exit(3)\n")
    notifier = Notifier(NotifyConfig(command=(sys.executable, str(failing)),
                                     webhook="http://127.0.0.1:9/none", timeout=3), "lab")
    missing = Notifier(NotifyConfig(command=(str(tmp_path / "no-such-command"),)), "lab")
    for n in (notifier, missing):
        n(EngineChanged(EngineState.STARTING))
        n(EngineChanged(EngineState.FAILED, "oom"))
        n(NodeSampled("spark1", NodeReading()))      # other events pass by
        await n.drain()
    assert any("exited 3: pager down" in f for f in notifier.failures)
    assert any("webhook http://127.0.0.1:9/none" in f for f in notifier.failures)
    assert any("cannot run" in f for f in missing.failures)
    assert "exited 3: pager down" in caplog.text


def test_config_table() -> None:
    base = {"nodes": [{"name": "a", "host": "a", "role": "head"}],
            "engine": {"model": "m", "tensor_parallel_size": 1}}
    cfg = parse_config({**base, "notify": {"command": ["notify-send", "sparktui"],
                                           "webhook": "https://example.invalid/hook", "events": ["failed"]}})
    assert cfg.notify.command == ("notify-send", "sparktui") and cfg.notify.enabled
    assert not parse_config(base).notify.enabled
    from sparktui.config import ConfigError
    with pytest.raises(ConfigError, match=r"notify.webhook: must be an http"):
        parse_config({**base, "notify": {"webhook": "ftp://x"}})
    with pytest.raises(ConfigError, match=r"notify.events\[0\]"):
        parse_config({**base, "notify": {"events": ["exploded"]}})
    with pytest.raises(ConfigError, match=r"notify.command"):
        parse_config({**base, "notify": {"command": "notify-send hi"}})


def test_headless_stop_notifies_once(tmp_path: Path) -> None:
    """`sparktui stop` (the headless verb) posts the same engine events: one "stopped"."""
    from tests.cli_helpers import run_sparktui
    from tests.local_node import write_local_config

    script = tmp_path / "record.py"
    script.write_text(RECORDER)
    received = tmp_path / "received.jsonl"
    command = [sys.executable, str(script), str(received)]
    config = write_local_config(tmp_path / "config.toml", "notify-test",
                                tables=f"[notify]\ncommand = {json.dumps(command)}\n")
    result = run_sparktui("stop", "--config", str(config), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    (payload,) = [json.loads(line) for line in received.read_text().splitlines()]
    assert payload["event"] == "stopped" and payload["cluster"] == "notify-test"
    assert payload["previous_state"] == "stopping"
