"""One operation at a time: in this process (``busy``) and across processes and machines (the operation
lock on the head, ``domain.lifecycle.oplock``'s script held open for the operation's length)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import AsyncIterator, Callable

from sparktui.domain.deadline import within
from sparktui.domain.events import OperationRefused
from sparktui.domain.lifecycle import oplock as L
from sparktui.domain.logs import LineSplitter
from sparktui.remote.engine_nodes import EngineNodes
from sparktui.remote.transport import RemoteProcess, TransportError


class OperationGate:
    """``exclusive(kind)`` around each operation; ``OperationRefused`` while another one runs."""

    def __init__(self, nodes: EngineNodes, origin: str,
                 on_busy: Callable[[str | None], None] | None = None) -> None:
        self.nodes = nodes
        #: Told each time ``busy`` changes (the dashboard's backend posts it: ``OperationBusy``).
        self.on_busy = on_busy
        #: Who asks, as the operation lock on the head names it to others ("`sparktui restart`").
        self.origin = origin
        #: The kind of operation running now, if any.
        self.busy: str | None = None
        #: The takeover of a lock whose holder died, said in the next operation's steps.
        self.note: str | None = None
        #: A compound operation (``held``) holds the head's lock: the operations inside it run under it.
        self.holding: str | None = None

    @contextlib.asynccontextmanager
    async def exclusive(self, kind: str) -> AsyncIterator[None]:
        if self.busy is not None:
            raise OperationRefused(f"cannot {kind}: {self.busy} is running; wait for it to finish")
        self._set_busy(kind)
        lock: RemoteProcess | None = None
        try:
            # Preflight changes nothing: it runs beside anyone's operation. Inside a held compound
            # operation the lock is held already.
            if kind != "preflight" and self.holding is None:
                lock = await self._take(kind)
            yield
        finally:
            self._set_busy(None)
            self.note = None
            if lock is not None:
                await self._release(lock)

    @contextlib.asynccontextmanager
    async def held(self, kind: str) -> AsyncIterator[None]:
        """The head's lock for a compound operation (an upgrade: stop, start, verify, maybe roll back),
        so that no one else's operation — the supervisor's restart of a failing trial — runs between its
        steps; each step inside still runs ``exclusive``, one at a time here."""
        if self.busy is not None or self.holding is not None:
            raise OperationRefused(f"cannot {kind}: {self.busy or self.holding} is running; wait for it")
        lock = await self._take(kind)
        self.holding = kind
        try:
            yield
        finally:
            self.holding = None
            if lock is not None:
                await self._release(lock)

    def _set_busy(self, kind: str | None) -> None:
        self.busy = kind
        if self.on_busy is not None:
            self.on_busy(kind)

    async def _take(self, kind: str) -> RemoteProcess | None:
        """The operation lock on the head (across processes and machines); ``OperationRefused`` when
        another sparktui holds it. An unreachable head is no reason to refuse a stop: the lock is then
        skipped (the operation's own steps say the head is unreachable)."""
        cfg = self.nodes.config
        holder = L.LockHolder(kind, self.origin, socket.gethostname(), os.getpid(), time.time())
        transport = self.nodes.transports[cfg.head.name]
        try:
            await self.nodes.resolve_homes(quiet=True)
            proc = await transport.start(L.take_argv(cfg, self.nodes.homes or None, holder))
        except TransportError:
            return None
        answer: L.LockAnswer | None = None
        lines = LineSplitter()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(30):
                async for chunk in proc.chunks():
                    if first := lines.feed(chunk):   # the script's one answer line
                        answer = L.LockAnswer.parse(first[0])
                        break
        if answer is not None and answer.status == "taken":
            if answer.holder is not None:
                self.note = f"took the operation lock over from {answer.holder.describe()}: it is gone"
            return proc
        await self._release(proc)
        if answer is not None and answer.status == "held":
            raise OperationRefused(L.refusal(kind, answer.holder))
        return None  # no answer (an old python, a read-only state dir): go on without the lock

    async def _release(self, proc: RemoteProcess) -> None:
        """``release`` + EOF (the script empties the file: a clean release), then make sure it ends."""
        try:
            await proc.write(b"release\n")
            await proc.close_stdin()
            await within(proc.wait(), 5.0)
        except Exception:  # a dead channel frees the lock anyway
            pass
        finally:
            proc.terminate()
            self.nodes.reap(proc)

    async def holder(self) -> L.LockHolder | None:
        """Who holds the operation lock now (another sparktui's start/stop/restart), if anyone."""
        cfg = self.nodes.config
        try:
            res = await self.nodes.run(cfg.head.name, L.show_argv(cfg, self.nodes.homes or None), 20)
        except TransportError:
            return None
        answer = L.LockAnswer.parse(res.stdout.strip().splitlines()[-1]) if res.ok and res.stdout.strip() \
            else None
        return answer.holder if answer is not None and answer.status == "held" else None
