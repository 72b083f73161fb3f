"""`sparktui postmortem [--node NAME] [--since MINUTES] [--json]`: why a node rebooted, or why the engine's
processes died, from what each node's kernel and journal kept.

For each node: how its previous boot ended (a panic, a lockup, a GPU Xid, the GPU driver out of unified
memory, the kernel's OOM killer, a userspace memory watchdog, power lost mid-run, a clean reboot), with the
lines behind the verdict and what to do; and what this boot's kernel and watchdogs said since ``--since``
minutes ago (default: since the node booted). The nodes are asked at once; one that cannot be reached costs
only its own attempt.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparktui.commands.common import (
    config_from_args,
    positive_minutes,
    print_json,
    refuse_example,
    run_async,
)
from sparktui.commands.exit_status import ExitStatus

if TYPE_CHECKING:
    from sparktui.config import NodeConfig, SparkConfig
    from sparktui.domain.postmortem import NodeReport

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("exit status: 0 every node answered, 1 a node could not be reached or read, "
                     "2 no usable config or no such node")
    parser.add_argument("--node", metavar="NAME", help="only this node")
    parser.add_argument("--since", metavar="MINUTES", type=positive_minutes,
                        help="this boot's messages of the last MINUTES minutes (default: since it booted)")
    parser.add_argument("--json", action="store_true", help="one JSON object: each node's report")


@dataclass(frozen=True)
class NodeAnswer:
    node: str
    report: NodeReport | None = None
    error: str | None = None


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if refuse_example(args, config, "postmortem", ""):
        return ExitStatus.USAGE
    nodes = list(config.nodes)
    if args.node is not None:
        nodes = [n for n in nodes if n.name == args.node]
        if not nodes:
            names = ", ".join(n.name for n in config.nodes)
            print(f"sparktui postmortem: no node named {args.node!r} (nodes: {names})", file=sys.stderr)
            return ExitStatus.USAGE
    since = time.time() - args.since * 60 if args.since else None
    answers = run_async(ask_nodes(config, nodes, since))
    if args.json:
        print_json({"nodes": [_answer_json(a) for a in answers]})
    else:
        print(render(answers))
    return ExitStatus.OK if all(a.report is not None for a in answers) else ExitStatus.NOT_WELL


async def ask_nodes(config: SparkConfig, nodes: list[NodeConfig], since: float | None) -> list[NodeAnswer]:
    """Each node's report, asked at once."""
    return list(await asyncio.gather(*(ask_node(node, since) for node in nodes)))


async def ask_node(node: NodeConfig, since: float | None) -> NodeAnswer:
    from sparktui.remote.cluster import make_transport
    from sparktui.remote.kernel_read import read_kernel
    from sparktui.remote.transport import TransportError

    transport = make_transport(node)
    try:
        await transport.connect()
        await transport.wait_connected(timeout=30)
        found = await read_kernel(transport, node, since)
    except TransportError as exc:
        return NodeAnswer(node.name, error=str(exc))
    finally:
        await transport.close()
    return NodeAnswer(node.name, error=found) if isinstance(found, str) else NodeAnswer(node.name, found)


def render(answers: list[NodeAnswer]) -> str:
    from sparktui.domain.durations import format_duration

    out: list[str] = []
    for answer in answers:
        report = answer.report
        if report is None:
            out.append(f"{answer.node}: not read: {answer.error}")
            continue
        up = (f"up {format_duration(time.time() - report.booted_at)}" if report.booted_at is not None
              else "up since ?")
        out.append(f"{answer.node}: {up}")
        verdict = report.previous
        out.append(f"  previous boot: {verdict.summary} [{verdict.cause.value}]")
        for found in verdict.evidence[-5:]:
            out.append(f"    {found.line[:200]}")
        out.append(f"    → {verdict.hint}")
        if report.since:
            out.append(f"  this boot: {len(report.since)} event(s)")
            for found in report.since[-10:]:
                out.append(f"    {found.at or '?'}  {found.what}")
        else:
            out.append("  this boot: no kill, GPU error, panic or lockup")
        for note in report.notes:
            out.append(f"  ({note})")
    return "\n".join(out)


def _answer_json(answer: NodeAnswer) -> dict[str, Any]:
    if answer.report is None:
        return {"node": answer.node, "error": answer.error}
    return answer.report.to_json()
