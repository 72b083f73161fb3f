"""`sparktui status [--json]`: each node's reachability, SSH state, host facts, telemetry and the engine.

All nodes are asked at once, each bounded by ``--timeout``; the exit status is 0 only when every node
answered. Telemetry is one probe reading (``sparktui.remote.probe_runner.sample_once``) and the engine
state is re-attach discovery plus the head's log (``sparktui.remote.engine_status``).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import TYPE_CHECKING, Any

from sparktui.commands.common import config_from_args, positive_seconds, print_json, refuse_example

if TYPE_CHECKING:  # `sparktui status --help` imports this module: no config, pydantic or SSH for it
    from sparktui.config import NodeConfig, SparkConfig
    from sparktui.remote.transport import Transport

DEFAULT_TIMEOUT = 20.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("exit status: 0 every node answered, 1 some node did not, 2 no usable config, "
                     "4 the engine was ready and cannot serve now (degraded or wedged)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"give up on a node after this long (default {DEFAULT_TIMEOUT:.0f})")


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if refuse_example(args, config, "status", "Or try the simulated cluster: `sparktui --demo`."):
        return 2
    from sparktui.config import find_config

    report = asyncio.run(gather_status(config, timeout=args.timeout))
    path = find_config(getattr(args, "config", None))
    report["config"] = str(path) if path else None
    if args.json:
        print_json(report)
    else:
        print(render(report))
    return exit_code(report)


#: Engine states in which an engine that was ready cannot serve (exit status 4).
CANNOT_SERVE = ("degraded", "wedged")


def exit_code(report: dict[str, Any]) -> int:
    if not report["all_reachable"]:
        return 1
    engine = report.get("engine")
    if isinstance(engine, dict) and engine.get("state") in CANNOT_SERVE:
        return 4
    return 0


# -- gathering -------------------------------------------------------------------------------------
def _link(transport: Transport) -> dict[str, Any]:
    state = transport.state
    retry_in = state.retry_in()
    return {
        "phase": state.phase.value,
        "endpoint": transport.endpoint,
        "detail": state.describe(),
        "last_error": state.last_error,
        "retry_in": None if retry_in is None else round(retry_in, 1),
        "attempts": state.attempts,
    }


def _unreachable(node: NodeConfig, transport: Transport, error: str | None = None) -> dict[str, Any]:
    return {
        "name": node.name, "host": node.host, "role": node.role, "reachable": False,
        "ssh": _link(transport), "hostname": None, "kernel": None, "uptime_seconds": None, "error": error,
    }


async def _node_status(config: SparkConfig, node: NodeConfig, transport: Transport) -> dict[str, Any]:
    from sparktui.remote.transport import LinkPhase

    entry = _unreachable(node, transport)
    await transport.connect()
    if transport.state.phase is not LinkPhase.CONNECTED:
        # One line, said once: `spark2 (10.0.0.2:22): connection refused — is sshd running?`
        entry["error"] = transport.unreachable_message()
    else:
        await _node_facts(config, node, transport, entry, together=False)
    entry["ssh"] = _link(transport)
    return entry


async def _node_facts(config: SparkConfig, node: NodeConfig, transport: Transport, entry: dict[str, Any],
                      *, together: bool = True) -> None:
    """Host facts and one probe reading into ``entry``; ``together``: both at once (two channels of the
    one connection), else one after the other (the previous way, kept for the benchmark)."""
    # Imported here: `sparktui --help` imports every verb's module, and these are not needed for it.
    from sparktui.remote.host_facts import read_host_facts
    from sparktui.remote.probe_runner import engine_probe_args, sample_once
    from sparktui.remote.transport import TransportError

    async def sample() -> dict[str, Any]:
        try:
            return await sample_once(transport, node, name_prefix=config.engine.name_prefix,
                                     extra_args=engine_probe_args(config.engine))
        except TransportError as exc:
            return {"error": str(exc)}

    sampling = asyncio.ensure_future(sample()) if together else None
    try:
        result, facts = await read_host_facts(transport, node, timeout=15)
    except TransportError as exc:
        entry["error"] = str(exc)
        if sampling is not None:
            sampling.cancel()
        return
    entry.update(reachable=True, hostname=facts.hostname, kernel=facts.kernel,
                 uptime_seconds=facts.uptime_seconds)
    if not result.ok:
        entry["error"] = result.stderr.strip()[-500:] or f"exit status {result.returncode}"
    entry["sample"] = await (sampling if sampling is not None else sample())


async def _reach(node: NodeConfig, transport: Transport, timeout: float) -> str | None:
    """Connect (the transport's own fail-fast TCP connect); the reason when the node cannot be reached."""
    from sparktui.remote.transport import LinkPhase

    try:
        await asyncio.wait_for(transport.connect(), timeout)
    except TimeoutError:
        return f"no answer within {timeout:.0f} s"
    if transport.state.phase is not LinkPhase.CONNECTED:
        # One line, said once: `spark2 (10.0.0.2:22): connection refused — is sshd running?`
        return transport.unreachable_message()
    return None


async def gather_status(config: SparkConfig, *, timeout: float = DEFAULT_TIMEOUT,
                        overlap: bool = True) -> dict[str, Any]:
    """Everything ``status`` reports, as a JSON-ready dict (also used by tests).

    ``overlap`` (the default): every node is connected at once, then each node's facts and sample and
    the engine's part (discovery, Ray, the log) all run at the same time, so the answer takes about as
    long as its slowest part. ``False``: the previous way (nodes first, then the engine), kept for
    ``benchmarks/bench_status.py``'s same-run comparison.
    """
    from sparktui.remote.cluster import close_cluster, open_cluster

    t0 = time.monotonic()
    transports = await open_cluster(config, connect=False)
    try:
        if overlap:
            report = await _gather_overlapped(config, transports, timeout)
        else:
            report = await _gather_serial(config, transports, timeout)
    finally:
        await close_cluster(transports)
    report["seconds"] = round(time.monotonic() - t0, 2)
    return report


async def _gather_overlapped(config: SparkConfig, transports: dict[str, Transport],
                             timeout: float) -> dict[str, Any]:
    from sparktui.remote.engine_status import engine_status
    from sparktui.remote.transport import TransportError

    errors = dict(zip([n.name for n in config.nodes],
                      await asyncio.gather(*(_reach(n, transports[n.name], timeout) for n in config.nodes)),
                      strict=True))
    links = {name: t.state.phase.value for name, t in transports.items()}
    for name, error in errors.items():
        if error is not None:
            # Discovery would wait out its dead link again: it finds it closed and names it.
            await transports[name].close()

    async def node_part(node: NodeConfig) -> dict[str, Any]:
        transport = transports[node.name]
        entry = _unreachable(node, transport, errors[node.name])
        if errors[node.name] is None:
            try:
                await asyncio.wait_for(_node_facts(config, node, transport, entry), timeout)
            except TimeoutError:
                entry = _unreachable(node, transport, f"no answer within {timeout:.0f} s")
        entry["ssh"] = _link(transport)
        if errors[node.name] is not None:
            entry["ssh"]["phase"] = links[node.name]  # as found, not "closed" by us just now
        return entry

    async def engine_part() -> dict[str, Any]:
        if errors[config.head.name] is not None:
            return {"error": f"unknown: the head ({config.head.name}) is unreachable"}
        try:
            return await asyncio.wait_for(engine_status(config, transports, links), timeout)
        except (TransportError, TimeoutError) as exc:
            return {"error": str(exc) or f"no answer within {timeout:.0f} s"}

    nodes, engine = await asyncio.gather(asyncio.gather(*(node_part(n) for n in config.nodes)),
                                         engine_part())
    return {
        "cluster": config.cluster.name,
        "all_reachable": all(n["reachable"] for n in nodes),
        "nodes": list(nodes),
        "engine": engine,
    }


async def _gather_serial(config: SparkConfig, transports: dict[str, Transport],
                         timeout: float) -> dict[str, Any]:
    from sparktui.remote.engine_status import engine_status
    from sparktui.remote.transport import TransportError

    async def bounded(node: NodeConfig) -> dict[str, Any]:
        transport = transports[node.name]
        try:
            return await asyncio.wait_for(_node_status(config, node, transport), timeout)
        except TimeoutError:
            return _unreachable(node, transport, f"no answer within {timeout:.0f} s")

    nodes = await asyncio.gather(*(bounded(node) for node in config.nodes))
    report: dict[str, Any] = {
        "cluster": config.cluster.name,
        "all_reachable": all(n["reachable"] for n in nodes),
        "nodes": list(nodes),
    }
    head = next(n for n in nodes if n["name"] == config.head.name)
    if not head["reachable"]:
        # Discovery would only wait out the same dead link again.
        report["engine"] = {"error": f"unknown: the head ({config.head.name}) is unreachable"}
    else:
        links = {n["name"]: (n["ssh"] or {}).get("phase", "") for n in nodes}
        for n in nodes:
            if not n["reachable"]:
                await transports[n["name"]].close()
        try:
            report["engine"] = await asyncio.wait_for(engine_status(config, transports, links), timeout)
        except (TransportError, TimeoutError) as exc:
            report["engine"] = {"error": str(exc) or f"no answer within {timeout:.0f} s"}
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
            # The link's own error, not its "retrying in N s" countdown (stale by the time it is printed).
            why = n.get("error") or ssh.get("last_error") or ssh.get("detail") or "unreachable"
            # An unreachable node's line already starts with its name (and address).
            notes.append(f"  {why}" if why.startswith(f"{n['name']} (") else f"  {n['name']}: {why}")
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
        # "unknown" alone says nothing: say what is not known and why; a state that cannot serve says why.
        shown = state == "unknown" or engine.get("state") in (*CANNOT_SERVE, "failed")
        detail = engine.get("detail") if shown else None
        lines.append(f"engine: {state}" + (f" — {detail}" if detail else ""))
    reachable = sum(1 for n in report["nodes"] if n["reachable"])
    lines.append(f"{reachable}/{len(report['nodes'])} nodes reachable ({report['cluster']})")
    return "\n".join(lines)
