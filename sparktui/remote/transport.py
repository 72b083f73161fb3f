"""The one interface every node is reached through: SSH, the local machine, or the demo's simulation.

Commands are argument lists. A transport turns them into one string for a remote shell only with
``shlex.join``, so no config value is ever interpreted by a shell on the far side.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
import os
import shlex
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from sparktui.domain.deadline import within
from sparktui.domain.events import link_text

log = logging.getLogger(__name__)


class LinkPhase(StrEnum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    RETRYING = "retrying"
    FAILED = "failed"
    CLOSED = "closed"


@dataclass(frozen=True)
class LinkState:
    """How a node's connection stands, as the UI and ``status`` show it."""

    phase: LinkPhase
    #: Monotonic time at which the next attempt is due (``RETRYING`` only).
    retry_at: float | None = None
    last_error: str | None = None
    attempts: int = 0
    since: float = field(default_factory=time.monotonic)

    def retry_in(self, now: float | None = None) -> float | None:
        if self.retry_at is None:
            return None
        return max(0.0, self.retry_at - (time.monotonic() if now is None else now))

    def describe(self) -> str:
        wait = (self.retry_in() or 0.0) if self.phase is LinkPhase.RETRYING else None
        return link_text(self.phase.value, self.last_error or "", wait)


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class TransportError(Exception):
    """The node could not be reached or the channel broke (as opposed to a command exiting non-zero)."""


class CommandNotStarted(TransportError):
    """The command never began on the node (no connection, or its channel could not be opened): running
    it again once the link is back is safe, unlike a command whose channel broke while it ran."""


class RemoteProcess(abc.ABC):
    """A long-running command whose stdout is read as it arrives (log streams, the probe)."""

    @abc.abstractmethod
    def chunks(self) -> AsyncIterator[bytes]:
        """Raw stdout bytes as they arrive; ends when the command exits or the channel closes."""

    @abc.abstractmethod
    async def write(self, data: bytes) -> None: ...

    @abc.abstractmethod
    async def close_stdin(self) -> None: ...

    @abc.abstractmethod
    async def wait(self) -> int | None:
        """The exit status (``None`` when the channel died without one)."""

    @abc.abstractmethod
    async def stderr_text(self) -> str:
        """What the command wrote on stderr (read after it ended)."""

    @abc.abstractmethod
    def terminate(self) -> None:
        """Close the channel; the far side sees EOF/hang-up and must exit."""


StateListener = Callable[[str, LinkState], None]


class Transport(abc.ABC):
    """A connection to one node, shared by every channel to it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._state = LinkState(LinkPhase.CONNECTING)
        self._listeners: list[StateListener] = []
        #: Set (and replaced) at every phase change: waiters wake on the change, nobody polls.
        self._changed = asyncio.Event()

    # -- state -------------------------------------------------------------------------------------
    @property
    def state(self) -> LinkState:
        return self._state

    def add_listener(self, listener: StateListener) -> None:
        self._listeners.append(listener)

    @property
    def endpoint(self) -> str | None:
        """Where the node is reached (``10.0.0.2:22``), when that means anything."""
        return None

    def unreachable_now(self) -> bool:
        """True when waiting cannot help now: the node was never reached and its attempt failed."""
        return False

    def unreachable_message(self) -> str:
        """One line for a node that cannot be used: ``spark2 (10.0.0.2:22): connection refused — is sshd
        running?`` (the reason, not the retry countdown, which is stale by the time it is read)."""
        state = self._state
        where = f"{self.name} ({self.endpoint})" if self.endpoint else self.name
        if state.phase is LinkPhase.CONNECTED:
            return f"{where}: connected"
        if state.last_error:
            return f"{where}: {state.last_error}"
        return f"{where}: {state.phase.value}"

    def remove_listener(self, listener: StateListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _set_state(self, state: LinkState) -> None:
        self._state = state
        for listener in list(self._listeners):
            # A faulty listener must not take the transport (or the SSH supervisor) down with it.
            try:
                listener(self.name, state)
            except Exception:
                log.exception("%s: link state listener failed", self.name)
        # Wake everyone waiting for a change (wait_connected, a channel waiting for a reconnect).
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_change(self, timeout: float | None = None) -> None:
        """Until the link's state changes, or ``timeout`` seconds (``None``: no limit)."""
        if timeout is not None and timeout <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await within(self._changed.wait(), timeout)

    # -- lifecycle ---------------------------------------------------------------------------------
    @abc.abstractmethod
    async def connect(self) -> None:
        """Open the connection (and keep it open, reconnecting, until ``close``)."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    async def wait_connected(self, timeout: float | None = None) -> None:
        """Return once connected; raise ``TransportError`` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._state.phase is not LinkPhase.CONNECTED:
            if self._state.phase in (LinkPhase.FAILED, LinkPhase.CLOSED):
                raise TransportError(self.unreachable_message())
            # A bounded wait wants an answer: a node never reached, whose attempt failed, is one already
            # (an unbounded wait, e.g. a dashboard channel, waits for it to come back).
            if deadline is not None and self.unreachable_now():
                raise TransportError(self.unreachable_message())
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TransportError(f"{self.unreachable_message()} (not connected after {timeout:.0f} s)")
            await self._wait_change(remaining)

    # -- channels ----------------------------------------------------------------------------------
    @abc.abstractmethod
    async def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """Run one command to completion. Raises ``TransportError`` if the node is unreachable."""

    @abc.abstractmethod
    async def start(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None
    ) -> RemoteProcess:
        """Start a streaming command (log follower, probe)."""

    @abc.abstractmethod
    async def forward_port(self, remote_host: str, remote_port: int) -> int:
        """A local port forwarded to ``remote_host:remote_port`` as the node sees that address."""


