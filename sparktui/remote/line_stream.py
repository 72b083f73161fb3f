"""One remote command's output, kept flowing: restarted whenever it ends, until the caller stops reading.

The log follower, the telemetry probe, the head's Ray watch, the wait for Ray at start and the head's
reachability rounds all run a long command on a node and read its stdout for as long as they are wanted.
The channel ends for many reasons (the SSH connection dropped, the node rebooted, the command died); each
time the stream waits for the link to be up again (``Transport.wait_connected``, woken by the link's
phase change), waits out the ``Backoff`` (reset by a session that delivered anything, growing while
sessions deliver nothing), and starts the command again. The stream ends when the transport is closed.

Read it with ``chunks()`` (raw bytes, e.g. framed) or ``lines()`` (through ``LineSplitter``), inside
``contextlib.aclosing`` so that leaving the loop (``break``, an exception, cancellation) hangs up the
command at once rather than whenever the generator is collected.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence

from sparktui.domain.backoff import Backoff
from sparktui.domain.deadline import within
from sparktui.domain.logs import LineSplitter
from sparktui.remote.transport import LinkPhase, RemoteProcess, Transport, TransportError

log = logging.getLogger(__name__)

#: Restart schedule of a stream whose command keeps ending: 1 s, doubling to 30 s while it delivers nothing.
DEFAULT_BACKOFF = Backoff(initial=1.0, maximum=30.0)


class LineStream:
    """``argv`` on ``transport``, restarted whenever it ends.

    ``argv`` may be a callable, asked at every (re)start (the log follower resumes from its offset).
    ``stdin`` is written to the command once it started (the probe's source). ``on_session`` is called
    at every start, before the first byte (per-session decoders start afresh). ``on_error`` gets one line
    for a start that failed and for a session that ended without delivering anything. ``reap`` takes
    over the wait for an ended command's exit (in the background); by default the stream waits up to
    ``reap_timeout`` s for it, and reads its stderr when it delivered nothing or exited non-zero.
    """

    def __init__(
        self,
        transport: Transport,
        argv: Sequence[str] | Callable[[], Sequence[str]],
        *,
        name: str,
        env: Mapping[str, str] | None = None,
        stdin: bytes | Callable[[], bytes] | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
        on_session: Callable[[], None] | None = None,
        on_error: Callable[[str], None] | None = None,
        reap: Callable[[RemoteProcess], None] | None = None,
        reap_timeout: float = 5.0,
    ) -> None:
        self.transport = transport
        self._argv = argv
        self.name = name
        self.env = env
        self._stdin = stdin
        self.backoff = backoff
        self.on_session = on_session
        self.on_error = on_error
        self._reap = reap
        self.reap_timeout = reap_timeout
        #: How many times the command was started; > 1 after a restart.
        self.sessions = 0
        self.last_error: str | None = None
        #: The running command (``None`` between sessions).
        self.proc: RemoteProcess | None = None
        self._failures = 0
        self._restart = False

    def argv(self) -> list[str]:
        return list(self._argv() if callable(self._argv) else self._argv)

    def restart(self, reason: str) -> None:
        """End the current session after the chunk being handled; the next starts after the backoff
        (a corrupted frame cannot be resumed mid-stream, but can be from the last good offset)."""
        self.last_error = reason
        self._restart = True

    async def lines(self) -> AsyncGenerator[str, None]:
        """Complete lines (``\\n`` or ``\\r``), a fresh ``LineSplitter`` per session: a line cut by a
        dropped channel is dropped with it, never glued to the next session's first line."""
        splitter = LineSplitter()
        session = -1
        async with contextlib.aclosing(self.chunks()) as chunks:
            async for chunk in chunks:
                if session != self.sessions:
                    session, splitter = self.sessions, LineSplitter()
                for line in splitter.feed(chunk):
                    yield line

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        """Raw stdout of each session in turn; ends when the transport is closed."""
        while True:
            proc = await self._start()
            if proc is None:
                return
            delivered = False
            ended = False  # the command closed its output by itself (not cancelled, not restarted)
            status: int | None = None
            try:
                async for chunk in proc.chunks():
                    delivered = True
                    yield chunk
                    if self._restart:
                        break
                ended = not self._restart
            except (TransportError, OSError) as exc:  # OSError: a local pipe broke
                log.info("%s: channel ended: %s", self.name, exc)
            finally:
                self.proc = None
                if ended and self._reap is None:
                    # Its output ended: let it exit by itself first, so its own status is the one read
                    # (a SIGTERM in the moment between EOF and exit would replace it). A cancel while
                    # waiting is not swallowed: nothing propagates yet, so it would be lost.
                    try:
                        with contextlib.suppress(Exception):
                            status = await within(proc.wait(), self.reap_timeout)
                    except asyncio.CancelledError:
                        with contextlib.suppress(Exception):
                            proc.terminate()
                        raise
                with contextlib.suppress(Exception):
                    proc.terminate()
                if self._reap is not None:
                    self._reap(proc)
                elif status is None:
                    # Reaped here (also when cancelled): no process or pipe outlives the stream.
                    with contextlib.suppress(Exception, asyncio.CancelledError):
                        status = await within(proc.wait(), self.reap_timeout)
            if self._restart:
                self._restart = False
            elif self._reap is None and (status not in (0, None) or not delivered):
                err = ""
                with contextlib.suppress(Exception):
                    err = (await within(proc.stderr_text(), 2.0)).strip()
                self.last_error = f"exited {status}: {err.splitlines()[-1] if err else ''}"
                if not delivered:
                    self._report(f"{self.name} exited (status {status}) without output: {err[-500:]}")
            self._failures = 0 if delivered else self._failures + 1
            await self._pause()

    async def _start(self) -> RemoteProcess | None:
        """The command started (its stdin written), once the link is up; ``None`` once it is closed."""
        transport = self.transport
        while True:
            if transport.state.phase is LinkPhase.CLOSED:
                return None
            proc: RemoteProcess | None = None
            try:
                await transport.wait_connected()
                proc = await transport.start(self.argv(), env=self.env)
                if self._stdin is not None:
                    await proc.write(self._stdin() if callable(self._stdin) else self._stdin)
            except (TransportError, OSError) as exc:
                if proc is not None:
                    with contextlib.suppress(Exception):
                        proc.terminate()
                if transport.state.phase is LinkPhase.CLOSED:
                    return None
                self.last_error = str(exc)
                self._report(f"{self.name} not started: {exc}")
                self._failures += 1
                await self._pause()
                continue
            self.sessions += 1
            self.proc = proc
            if self.on_session is not None:
                self.on_session()
            return proc

    async def _pause(self) -> None:
        await asyncio.sleep(self.backoff.delay(max(1, self._failures)))

    def _report(self, message: str) -> None:
        log.warning("%s", message)
        if self.on_error is not None:
            self.on_error(message)
