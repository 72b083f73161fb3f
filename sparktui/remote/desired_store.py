"""The engine's desired state on the head, written and read over the head's link
(``sparktui/domain/lifecycle/desired.py`` says what it means; ``remote/head_record.py`` keeps it)."""

from __future__ import annotations

import socket
import time
from functools import partial

from sparktui.domain.lifecycle import desired as D
from sparktui.domain.lifecycle.desired import Desired, DesiredState
from sparktui.remote.engine_nodes import EngineNodes
from sparktui.remote.head_record import read_record, write_record


async def write_desired(nodes: EngineNodes, state: Desired, origin: str) -> None:
    """Keep what was asked for. A head that cannot be reached or written does not stop the operation
    asking: its own steps say what is wrong there."""
    desired = DesiredState(state, origin, socket.gethostname(), time.time())
    await write_record(nodes, lambda homes: D.write_argv(nodes.config, homes, desired), "desired state")


async def read_desired(nodes: EngineNodes) -> DesiredState | None:
    """The desired state kept on the head (``None``: never set, or not readable now)."""
    text = await read_record(nodes, partial(D.read_argv, nodes.config))
    return None if text is None else DesiredState.parse(text)


async def stopped_by_person(nodes: EngineNodes) -> str | None:
    """Why not to start, if a person's stop is the desired state (what the supervisor's operations check
    under the lock)."""
    desired = await read_desired(nodes)
    if desired is not None and desired.state is Desired.STOPPED:
        return f"not started: the desired state is {desired.describe()}"
    return None
