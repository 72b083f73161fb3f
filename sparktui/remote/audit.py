"""Each node's audit facts gathered over its transport (``sparktui audit`` and preflight): the node's own
report and, with docker, the image's, asked concurrently; a failure kept as its reason."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Sequence

from sparktui.config import SparkConfig
from sparktui.domain.json_report import last_json_object
from sparktui.domain.lifecycle.audit import NodeAudit, audit_commands
from sparktui.domain.lifecycle.vllm_facts_cache import VllmFactsCache
from sparktui.remote.engine_nodes import failure_text
from sparktui.remote.transport import CommandResult, Transport, TransportError

#: Hashing the model's small files and a docker run of the image: generous, still bounded.
AUDIT_TIMEOUT = 120.0

Run = Callable[[Sequence[str]], Awaitable[CommandResult]]


async def gather_audit(run: Run, host: Sequence[str], engine: Sequence[str] | None,
                       cache: VllmFactsCache | None = None) -> NodeAudit | str:
    """One node's facts, or why they could not be read. ``cache``: the image's report is fixed by the
    image's content, so with a cache it is asked once per image ID (the node's report names the ID) — a
    throw-away container per node less on every start's preflight."""
    try:
        if engine is None:
            host_res, engine_res = await run(host), None
        elif cache is None:
            host_res, engine_res = await asyncio.gather(run(host), run(engine))
        else:
            host_res = await run(host)
            image_id = _image_id(host_res)
            field = "audit-" + hashlib.sha256("\0".join(engine).encode()).hexdigest()[:16]
            kept = cache.get(image_id, field)
            if kept is not None:
                engine_res = CommandResult(tuple(engine), 0, kept, "", 0.0)
            else:
                engine_res = await run(engine)
                if engine_res.ok and _image_report(engine_res.stdout):
                    cache.put(image_id, field, engine_res.stdout)
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


def _image_id(host_res: CommandResult) -> str | None:
    data = last_json_object(host_res.stdout) if host_res.ok else None
    found = data.get("image_id") if data is not None else None
    return found if isinstance(found, str) else None


def _image_report(text: str) -> bool:
    data = last_json_object(text)
    return data is not None and "engine" in data


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