def shell_line(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """The one remote command string: every word quoted, environment passed through ``env``."""
    words = list(argv)
    if not words:
        raise ValueError("empty command")
    if env:
        words = ["env", *(f"{k}={v}" for k, v in env.items()), *words]
    return shlex.join(words)


# ---------------------------------------------------------------------------------------------------
class _LocalProcess(RemoteProcess):
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc

    async def chunks(self) -> AsyncIterator[bytes]:
        assert self._proc.stdout is not None
        while True:
            data = await self._proc.stdout.read(65536)
            if not data:
                return
            yield data

    async def write(self, data: bytes) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(data)
        await self._proc.stdin.drain()

    async def close_stdin(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()

    async def wait(self) -> int | None:
        return await self._proc.wait()

    async def stderr_text(self) -> str:
        if self._proc.stderr is None:
            return ""
        return (await self._proc.stderr.read()).decode("utf-8", "replace")

    def terminate(self) -> None:
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                if self._proc.stdin is not None:
                    self._proc.stdin.close()
                self._proc.terminate()


class LocalTransport(Transport):
    """The machine sparktui runs on, through the same interface (no shell involved at all)."""

    async def connect(self) -> None:
        self._set_state(LinkState(LinkPhase.CONNECTED))

    async def close(self) -> None:
        self._set_state(LinkState(LinkPhase.CLOSED))

    @staticmethod
    def _env(env: Mapping[str, str] | None) -> dict[str, str] | None:
        return None if not env else {**os.environ, **env}

    async def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        t0 = time.monotonic()
        argv = tuple(os.path.expanduser(a) if a.startswith("~/") else a for a in argv)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self._env(env),
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            return CommandResult(argv, 127, "", f"{argv[0]}: command not found ({exc})", 0.0)
        except OSError as exc:  # not executable, …: the shell's status for a command that cannot run
            return CommandResult(argv, 126, "", f"{argv[0]}: cannot run ({exc})", 0.0)
        try:
            out, err = await within(proc.communicate(input), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            return CommandResult(argv, 124, "", f"timed out after {timeout} s", time.monotonic() - t0)
        return CommandResult(
            argv,
            proc.returncode if proc.returncode is not None else -1,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
            time.monotonic() - t0,
        )

    async def start(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None
    ) -> RemoteProcess:
        argv = tuple(os.path.expanduser(a) if a.startswith("~/") else a for a in argv)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self._env(env),
            )
        except OSError as exc:
            # As over SSH, a command that cannot start is the caller's to report and retry (the probe,
            # the log follower), never an exception that ends the dashboard.
            raise TransportError(f"{self.name}: cannot start {argv[0]}: {exc.strerror or exc}") from exc
        return _LocalProcess(proc)

    async def forward_port(self, remote_host: str, remote_port: int) -> int:
        # The node is this machine: its ports are already local.
        return remote_port
