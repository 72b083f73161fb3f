"""Each node's audit facts gathered over its transport (``sparktui audit`` and preflight): the node's own
report and, with docker, the image's, asked concurrently; a failure kept as its reason."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from sparktui.config import SparkConfig
from sparktui.domain.lifecycle.audit import NodeAudit, audit_commands
from sparktui.remote.engine_nodes import failure_text
from sparktui.remote.transport import CommandResult, Transport, TransportError

#: Hashing the model's small files and a docker run of the image: generous, still bounded.
AUDIT_TIMEOUT = 120.0

Run = Callable[[Sequence[str]], Awaitable[CommandResult]]


async def gather_audit(run: Run, host: Sequence[str], engine: Sequence[str] | None) -> NodeAudit | str:
    """One node's facts, or why they could not be read."""
    try:
        if engine is None:
            host_res, engine_res = await run(host), None
        else:
            host_res, engine_res = await asyncio.gather(run(host), run(engine))
    except TransportError as exc:
        return str(exc)
    if not host_res.ok:
        return "the node's report: " + failure_text(host_res)
    if engine_res is not None and not engine_res.ok:
        return "the image's report: " + failure_text(engine_res)
    try:
        return NodeAudit.parse(host_res.stdout, engine_res.stdout if engine_res is not None else None)
    except ValueError as exc:
        return str(exc)


async def gather_all(config: SparkConfig, transports: dict[str, Transport]) -> dict[str, NodeAudit | str]:
    """Every node's facts, concurrently, in config order."""
    async def one(name: str) -> NodeAudit | str:
        cmds = audit_commands(config, config.node(name))
        transport = transports[name]

        async def run(argv: Sequence[str]) -> CommandResult:
            return await transport.run(list(argv), timeout=AUDIT_TIMEOUT)

        return await gather_audit(run, cmds.host, cmds.engine)

    names = [n.name for n in config.nodes]
    return dict(zip(names, await asyncio.gather(*(one(n) for n in names)), strict=True))
