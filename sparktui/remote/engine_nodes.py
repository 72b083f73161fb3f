"""The nodes an engine operation talks to: their transports, homes and runtimes, one command run, one
background reap — shared by the plan runner, preflight, the Ray queries and the operation lock."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sparktui.config import SparkConfig
from sparktui.domain.deadline import within
from sparktui.domain.events import StepStatus
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle.output import output_tail
from sparktui.remote.host_facts import read_home
from sparktui.remote.transport import CommandResult, RemoteProcess, Transport, TransportError


@dataclass
class Outcome:
    """How one step ended: its status, message and output tail (the runner times and publishes it)."""

    status: StepStatus
    message: str
    tail: tuple[str, ...] = ()


class EngineNodes:
    """``transports`` (node name → transport) with what every engine job needs of them."""

    def __init__(self, config: SparkConfig, transports: Mapping[str, Transport]) -> None:
        self.config = config
        self.transports = dict(transports)
        #: Each node's $HOME (resolved once: docker mounts and the state dir need absolute paths).
        self.homes: dict[str, str] = {}
        self.runtimes = P.runtimes(config)
        self._background: set[asyncio.Task[None]] = set()

    async def run(self, node: str, argv: Sequence[str], timeout: float) -> CommandResult:
        return await self.transports[node].run(list(argv), timeout=timeout)

    def reap(self, proc: RemoteProcess) -> None:
        """Wait for ``proc``'s end in the background (nobody need wait for a channel to close)."""
        async def reap() -> None:
            with contextlib.suppress(Exception):
                await within(proc.wait(), 5.0)

        task = asyncio.create_task(reap())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def resolve_homes(self, quiet: bool = False) -> None:
        """Fill ``homes`` for the nodes not resolved yet; ``quiet``: an unreachable node stays unresolved
        (its paths keep their ``~``) instead of raising ``TransportError``."""
        async def one(name: str) -> None:
            if name in self.homes:
                return
            try:
                res = await read_home(self.transports[name])
            except TransportError:
                if quiet:
                    return
                raise
            if res.ok and res.stdout.strip():
                self.homes[name] = res.stdout.strip()

        await asyncio.gather(*(one(n.name) for n in self.config.nodes))


def failure_text(res: CommandResult) -> str:
    """A failed command in one line: "exit 3: <its last output line>" ("timed out" for exit 124)."""
    tail = output_tail(res.stderr) or output_tail(res.stdout)
    what = "timed out" if res.returncode == 124 else f"exit {res.returncode}"
    return f"{what}: {tail[-1]}" if tail else what
