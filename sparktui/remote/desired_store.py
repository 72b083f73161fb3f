"""The engine's desired state on the head, written and read over the head's link
(``sparktui/domain/lifecycle/desired.py`` says what it means; ``sparktui/node/desired.py`` keeps it)."""

from __future__ import annotations

import logging
import socket
import time

from sparktui.domain.lifecycle import desired as D
from sparktui.domain.lifecycle.desired import Desired, DesiredState
from sparktui.remote.engine_nodes import EngineNodes
from sparktui.remote.transport import TransportError

log = logging.getLogger(__name__)


async def write_desired(nodes: EngineNodes, state: Desired, origin: str) -> None:
    """Keep what was asked for. A head that cannot be reached or written does not stop the operation
    asking: its own steps say what is wrong there."""
    config = nodes.config
    desired = DesiredState(state, origin, socket.gethostname(), time.time())
    try:
        await nodes.resolve_homes(quiet=True)
        result = await nodes.run(config.head.name, D.write_argv(config, nodes.homes or None, desired), 20)
    except TransportError as exc:
        log.warning("desired state not written: %s", exc)
        return
    if not result.ok:
        log.warning("desired state not written: %s", (result.stderr or result.stdout).strip()[-200:])


async def read_desired(nodes: EngineNodes) -> DesiredState | None:
    """The desired state kept on the head (``None``: never set, or not readable now)."""
    config = nodes.config
    try:
        await nodes.resolve_homes(quiet=True)
        result = await nodes.run(config.head.name, D.read_argv(config, nodes.homes or None), 20)
    except TransportError:
        return None
    return DesiredState.parse(result.stdout) if result.ok else None


async def stopped_by_person(nodes: EngineNodes) -> str | None:
    """Why not to start, if a person's stop is the desired state (what the supervisor's operations check
    under the lock)."""
    desired = await read_desired(nodes)
    if desired is not None and desired.state is Desired.STOPPED:
        return f"not started: the desired state is {desired.describe()}"
    return None
