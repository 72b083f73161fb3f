"""A node's kernel log and previous boot read over its link (``sparktui/node/kernel_log.py``), classified
(``sparktui.domain.postmortem``): for ``sparktui postmortem`` and for an incident's evidence."""

from __future__ import annotations

import json

from sparktui.config import NodeConfig
from sparktui.domain.deadline import within
from sparktui.domain.postmortem import NEEDLES, NodeReport
from sparktui.node import source
from sparktui.remote.transport import Transport, TransportError

#: Seconds for one node's answer (the node reads a boot's journal, bounded at 40 s, on both boots).
NODE_SECONDS = 120.0


async def read_kernel(transport: Transport, node: NodeConfig, since: float | None) -> NodeReport | str:
    """The node's report, or why there is none (in words)."""
    argv = [node.python, "-c", source("kernel_log"), f"{since:.0f}" if since else "", *NEEDLES]
    try:
        result = await within(transport.run(argv, timeout=NODE_SECONDS), NODE_SECONDS + 5)
    except (TransportError, TimeoutError) as exc:
        return str(exc) or "no answer in time"
    if not result.ok:
        return f"the reader exited {result.returncode}: {(result.stderr or result.stdout).strip()[-300:]}"
    try:
        return NodeReport.from_json(node.name, json.loads(result.stdout))
    except (ValueError, TypeError, AttributeError) as exc:
        return f"unreadable answer: {exc}"
