"""`sparktui audit [--json]`: the nodes compared — image ID, vLLM version, the model's files (sizes; SHA-256
of the small ones), every bind-mounted file, the engine's environment, which libnccl loads, the addresses
advertised vs the cable's — and each difference named with its node.

Exit status: 0 the nodes agree, 1 something differs (or a node's facts are unreadable), 2 no usable config.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from sparktui.commands.common import config_from_args, print_json, refuse_example, run_async
from sparktui.commands.exit_status import ExitStatus

if TYPE_CHECKING:   # the config brings pydantic: loaded when the verb runs, not for its --help
    from sparktui.config import SparkConfig
    from sparktui.domain.lifecycle.audit import NodeAudit


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("exit status: 0 the nodes agree, 1 something differs or a node is unreadable, "
                     "2 no usable config")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from sparktui.domain.lifecycle.audit import audit_json, compare, summary_rows

    config = config_from_args(args)
    if refuse_example(args, config, "audit", ""):
        return ExitStatus.USAGE
    found = run_async(_gather(config))
    differences = compare(config, found)
    if args.json:
        print_json(audit_json(config, found, differences))
        return ExitStatus.of(not differences)
    print(table(summary_rows(config, found), [n.name for n in config.nodes]))
    print()
    if differences:
        print(f"{len(differences)} difference(s), against {config.head.name}:")
        for d in differences:
            print(f"  {'FAIL' if d.blocking else 'warn'}  {d.topic:<8} {d.message}")
        for fix in fixes(config, {d.topic for d in differences}):
            print(f"  fix: {fix}")
    else:
        image = "image, " if config.engine.runtime == "docker" else ""
        print(f"The nodes agree: {image}vLLM, model files, mounts, engine environment, libnccl and "
              "addresses.")
    return ExitStatus.of(not differences)


def fixes(config: SparkConfig, topics: set[str]) -> list[str]:
    """The verbs that repair what differs: the head's model directory or image copied to the others."""
    from sparktui.domain.lifecycle.fixes import IMAGE_SYNC, MODEL_SYNC
    from sparktui.domain.lifecycle.preflight import model_host_path

    out = []
    if "model" in topics and model_host_path(config) is not None:
        out.append(f"`{MODEL_SYNC}` copies {config.head.name}'s model directory to the other nodes")
    if "image" in topics:
        out.append(f"`{IMAGE_SYNC}` copies {config.head.name}'s image to the nodes whose image differs")
    return out


def table(rows: Sequence[tuple[str, Mapping[str, str]]], nodes: list[str]) -> str:
    """Plain columns: the fact, then one column per node."""
    head = ["", *nodes]
    lines = [head, *[[name, *(cells.get(n, "") for n in nodes)] for name, cells in rows]]
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
                     for line in lines)


async def _gather(config: SparkConfig) -> dict[str, NodeAudit | str]:
    from sparktui.remote.audit import gather_all
    from sparktui.remote.cluster import close_cluster, open_cluster

    transports = await open_cluster(config)
    try:
        return await gather_all(config, transports)
    finally:
        await close_cluster(transports)
