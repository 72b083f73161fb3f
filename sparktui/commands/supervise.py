"""`sparktui supervise [--json]`: keep the engine serving with no dashboard open. `--unit [--system]`
prints a systemd unit that runs it.

Foreground and headless: one line per event (the engine's state, a link, what it decides and does), or
JSON lines with ``--json``. It runs wherever a machine stays up — the head itself (its own node through
SSH to itself or ``host = "localhost"``), or a controller. SIGTERM or Ctrl-C end it; the engine keeps
serving (it runs detached on the nodes). What it does, cause by cause, is ``[supervise]`` in the config
(docs/serving.md, "Serving unattended").
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import shlex
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparktui.commands.common import config_from_args, refuse_example, run_async
from sparktui.commands.exit_status import ExitStatus

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sparktui.config import SparkConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("exit status: 0 ended by SIGTERM or Ctrl-C (the engine keeps running), 1 it could not "
                     "keep watching, 2 no usable config")
    parser.add_argument("--json", action="store_true", help="JSON lines instead of text")
    parser.add_argument("--unit", action="store_true",
                        help="print a systemd unit that runs `sparktui supervise` with this config, and exit")
    parser.add_argument("--system", action="store_true",
                        help="with --unit: a system unit (User= this user) instead of a user unit")


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if refuse_example(args, config, "supervise", ""):
        return ExitStatus.USAGE
    if args.unit:
        from sparktui.config import find_config

        path = find_config(getattr(args, "config", None))
        assert path is not None   # config_from_args found it
        print(unit_text(config, path, system=args.system), end="")
        return ExitStatus.OK
    try:
        return run_async(_supervise(config, args.json))
    except KeyboardInterrupt:
        return ExitStatus.OK


def unit_text(config: SparkConfig, config_path: Path, *, system: bool) -> str:
    """A systemd unit: started at boot (or at login, for a user unit with lingering), restarted if it
    fails, its children stopped with it; the engine on the nodes is not its child and keeps serving."""
    argv = [sys.executable, "-m", "sparktui", "--config", str(config_path.resolve()), "supervise"]
    user = f"User={getpass.getuser()}\n" if system else ""
    wanted = "multi-user.target" if system else "default.target"
    return (
        "[Unit]\n"
        f"Description=sparktui supervise: keep the vLLM engine of {config.cluster.name} serving\n"
        "Wants=network-online.target\n"
        "After=network-online.target\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"{user}"
        f"ExecStart={shlex.join(argv)}\n"
        "Environment=PYTHONUNBUFFERED=1\n"
        "Restart=on-failure\n"
        "RestartSec=10\n"
        "KillMode=mixed\n"
        "TimeoutStopSec=30\n"
        "\n"
        "[Install]\n"
        f"WantedBy={wanted}\n"
    )


async def _supervise(config: SparkConfig, as_json: bool) -> int:
    from sparktui.domain.supervise import Cause
    from sparktui.remote.evidence import IncidentKeeper
    from sparktui.remote.notifier import Notifier
    from sparktui.remote.supervisor import Supervisor

    notifier = Notifier(config.notify, config.cluster.name)

    def emit(line: dict[str, Any]) -> None:
        print(json.dumps(line) if as_json else text_line(line), flush=True)
        if line.get("event") == "decision" and line.get("action") in ("give_up", "needs_person"):
            notifier.tell("given_up", str(line.get("detail", "")))
        elif line.get("event") == "rebooted":
            notifier.tell("rebooted", str(line.get("detail", "")), line.get("node"))

    def telemetry() -> dict[str, str]:
        return {"telemetry.jsonl": "".join(json.dumps(t, default=str) + "\n" for t in supervisor.telemetry)}

    keeper = IncidentKeeper(config, lambda: supervisor.backend.transports,
                            timeline_text=lambda: json.dumps(
                                supervisor.backend.logs.timeline.snapshot().to_json(), indent=1, default=str),
                            extra=telemetry)

    async def keep_incident(cause: Cause, node: str | None, detail: str, *,
                            evidence: Mapping[str, str] | None = None, action: str = "") -> str | None:
        return (await keeper(cause, node, detail, evidence=evidence, action=action)).id

    def outcome(_incident: str, action: str, _seconds: float | None) -> None:
        if action:
            keeper.acted(action)
        else:
            keeper.serving_again()

    supervisor = Supervisor(config, emit, on_incident=keep_incident, on_outcome=outcome)
    supervisor.backend.events.observe(notifier, notifier.kinds)
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    assert task is not None
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    try:
        await supervisor.run()
    except asyncio.CancelledError:
        return ExitStatus.OK
    except Exception as exc:   # the watch itself ended: say why, and let systemd restart it
        emit({"at": "", "event": "error", "detail": f"{type(exc).__name__}: {exc}"})
        return ExitStatus.NOT_WELL
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await notifier.drain()
    return ExitStatus.OK


def text_line(line: dict[str, Any]) -> str:
    """One event as a person reads it in a journal."""
    at, event = line.get("at", ""), line.get("event", "")
    detail = line.get("detail") or ""
    if event == "state":
        text = f"engine {line.get('state')}" + (f" — {detail}" if detail else "")
    elif event == "decision":
        cause = f" ({line['cause']})" if line.get("cause") else ""
        text = f"→ {line.get('action')}{cause}: {detail}"
    elif event == "operation":
        how = "done" if line.get("ok") else "failed"
        text = f"{line.get('kind')} {how}" + (f": {detail}" if detail else "")
    elif event == "started":
        text = f"supervising {line.get('cluster')} (head {line.get('head')})"
    elif event == "rebooted":
        text = str(detail) + (f" (incident {line['id']})" if line.get("id") else "")
    else:
        text = f"{event}: {detail}" if detail else str(event)
    return f"{at} {text}".strip()
