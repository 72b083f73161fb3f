"""Can the head reach each other node? A small script streamed from the head, one line per round.

Ray declares a node dead only after its health checks time out (about 30–40 s on a cut cable), and the
controller's own SSH link to that node says nothing about the path between the nodes. The head's view
is what the engine depends on: a TCP connect from the head to each node's Ray address (a refused
connection is an answer: the host is there; a timeout or "unreachable" is not) every ``interval`` s.
The result feeds ``EngineSession.peer`` ("the head cannot reach spark2 at 10.0.0.2").
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence

from sparktui.config import SparkConfig
from sparktui.node import source
from sparktui.remote.line_stream import LineStream
from sparktui.remote.transport import Transport

#: ``sparktui/node/peer_reach.py`` (its argv and output are said there).
REACH_PY = source("peer_reach")


def reach_argv(python: str, peers: Sequence[tuple[str, str, int]], interval: float,
               rounds: int = 0, *, changes: bool = False) -> list[str]:
    """``peers``: (name, ip, port) of every node but the head. ``changes``: a round printed only when its
    answer changed (or ten seconds on), for a watch."""
    return [python, "-c", REACH_PY, f"{interval:g}", str(rounds),
            *(f"{name}={ip}:{port}" for name, ip, port in peers), *(["changes"] if changes else [])]


def peers_of(config: SparkConfig) -> list[tuple[str, str, int]]:
    """Every node but the head, at its Ray address (the SSH port: open on the node, refused is fine)."""
    return [(n.name, n.address, n.port or 22) for n in config.nodes if n.name != config.head.name]


async def reach_once(config: SparkConfig, transport: Transport) -> dict[str, bool]:
    """One round from the head (``status``); empty when the head did not answer."""
    peers = peers_of(config)
    if not peers:
        return {}
    res = await transport.run(reach_argv(config.head.python, peers, 1.0, rounds=1), timeout=20)
    with contextlib.suppress(ValueError, AttributeError):
        lines = res.stdout.strip().splitlines()
        return {str(k): bool(v) for k, v in json.loads(lines[-1]).items()} if lines else {}
    return {}


async def watch_peers(transport: Transport, argv: Sequence[str],
                      on_result: Callable[[str, bool], None]) -> None:
    """Stream the head's reachability rounds until cancelled (restarted when the head's link drops)."""
    stream = LineStream(transport, argv, name=f"{transport.name}: peer reachability")
    async with contextlib.aclosing(stream.lines()) as lines:
        async for line in lines:
            with contextlib.suppress(ValueError, AttributeError):
                for name, ok in json.loads(line).items():
                    on_result(str(name), bool(ok))
