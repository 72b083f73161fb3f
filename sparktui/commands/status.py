"""`sparktui status [--json]`: each node's reachability, SSH state, host facts, telemetry and the engine.

All nodes are asked at once, each bounded by ``--timeout``; the exit status is 0 only when every node
answered. Telemetry (``sparktui.remote.probe_runner``) and the engine state
(``sparktui.remote.engine_status``) are added when those modules are present.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib
import inspect
import os
import sys
import time
from collections.abc import Callable
from enum import Enum
from typing import Any

from sparktui.commands.common import config_from_args, print_json
from sparktui.config import NodeConfig, SparkConfig, find_config
from sparktui.remote.transport import LinkPhase, Transport, TransportError

#: Host facts in one round trip; the node's proc root arrives as "$1" (never spliced into the script).
FACTS_SCRIPT = 'uname -n; uname -r; cut -d " " -f 1 "$1/uptime"'
DEFAULT_TIMEOUT = 20.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"give up on a node after this long (default {DEFAULT_TIMEOUT:.0f})")


def run(args: argparse.Namespace) -> int:
    explicit = bool(getattr(args, "config", None) or os.environ.get("SPARKTUI_CONFIG"))
    config = config_from_args(args)
    path = find_config(getattr(args, "config", None))
    if config.cluster.example and not explicit:
        print(f"sparktui: {path} is the shipped example config (cluster.example = true), not your "
              "cluster. Describe your Sparks in it (and delete `example = true`), pass --config PATH, "
              "or try the simulated cluster: `sparktui --demo`.", file=sys.stderr)
        return 2
    report = asyncio.run(gather_status(config, timeout=args.timeout))
    report["config"] = str(path) if path else None
    if args.json:
        print_json(report)
    else:
        print(render(report))
    return 0 if report["all_reachable"] else 1


# -- gathering -------------------------------------------------------------------------------------
def _optional(module: str, name: str) -> Callable[..., Any] | None:
    """A function from a module another part of sparktui provides, or None while it is not there."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    if hasattr(value, "to_json"):
        return _jsonable(value.to_json())
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _link(transport: Transport) -> dict[str, Any]:
    state = transport.state
    return {
        "phase": state.phase.value,
        "detail": state.describe(),
        "last_error": state.last_error,
        "retry_in": None if state.retry_in() is None else round(state.retry_in() or 0.0, 1),
        "attempts": state.attempts,
    }


async def _node_status(config: SparkConfig, node: NodeConfig, transport: Transport) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": node.name, "host": node.host, "role": node.role, "reachable": False,
        "ssh": None, "hostname": None, "kernel": None, "uptime_seconds": None, "error": None,
    }
    await transport.connect()
    if transport.state.phase is LinkPhase.CONNECTED:
        try:
            result = await transport.run(["sh", "-c", FACTS_SCRIPT, "sh", node.proc_root], timeout=15)
        except TransportError as exc:
            entry["error"] = str(exc)
        else:
            lines = result.stdout.splitlines()
            entry["reachable"] = True
            entry["hostname"] = lines[0].strip() if lines else None
            entry["kernel"] = lines[1].strip() if len(lines) > 1 else None
            try:
                entry["uptime_seconds"] = float(lines[2])
            except (IndexError, ValueError):
                entry["uptime_seconds"] = None
            if not result.ok:
                entry["error"] = result.stderr.strip()[-500:] or f"exit status {result.returncode}"
        sample_once = _optional("sparktui.remote.probe_runner", "sample_once")
        if sample_once is not None and entry["reachable"]:
            try:
                entry["sample"] = _jsonable(await sample_once(transport, node,
                                                              name_prefix=config.engine.name_prefix))
            except TransportError as exc:
                entry["sample"] = {"error": str(exc)}
    entry["ssh"] = _link(transport)
    return entry


async def gather_status(config: SparkConfig, *, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Everything ``status`` reports, as a JSON-ready dict (also used by tests)."""
    from sparktui.remote.cluster import close_cluster, open_cluster

    t0 = time.monotonic()
    transports = await open_cluster(config, connect=False)

    async def bounded(node: NodeConfig) -> dict[str, Any]:
        transport = transports[node.name]
        try:
            return await asyncio.wait_for(_node_status(config, node, transport), timeout)
        except TimeoutError:
            return {"name": node.name, "host": node.host, "role": node.role, "reachable": False,
                    "ssh": _link(transport), "hostname": None, "kernel": None, "uptime_seconds": None,
                    "error": f"no answer within {timeout:.0f} s"}

    try:
        nodes = await asyncio.gather(*(bounded(node) for node in config.nodes))
        report: dict[str, Any] = {
            "cluster": config.cluster.name,
            "all_reachable": all(n["reachable"] for n in nodes),
            "nodes": list(nodes),
        }
        engine_status = _optional("sparktui.remote.engine_status", "engine_status")
        if engine_status is not None:
            try:
                engine = engine_status(config, transports)
                if inspect.isawaitable(engine):
                    engine = await asyncio.wait_for(engine, timeout)
                report["engine"] = _jsonable(engine)
            except (TransportError, TimeoutError) as exc:
                report["engine"] = {"error": str(exc) or "timed out"}
    finally:
        await close_cluster(transports)
    report["seconds"] = round(time.monotonic() - t0, 2)
    return report


# -- rendering -------------------------------------------------------------------------------------
def _uptime(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes = int(seconds // 60)
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m"


def _telemetry(entry: dict[str, Any]) -> str:
    sample = entry.get("sample")
    if not isinstance(sample, dict):
        return ""
    if sample.get("error"):
        return f"probe: {sample['error']}"
    problems = sample.get("problems") or {}
    if not problems:
        return "probe: ok"
    listed = "; ".join(str(text) for text in problems.values())
    return f"probe: {listed[:200]}"


def render(report: dict[str, Any]) -> str:
    headers = ("NODE", "ROLE", "SSH", "HOSTNAME", "KERNEL", "UPTIME")
    rows = []
    notes = []
    for n in report["nodes"]:
        ssh = n["ssh"] or {}
        rows.append((n["name"], n["role"], ssh.get("phase", "?"), n["hostname"] or "-", n["kernel"] or "-",
                     _uptime(n["uptime_seconds"])))
        if not n["reachable"] or n.get("error"):
            notes.append(f"  {n['name']}: {n.get('error') or ssh.get('detail', 'unreachable')}")
        tele = _telemetry(n)
        if tele:
            notes.append(f"  {n['name']}: {tele}")
    widths = [max(len(str(row[i])) for row in (headers, *rows)) for i in range(len(headers))]
    lines = ["  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in (headers, *rows)]
    lines += notes
    engine = report.get("engine")
    if isinstance(engine, dict):
        state = engine.get("state") or engine.get("error") or "?"
        lines.append(f"engine: {state}")
    reachable = sum(1 for n in report["nodes"] if n["reachable"])
    lines.append(f"{reachable}/{len(report['nodes'])} nodes reachable ({report['cluster']})")
    return "\n".join(lines)
