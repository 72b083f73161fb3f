"""`sparktui incidents [--json]`, `incidents show ID [--json]`, `incidents collect [--cause CAUSE] [--json]`.

The incidents kept in ``$XDG_STATE_HOME/sparktui/incidents/`` (``sparktui.domain.incidents``): one per
failure the supervisor acted on, with the evidence taken before it acted; ``collect`` takes one now by hand
(from every node at once, ``sparktui.remote.evidence``). Listing and showing need no node.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from sparktui.commands.common import config_from_args, positive_int, print_json, refuse_example, run_async
from sparktui.commands.exit_status import ExitStatus

if TYPE_CHECKING:
    from sparktui.config import SparkConfig
    from sparktui.domain.incidents import Incident, IncidentStore

#: Lines of each evidence file that ``show`` prints (its end: the newest lines matter most).
SHOW_LINES = 40


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("exit status: 0 done, 1 a node's evidence could not be taken (collect; the rest is "
                     "kept), 2 no such incident or no usable config")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    parser.add_argument("--dir", type=Path, default=None, metavar="PATH",
                        help="the incidents folder (default: $XDG_STATE_HOME/sparktui/incidents, "
                        "~/.local/state/sparktui/incidents)")
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    show = sub.add_parser("show", help="one incident: its record and each evidence file's last lines",
                          description="one incident: its record and each evidence file's last lines")
    show.add_argument("id", metavar="ID", help="the incident's id (`sparktui incidents` lists them)")
    show.add_argument("--lines", type=positive_int, default=SHOW_LINES, metavar="N",
                      help=f"lines of each file to print, its last ones (default {SHOW_LINES}); "
                      "the whole files are in the incident's folder")
    show.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="one JSON object")
    collect = sub.add_parser("collect", help="take one now from every node (as the supervisor does)",
                             description="take one now from every node (as the supervisor does before it "
                             "acts): logs, stacks, kernel messages, NCCL state, Ray's nodes, argv, config")
    collect.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS,
                         help="config file (as `sparktui --config`)")
    collect.add_argument("--cause", default="manual", help="what to record as its cause (default manual)")
    collect.add_argument("--detail", default="", help="a line of why, kept with it")
    collect.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="one JSON object")


def _store(args: argparse.Namespace, config: SparkConfig | None = None) -> IncidentStore:
    from sparktui.domain.incidents import IncidentStore, default_incidents_dir

    root = args.dir if args.dir is not None else default_incidents_dir()
    if config is None:
        return IncidentStore(root)
    return IncidentStore(root, keep=config.incidents.keep, max_size=int(config.incidents.max_size))


def run(args: argparse.Namespace) -> int:
    if args.action == "collect":
        return _collect(args)
    if args.action == "show":
        return _show(args)
    return _list(args)


def _list(args: argparse.Namespace) -> int:
    from sparktui.domain.durations import format_duration
    from sparktui.domain.wall_time import iso

    incidents = _store(args).all()
    if args.json:
        print_json({"incidents": [i.to_json() for i in incidents]})
        return ExitStatus.OK
    if not incidents:
        print("no incidents kept (the supervisor keeps one per failure; `sparktui incidents collect` takes "
              "one now)")
        return ExitStatus.OK
    print(f"{'ID':<21} {'TIME':<25} {'CAUSE':<16} {'NODE':<10} {'ACTION':<14} {'SERVING AGAIN':<13} FILES")
    for i in incidents:
        again = format_duration(i.serving_again_s) if i.serving_again_s is not None else "-"
        files = f"{len(i.files)} ({_size(i.total_size)})"
        print(f"{i.id:<21} {iso(i.at):<25} {i.cause:<16} {i.node or '-':<10} {i.action or '-':<14} "
              f"{again:<13} {files}")
    return ExitStatus.OK


def _show(args: argparse.Namespace) -> int:
    from sparktui.domain.incidents import UnknownIncident

    store = _store(args)
    try:
        incident = store.get(args.id)
    except UnknownIncident as exc:
        known = ", ".join(exc.known[-20:]) or "none"
        print(f"sparktui incidents: no incident {args.id!r} (incidents kept: {known})", file=sys.stderr)
        return ExitStatus.USAGE
    except (ValueError, OSError) as exc:
        print(f"sparktui incidents: incident {args.id} unreadable: {exc}", file=sys.stderr)
        return ExitStatus.USAGE
    lines = args.lines
    if args.json:
        data = incident.to_json()
        data["folder"] = str(store.root / incident.id)
        data["evidence"] = {f.name: _last_lines(store.evidence_path(incident.id, f.name), lines)
                            for f in incident.files}
        print_json(data)
        return ExitStatus.OK
    print(_header(incident, str(store.root / incident.id)))
    for f in incident.files:
        print(f"\n=== {f.name} ({_size(f.size)}; its last {lines} lines) ===")
        print(_last_lines(store.evidence_path(incident.id, f.name), lines), end="")
    return ExitStatus.OK


def _collect(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if refuse_example(args, config, "incidents", " collect"):
        return ExitStatus.USAGE
    config_text = _config_text(args)
    incident = run_async(_take(config, args, config_text))
    if getattr(args, "json", False):
        print_json(incident.to_json())
    else:
        print(_header(incident, str(_store(args, config).root / incident.id)))
        for f in incident.files:
            print(f"  {f.name:<24} {_size(f.size)}")
    return ExitStatus.NOT_WELL if incident.missing else ExitStatus.OK


async def _take(config: SparkConfig, args: argparse.Namespace, config_text: str | None) -> Incident:
    from sparktui.remote.cluster import close_cluster, open_cluster
    from sparktui.remote.evidence import collect_incident

    transports = await open_cluster(config)
    try:
        return await collect_incident(config, transports, cause=args.cause, detail=args.detail,
                                      action="none (taken by hand)", config_text=config_text,
                                      store=_store(args, config))
    finally:
        await close_cluster(transports)


def _config_text(args: argparse.Namespace) -> str | None:
    """The config file's own text (comments and all), when the file it was read from is known."""
    from sparktui.config import find_config

    try:
        path = find_config(getattr(args, "config", None))
        return path.read_text(encoding="utf-8") if path is not None else None
    except (OSError, UnicodeDecodeError):
        return None


def _header(incident: Incident, folder: str) -> str:
    from sparktui.domain.durations import format_duration
    from sparktui.domain.wall_time import iso

    again = format_duration(incident.serving_again_s) if incident.serving_again_s is not None else "-"
    out = [f"incident {incident.id}  {iso(incident.at)}",
           f"  cause: {incident.cause}" + (f" on {incident.node}" if incident.node else ""),
           f"  detail: {incident.detail or '-'}",
           f"  action: {incident.action or '-'}   serving again after: {again}",
           f"  evidence: {len(incident.files)} files, {_size(incident.total_size)} in {folder}"]
    out += [f"  not taken: {m}" for m in incident.missing]
    return "\n".join(out)


def _last_lines(path: Path, lines: int) -> str:
    from collections import deque

    try:
        with path.open("r", encoding="utf-8", errors="replace") as f:
            kept = deque(f, maxlen=lines)
    except OSError as exc:
        return f"(not readable: {exc.strerror or exc})\n"
    text = "".join(line[:1000] + ("\n" if len(line) > 1000 else "") for line in kept)
    return text if text.endswith("\n") or not text else text + "\n"


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KiB" if n < 1024**2 else f"{n / 1024**2:.1f} MiB"
