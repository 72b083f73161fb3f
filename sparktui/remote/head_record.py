"""A small JSON record kept on the head beside the operation lock (``sparktui/node/json_file.py``), written
and read over the head's link: the engine's desired state (``desired_store``) and the supervisor's presence.
One short command each way; a head that cannot be reached costs a warning, never the caller's work."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from sparktui.remote.engine_nodes import EngineNodes
from sparktui.remote.transport import TransportError

log = logging.getLogger(__name__)

#: Seconds one read or write may take.
RECORD_SECONDS = 20

#: The command for the head, given the nodes' homes (``None``: not resolved; paths keep their ``~``).
ArgvOf = Callable[[Mapping[str, str] | None], list[str]]


async def write_record(nodes: EngineNodes, argv_of: ArgvOf, what: str) -> bool:
    """Run the write on the head; ``False`` (warned as ``what``) when it could not be done."""
    try:
        await nodes.resolve_homes(quiet=True)
        result = await nodes.run(nodes.config.head.name, argv_of(nodes.homes or None), RECORD_SECONDS)
    except TransportError as exc:
        log.warning("%s not written: %s", what, exc)
        return False
    if not result.ok:
        log.warning("%s not written: %s", what, (result.stderr or result.stdout).strip()[-200:])
    return result.ok


async def read_record(nodes: EngineNodes, argv_of: ArgvOf) -> str | None:
    """What the read printed (``{}``: never written), or ``None`` when the head could not be read now."""
    try:
        await nodes.resolve_homes(quiet=True)
        result = await nodes.run(nodes.config.head.name, argv_of(nodes.homes or None), RECORD_SECONDS)
    except TransportError:
        return None
    return result.stdout if result.ok else None
