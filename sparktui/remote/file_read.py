"""Reading a file on a node as bytes, unchanged: `sparktui logs` writes them through, `status` parses them.

``Transport.run`` decodes a command's output as text (fine for commands, not for a log that may hold
anything); this streams the raw stdout of the constant ``READ_PY`` script instead, so a byte that is not
UTF-8 comes out as it went in.
"""

from __future__ import annotations

from collections.abc import Callable

from sparktui.domain.deadline import within
from sparktui.domain.lifecycle import scripts as S
from sparktui.remote.transport import Transport, TransportError

#: ``READ_PY``'s exit status for a file that does not exist.
NO_SUCH_FILE = 3


async def stream_file(transport: Transport, python: str, path: str, write: Callable[[bytes], object], *,
                      limit: int = 0) -> bool:
    """Pass the file's bytes (its last ``limit`` bytes when ``limit``) to ``write`` as they arrive.

    Returns ``False`` when the file does not exist; raises ``TransportError`` when the node cannot be
    reached, the channel breaks before the end, or the read fails.
    """
    proc = await transport.start([python, "-c", S.READ_PY, path, str(limit)])
    try:
        async for chunk in proc.chunks():
            write(chunk)
        status = await proc.wait()
    except BaseException:
        # Cancelled (a timeout) or the writer failed: hang the remote reader up.
        proc.terminate()
        raise
    if status == NO_SUCH_FILE:
        return False
    if status is None:
        raise TransportError(f"{transport.name}: connection lost while reading {path}")
    if status != 0:
        err = (await proc.stderr_text()).strip()[-200:]
        raise TransportError(f"reading {path}: {err or f'exit status {status}'}")
    return True


async def read_file(transport: Transport, python: str, path: str, *, limit: int = 0,
                    timeout: float | None = None) -> bytes | None:
    """The file's bytes (see ``stream_file``), or ``None`` when it does not exist."""
    data = bytearray()
    found = await within(stream_file(transport, python, path, data.extend, limit=limit), timeout)
    return bytes(data) if found else None
