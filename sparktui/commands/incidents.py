"""`sparktui incidents [--json]`: the failures the supervisor acted on, each with its evidence.
`incidents show ID [--json]` prints one (its files, each bounded); `incidents collect` takes one now.

Kept under ``$XDG_STATE_HOME/sparktui/incidents/`` (``~/.local/state``) on the machine the supervisor
runs on, the oldest removed past 50 incidents or 500 MB.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from typing import TYPE_CHECKING

from sparktui.commands.common import config_from_args, print_json, refuse_example, run_async
from sparktui.commands.exit_status import ExitStatus

if TYPE_CHECKING:
    from sparktui.config import SparkConfig
    from sparktui.domain.incidents import Incident, IncidentStore
    from sparktui.remote.transport import Transport

#: Characters of each evidence file `show` prints (its end: the newest lines).
SHOW_CHARS = 4000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = "exit status: 0 done, 1 a collection could not reach a node, 2 no such incident or config"
    parser.add_argument("--json", action="store_true", help="JSON instead of text")
    sub = parser.add_subparsers(dest="incidents_cmd", metavar="ACTION")
    show = sub.add_parser("show", help="one incident and its evidence")
    show.add_argument("id", metavar="ID")
    show.add_argument("--json", action="store_true", help="JSON instead of text")
    collect = sub.add_parser("collect", help="take the evidence now, as the supervisor does before it acts")
    collect.add_argument("--cause", default="manual", help="the incident's cause (default: manual)")
    collect.add_argument("--json", action="store_true", help="JSON instead of text")


def run(args: argparse.Namespace) -> int:
    from sparktui.domain.incidents import IncidentStore, describe

    store = IncidentStore()
    if args.incidents_cmd == "collect":
        config = config_from_args(args)
        if refuse_example(args, config, "incidents collect", ""):
            return ExitStatus.USAGE
        return run_async(_collect(config, store, args.cause, args.json))
    if args.incidents_cmd == "show":
        return _show(store, args.id, args.json)
    incidents = store.all()
    if args.json:
        print_json({"incidents": [i.to_json() for i in incidents], "dir": str(store.root)})
    elif incidents:
        print("\n".join(describe(incidents)))
    else:
        print(f"no incidents kept (in {store.root})")
    return ExitStatus.OK


def _show(store: IncidentStore, incident_id: str, as_json: bool) -> int:
    incident = store.get(incident_id)
    if incident is None:
        ids = ", ".join(i.id for i in store.all()[-10:]) or "none kept"
        print(f"sparktui incidents show: no incident {incident_id!r} (latest: {ids})", file=sys.stderr)
        return ExitStatus.USAGE
    if as_json:
        print_json({**incident.to_json(), "dir": str(store.root / incident.id)})
        return ExitStatus.OK
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(incident.at))
    print(f"{incident.id}  {when}  {incident.cause}" + (f" on {incident.node}" if incident.node else ""))
    print(f"  {incident.detail}")
    print(f"  action: {incident.action or 'none'}"
          + (f", serving again after {incident.serving_again_after:.0f} s" if incident.serving_again_after
             else ""))
    for missing in incident.missing:
        print(f"  not taken: {missing}")
    for f in incident.files:
        text = store.read(incident, f.name)
        cut = f"(last {SHOW_CHARS} of {len(text)} characters)\n" if len(text) > SHOW_CHARS else ""
        print(f"\n── {f.name}: {f.what} ({f.bytes} bytes)\n{cut}{text[-SHOW_CHARS:]}", end="")
    print(f"\n(files in {store.root / incident.id})")
    return ExitStatus.OK


async def _collect(config: SparkConfig, store: IncidentStore, cause: str, as_json: bool) -> int:
    from sparktui.remote.cluster import close_cluster, open_cluster
    from sparktui.remote.engine import EngineController
    from sparktui.remote.evidence import collect_incident

    transports = await open_cluster(config, connect=False)
    try:
        await _connect_all(transports)
        controller = EngineController(config, transports, origin="`sparktui incidents collect`")
        incident = await collect_incident(config, transports, controller, cause=cause, node=None,
                                          detail="taken by hand", engine_started=None, store=store)
    finally:
        await close_cluster(transports)
    _print(incident, as_json)
    return ExitStatus.NOT_WELL if incident.missing else ExitStatus.OK


async def _connect_all(transports: dict[str, Transport]) -> None:
    """Connect every node at once; one that cannot be reached is written down by the collection."""
    import asyncio

    from sparktui.remote.transport import TransportError

    async def one(t: Transport) -> None:
        await t.connect()
        with contextlib.suppress(TransportError, TimeoutError):   # its pieces say why
            await t.wait_connected(timeout=20)

    await asyncio.gather(*(one(t) for t in transports.values()))


def _print(incident: Incident, as_json: bool) -> None:
    if as_json:
        print_json(incident.to_json())
        return
    print(f"incident {incident.id}: {len(incident.files)} files")
    for f in incident.files:
        print(f"  {f.name:28} {f.bytes:>9} bytes  {f.what}")
    for missing in incident.missing:
        print(f"  not taken: {missing}")
