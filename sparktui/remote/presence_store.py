"""The supervisor's presence on the head (``sparktui.domain.presence``), written and read as the head's
other records are (``head_record``)."""

from __future__ import annotations

from functools import partial

from sparktui.domain.lifecycle import presence_file as PR
from sparktui.domain.presence import SupervisorPresence
from sparktui.remote.engine_nodes import EngineNodes
from sparktui.remote.head_record import read_record, write_record
from sparktui.remote.transport import TransportError


async def write_presence(nodes: EngineNodes, presence: SupervisorPresence) -> bool:
    """``False``: not written now."""
    return await write_record(nodes, lambda homes: PR.write_argv(nodes.config, homes, presence),
                              "the supervisor's presence")


async def read_presence(nodes: EngineNodes) -> SupervisorPresence | None:
    """``None``: there never was a supervisor. Raises ``TransportError`` when the head cannot be read now
    (which is not the same as no supervisor)."""
    text = await read_record(nodes, partial(PR.read_argv, nodes.config))
    if text is None:
        raise TransportError(f"the supervisor's record on {nodes.config.head.name} not read")
    return SupervisorPresence.parse(text)
