"""What a node is: hostname, kernel and uptime in one round trip (``sparktui status``, the dashboard), and
the remote user's home (absolute paths for docker mounts and the state dir)."""

from __future__ import annotations

from dataclasses import dataclass

from sparktui.config import NodeConfig
from sparktui.domain.lifecycle.scripts import HOME_SH
from sparktui.remote.transport import CommandResult, Transport

#: The node's proc root arrives as "$1": a config value is never spliced into the script.
HOST_FACTS_SH = 'uname -n; uname -r; cut -d " " -f 1 "$1/uptime"'


@dataclass(frozen=True)
class HostFacts:
    hostname: str | None = None
    kernel: str | None = None
    uptime_seconds: float | None = None
    #: All three lines came (a command cut short leaves the later fields ``None``).
    complete: bool = False

    @classmethod
    def parse(cls, stdout: str) -> HostFacts:
        lines = [line.strip() for line in stdout.splitlines()]
        try:
            uptime: float | None = float(lines[2])
        except (IndexError, ValueError):
            uptime = None
        return cls(
            hostname=lines[0] if lines else None,
            kernel=lines[1] if len(lines) > 1 else None,
            uptime_seconds=uptime,
            complete=len(lines) >= 3,
        )


async def read_host_facts(
    transport: Transport, node: NodeConfig, timeout: float
) -> tuple[CommandResult, HostFacts]:
    """The command's result (for its exit status and stderr) and the facts read from it.

    Raises ``TransportError`` when the node cannot be reached.
    """
    result = await transport.run(["sh", "-c", HOST_FACTS_SH, "sh", node.proc_root], timeout=timeout)
    return result, HostFacts.parse(result.stdout)


async def read_home(transport: Transport, timeout: float = 20.0) -> CommandResult:
    """``$HOME`` of the remote user (in ``stdout``); raises ``TransportError`` when unreachable."""
    return await transport.run(["sh", "-c", HOME_SH], timeout=timeout)
