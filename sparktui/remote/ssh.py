"""The SSH transport: one asyncssh connection per node, shared by every channel, kept up by a supervisor.

- Host keys are always checked: the node's own ``known_hosts`` file plus the user's (``~/.ssh/known_hosts``
  or what ``~/.ssh/config`` names). A host whose key does not match is refused and the state says so.
- ``~/.ssh/config`` is honoured (asyncssh reads it), so ``node.host`` may be an alias.
- Client keepalives notice a dead link within about ``keepalive_interval * (keepalive_count_max + 1)``.
- On loss the supervisor reconnects with exponential backoff and jitter (``RETRYING``, with the time of
  the next attempt and the last error); authentication and host-key faults are ``FAILED`` and retried
  only slowly, because retrying them quickly cannot help.
- The TCP connection is opened here, not by asyncssh, with its own short timeout (``TCP_TIMEOUT``): a node
  that is off or cut off is said in seconds, while a slow SSH handshake still has ``connect_timeout``.
  While a node is unreachable (refused, no answer) a plain TCP connect is tried every ``PROBE_INTERVAL``
  during the backoff wait; the first one that succeeds ends the wait and its socket carries the SSH
  handshake. A returning node is connected within about a second, while SSH handshakes against a node
  that accepts TCP but fails later still wait out the growing backoff (nothing is hammered).
- A node that has never been connected and whose attempt failed is unreachable *now*: ``run``, ``start``
  and a bounded ``wait_connected`` raise at once with one line (``spark2 (10.0.0.2:22): connection
  refused — is sshd running?``) instead of waiting for a retry; the supervisor keeps retrying in the
  background for whoever keeps the transport (the dashboard). A node that was connected and dropped is
  waited for (``reconnect_wait``), since it is usually back within seconds.
- Commands are argument lists, joined for the remote shell by ``shell_line`` (every word quoted).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import time
from collections.abc import AsyncIterator, Mapping, Sequence

import asyncssh

from sparktui.config import NodeConfig
from sparktui.domain.backoff import Backoff
from sparktui.domain.deadline import within
from sparktui.remote.ssh_options import (
    DEFAULT_KNOWN_HOSTS,
    connection_options,
    host_key_message,
    known_hosts_files,
    preferred_ciphers,
    probe_target,
)
from sparktui.remote.transport import (
    CommandNotStarted,
    CommandResult,
    LinkPhase,
    LinkState,
    RemoteProcess,
    Transport,
    TransportError,
    shell_line,
)

log = logging.getLogger(__name__)

#: Imported from here too (tests, benchmarks).
__all__ = ["DEFAULT_KNOWN_HOSTS", "SSHTransport", "preferred_ciphers"]

#: How much of a streaming command's stderr is kept (the tail).
STDERR_KEEP = 64 * 1024
#: Exit status reported when ``run`` gives up waiting (like coreutils ``timeout``).
TIMEOUT_STATUS = 124
#: How long opening the TCP connection to sshd may take (a LAN peer answers in milliseconds).
TCP_TIMEOUT = 3.0
#: While a node is unreachable, how often a TCP connect checks whether it is back (one SYN: cheap).
PROBE_INTERVAL = 1.0
#: A connection that lasted less than this before it dropped counts as a failed attempt (see _supervise).
STABLE_AFTER = 10.0


class _PermanentError(Exception):
    """A connection fault that retrying quickly cannot fix (host key, authentication)."""


class _Client(asyncssh.SSHClient):
    """Remembers why the connection ended, for the state's ``last_error``."""

    def __init__(self) -> None:
        self.lost_reason: str | None = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost_reason = _describe(exc) if exc is not None else "connection closed by the node"


class _Unreachable(Exception):
    """The TCP connection to sshd could not be opened (refused, no answer, no route): the node is down or
    cut off, so waiting for it to come back is worth a cheap probe."""


def _describe(exc: BaseException) -> str:
    if isinstance(exc, _Unreachable):
        return str(exc)
    if isinstance(exc, asyncssh.DisconnectError) and exc.reason:
        return "connection lost" if exc.reason == "Connection lost" else str(exc.reason)
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused — is sshd running?"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host name ({exc.strerror or exc})"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, OSError) and exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return f"{(exc.strerror or 'unreachable').lower()} — is the host up and its link connected?"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower() if exc.errno else exc.strerror
    return str(exc) or type(exc).__name__


def _network_fault(exc: BaseException) -> bool:
    """The TCP connection itself failed (as opposed to SSH on top of it)."""
    return isinstance(exc, _Unreachable | ConnectionRefusedError | TimeoutError) or (
        isinstance(exc, OSError) and exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ECONNRESET))


async def _tcp_connect(host: str, port: int, timeout: float) -> socket.socket:
    """A connected TCP socket to ``host:port``; raises ``_Unreachable`` saying why not."""
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + timeout
    try:
        infos = await within(loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), timeout)
    except (OSError, TimeoutError) as exc:
        raise _Unreachable(_describe(exc)) from exc
    last: BaseException | None = None
    for family, kind, proto, _name, addr in infos:
        sock = socket.socket(family, kind, proto)
        sock.setblocking(False)
        try:
            await within(loop.sock_connect(sock, addr), max(0.05, deadline - time.monotonic()))
        except (OSError, TimeoutError) as exc:
            sock.close()
            last = exc
            continue
        except BaseException:
            sock.close()
            raise
        return sock
    if isinstance(last, TimeoutError) or last is None:
        raise _Unreachable(f"no answer within {timeout:.0f} s — is the host up and its link connected?")
    raise _Unreachable(_describe(last)) from last


#: Every command runs under this constant wrapper: it reports its PID on the first line of stdout, then
#: becomes the command. ``terminate`` and timeouts use the PID to hang the command up, because sshd
#: cannot deliver signal requests in every setup (root logins run without privilege separation).
PID_WRAPPER = 'printf "%s\\n" "$$"; exec "$@"'
#: Hang up a command started under ``PID_WRAPPER`` (its process group when it leads one).
HANGUP_SCRIPT = 'kill -HUP -- "-$1" 2>/dev/null || kill -HUP "$1" 2>/dev/null; exit 0'


def wrapped_line(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """The remote command line for ``argv``: quoted by ``shell_line``, under ``PID_WRAPPER``."""
    if not argv:
        raise ValueError("empty command")
    return shell_line(["sh", "-c", PID_WRAPPER, "sh", *argv], env)


async def _read_pid(proc: asyncssh.SSHClientProcess[bytes]) -> int | None:
    line = await proc.stdout.readline()
    try:
        return int(line.strip())
    except ValueError:
        return None


class _SSHProcess(RemoteProcess):
    def __init__(
        self, transport: SSHTransport, proc: asyncssh.SSHClientProcess[bytes], pid: int | None
    ) -> None:
        self._transport = transport
        self._proc = proc
        self.pid = pid
        self._stderr = bytearray()
        self._terminated = False
        # Drain stderr all along: an unread stream would fill the channel window and stall stdout too.
        self._stderr_task = asyncio.create_task(self._drain_stderr())

    async def _drain_stderr(self) -> None:
        with contextlib.suppress(asyncssh.Error, OSError, asyncio.CancelledError):
            while True:
                data = await self._proc.stderr.read(65536)
                if not data:
                    return
                self._stderr += data
                if len(self._stderr) > STDERR_KEEP:
                    del self._stderr[: len(self._stderr) - STDERR_KEEP]

    async def chunks(self) -> AsyncIterator[bytes]:
        while True:
            try:
                data = await self._proc.stdout.read(65536)
            except (asyncssh.Error, OSError):
                return
            if not data:
                return
            yield data

    async def write(self, data: bytes) -> None:
        try:
            self._proc.stdin.write(data)
            await self._proc.stdin.drain()
        except (asyncssh.Error, OSError) as exc:
            raise TransportError(f"writing to the remote command failed: {_describe(exc)}") from exc

    async def close_stdin(self) -> None:
        with contextlib.suppress(asyncssh.Error, OSError):
            self._proc.stdin.write_eof()

    async def wait(self) -> int | None:
        with contextlib.suppress(asyncssh.Error, OSError):
            await self._proc.wait_closed()
        return self._proc.returncode

    async def stderr_text(self) -> str:
        with contextlib.suppress(asyncio.TimeoutError):
            await within(asyncio.shield(self._stderr_task), 1.0)
        return self._stderr.decode("utf-8", "replace")

    def terminate(self) -> None:
        if self._terminated:
            return
        self._terminated = True
        self._transport._hang_up(self._proc, self.pid)


class SSHTransport(Transport):
    """A node reached over SSH."""

    def __init__(
        self,
        node: NodeConfig,
        *,
        keepalive_interval: float = 2.0,
        keepalive_count_max: int = 3,
        connect_timeout: float = 8.0,
        reconnect_wait: float = 5.0,
        backoff: Backoff | None = None,
        permanent_retry: float = 60.0,
        probe: bool = True,
    ) -> None:
        super().__init__(node.name)
        #: Probe TCP reachability during backoff waits (``False``: the backoff alone decides, as before;
        #: the reconnect benchmark's baseline).
        self.probe = probe
        self.node = node
        self.keepalive_interval = keepalive_interval
        self.keepalive_count_max = keepalive_count_max
        self.connect_timeout = connect_timeout
        #: How long ``run``/``start`` wait for a reconnect before raising ``TransportError``.
        self.reconnect_wait = reconnect_wait
        self.backoff = backoff or Backoff()
        #: Host-key and authentication failures are retried this rarely (the user may fix the file).
        self.permanent_retry = permanent_retry
        self._conn: asyncssh.SSHClientConnection | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._closing = False
        self._forwards = _PortForwards(node.name)
        self._background: set[asyncio.Task[None]] = set()
        self._known_files: list[str] = []
        #: Where sshd is reached (from ~/.ssh/config when it says), for messages; set by each attempt.
        self._endpoint = f"{node.host}:{node.port or 22}"
        #: Ever connected: a node that dropped is waited for, one never reached is reported at once.
        self._ever_connected = False
        #: A TCP connection the reachability probe opened, handed to the next SSH handshake.
        self._ready_sock: socket.socket | None = None

    # -- state -------------------------------------------------------------------------------------
    @property
    def connection(self) -> asyncssh.SSHClientConnection | None:
        return self._conn

    @property
    def endpoint(self) -> str:
        return self._endpoint

    def unreachable_now(self) -> bool:
        """Never connected, and the last attempt failed: there is nothing to wait for."""
        return (not self._ever_connected and self._state.phase in (LinkPhase.RETRYING, LinkPhase.FAILED)
                and self._state.attempts > 0)

    # -- lifecycle ---------------------------------------------------------------------------------
    async def connect(self) -> None:
        """Start the supervisor and wait for the outcome of the first attempt (it never raises)."""
        if self._supervisor is None:
            self._closing = False
            self._supervisor = asyncio.create_task(self._supervise(), name=f"ssh-supervisor-{self.name}")
        deadline = time.monotonic() + self.connect_timeout + 1.0
        while self._state.phase is LinkPhase.CONNECTING and time.monotonic() < deadline:
            await self._wait_change(deadline - time.monotonic())

    async def close(self) -> None:
        self._closing = True
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
            self._supervisor = None
        # A hang-up under way finishes first (it is what ends a helper on the node), then the rest stop.
        if self._background:
            await asyncio.wait(set(self._background), timeout=2.0)
            for task in list(self._background):
                task.cancel()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                await within(conn.wait_closed(), 2.0)
        self._drop_ready_sock()
        self._forwards.closed()
        # A node closed while unreachable keeps its reason: a later run() names why, not just "closed".
        was = self._state
        reason = was.last_error if was.phase is not LinkPhase.CONNECTED else None
        self._set_state(LinkState(LinkPhase.CLOSED, last_error=reason, attempts=was.attempts))

    def _drop_ready_sock(self) -> None:
        sock, self._ready_sock = self._ready_sock, None
        if sock is not None:
            sock.close()

    # -- the supervisor ----------------------------------------------------------------------------
    async def _supervise(self) -> None:
        failures = 0
        last_error: str | None = None
        while not self._closing:
            if failures:
                # Still RETRYING while the attempt runs: the UI keeps showing why it is retrying.
                self._set_state(LinkState(LinkPhase.RETRYING, None, last_error, failures))
            else:
                self._set_state(LinkState(LinkPhase.CONNECTING, attempts=0))
            try:
                conn, client = await self._open()
            except _PermanentError as exc:
                failures += 1
                last_error = str(exc)
                self._set_state(LinkState(LinkPhase.FAILED, time.monotonic() + self.permanent_retry,
                                          last_error, failures))
                await asyncio.sleep(self.permanent_retry)
                continue
            except Exception as exc:  # anything else (a bug, an odd error): keep retrying, say why
                failures += 1
                last_error = _describe(exc)
                # Probing only helps when TCP itself failed; a node that accepts TCP and then fails the
                # handshake waits out the backoff.
                await self._sleep_retrying(failures, last_error, probe=_network_fault(exc))
                continue
            self._conn = conn
            self._ever_connected = True
            streak, failures = failures, 0
            connected_at = time.monotonic()
            await self._forwards.restore(conn)
            self._set_state(LinkState(LinkPhase.CONNECTED))
            await conn.wait_closed()
            self._conn = None
            self._forwards.closed()
            if self._closing:
                return
            reason = client.lost_reason or "closed"
            last_error = reason if reason.startswith("connection") else f"connection lost: {reason}"
            if streak and time.monotonic() - connected_at < STABLE_AFTER:
                # A reconnect that dropped again at once (a flapping link, a node that kills our sessions):
                # the backoff keeps growing and no probe cuts it short, so such a node is not hammered.
                failures = streak + 1
                await self._sleep_retrying(failures, last_error)
            else:
                failures = 1
                await self._sleep_retrying(failures, last_error, probe=True)

    async def _sleep_retrying(self, failures: int, error: str, *, probe: bool = False) -> None:
        """Wait out the backoff; with ``probe``, end the wait early once a TCP connect to sshd succeeds
        (that socket is kept for the next handshake)."""
        delay = self.backoff.delay(failures)
        deadline = time.monotonic() + delay
        self._set_state(LinkState(LinkPhase.RETRYING, deadline, error, failures))
        target = probe_target(self.node) if probe and self.probe else None
        if target is None:
            await asyncio.sleep(delay)
            return
        while (remaining := deadline - time.monotonic()) > 0:
            t0 = time.monotonic()
            try:
                self._ready_sock = await _tcp_connect(*target, min(TCP_TIMEOUT, max(remaining, 0.2)))
                return
            except _Unreachable:
                pass
            pause = min(PROBE_INTERVAL - (time.monotonic() - t0), deadline - time.monotonic())
            if pause > 0:
                await asyncio.sleep(pause)

    def known_hosts_files(self, options: asyncssh.SSHClientConnectionOptions | None = None) -> list[str]:
        """The known_hosts files checked for this node (existing ones only)."""
        return known_hosts_files(self.node, options)

    async def _open(self) -> tuple[asyncssh.SSHClientConnection, _Client]:
        options, self._known_files = connection_options(
            self.node, keepalive_interval=self.keepalive_interval,
            keepalive_count_max=self.keepalive_count_max, connect_timeout=self.connect_timeout)
        client = _Client()
        host, port = str(options.host or self.node.host), int(options.port or 22)
        self._endpoint = f"{host}:{port}"
        sock, self._ready_sock = self._ready_sock, None
        if sock is None and not (options.tunnel or options.proxy_command):
            # Our own TCP connect, bounded on its own: "host down" is known in TCP_TIMEOUT, not after the
            # whole connect_timeout meant for a slow handshake.
            sock = await _tcp_connect(host, port, min(TCP_TIMEOUT, self.connect_timeout))
        try:
            conn, _ = await asyncssh.create_connection(lambda: client, self.node.host, options=options,
                                                       sock=sock)
        except asyncssh.HostKeyNotVerifiable as exc:
            raise _PermanentError(host_key_message(self.node, self._known_files, options,
                                                   _describe(exc))) from exc
        except asyncssh.PermissionDenied as exc:
            user = options.username or "?"
            raise _PermanentError(
                f"authentication failed for {user}@{self.node.host} ({_describe(exc)}); "
                f"check identity_file / ~/.ssh/config and the node's authorized_keys"
            ) from exc
        except BaseException:
            if sock is not None:
                sock.close()
            raise
        return conn, client

    # -- channels ----------------------------------------------------------------------------------
    async def _connection(self) -> asyncssh.SSHClientConnection:
        """The live connection, waiting up to ``reconnect_wait`` for a reconnect."""
        if self._supervisor is None and not self._closing:
            await self.connect()
        deadline = time.monotonic() + self.reconnect_wait
        while True:
            conn = self._conn
            if conn is not None and self._state.phase is LinkPhase.CONNECTED:
                return conn
            state = self._state
            if state.phase in (LinkPhase.FAILED, LinkPhase.CLOSED) or self.unreachable_now():
                raise TransportError(self.unreachable_message())
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TransportError(f"{self.unreachable_message()} "
                                     f"(not back within {self.reconnect_wait:.0f} s)")
            await self._wait_change(remaining)

    def _hang_up(self, proc: asyncssh.SSHClientProcess[bytes], pid: int | None) -> None:
        """End a remote command: signal request, EOF, channel close, and a HUP by PID to make sure."""
        with contextlib.suppress(asyncssh.Error, OSError):
            proc.send_signal("HUP")
        with contextlib.suppress(asyncssh.Error, OSError):
            proc.stdin.write_eof()
        proc.close()
        if pid is not None and self._conn is not None:
            task = asyncio.create_task(self._kill_remote(pid))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _kill_remote(self, pid: int) -> None:
        conn = self._conn
        if conn is None:
            return
        # AssertionError: asyncssh asserts (``SSHChannel.get_connection``) when the connection closes
        # while this session is being opened; the link is gone, and the node's HUP did the rest.
        with contextlib.suppress(asyncssh.Error, OSError, asyncio.TimeoutError, AssertionError):
            await within(conn.run(shell_line(["sh", "-c", HANGUP_SCRIPT, "sh", str(pid)])), 10)

    async def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        command = wrapped_line(argv, env)
        try:
            conn = await self._connection()
        except TransportError as exc:
            raise CommandNotStarted(str(exc)) from exc
        t0 = time.monotonic()
        try:
            proc = await conn.create_process(command, encoding=None,
                                             stdin=asyncssh.DEVNULL if input is None else asyncssh.PIPE)
        except (OSError, asyncssh.Error) as exc:
            raise CommandNotStarted(f"{self.name}: cannot run {argv[0]}: {_describe(exc)}") from exc
        pid: int | None = None

        async def converse() -> tuple[bytes | str | None, bytes | str | None]:
            nonlocal pid
            pid = await _read_pid(proc)
            return await proc.communicate(input)

        try:
            stdout, stderr = await within(converse(), timeout)
        except TimeoutError:
            self._hang_up(proc, pid)
            return CommandResult(tuple(argv), TIMEOUT_STATUS, "", f"timed out after {timeout} s",
                                 time.monotonic() - t0)
        except (OSError, asyncssh.Error) as exc:
            self._hang_up(proc, pid)
            raise TransportError(f"{self.name}: {argv[0]} lost its channel: {_describe(exc)}") from exc
        except asyncio.CancelledError:
            self._hang_up(proc, pid)
            raise
        with contextlib.suppress(asyncssh.Error, OSError):
            await proc.wait_closed()
        returncode = proc.returncode
        if returncode is None:
            if self._conn is not conn or conn.is_closed():
                raise TransportError(f"{self.name}: connection lost while running {argv[0]}")
            returncode = -1
        return CommandResult(tuple(argv), returncode, _text(stdout), _text(stderr), time.monotonic() - t0)

    async def start(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None
    ) -> RemoteProcess:
        command = wrapped_line(argv, env)
        conn = await self._connection()
        try:
            proc = await conn.create_process(command, encoding=None)
            pid = await within(_read_pid(proc), self.connect_timeout)
        except (OSError, asyncssh.Error, TimeoutError) as exc:
            raise TransportError(f"{self.name}: cannot start {argv[0]}: {_describe(exc)}") from exc
        return _SSHProcess(self, proc, pid)

    async def forward_port(self, remote_host: str, remote_port: int) -> int:
        return await self._forwards.open(await self._connection(), remote_host, remote_port)


class _PortForwards:
    """Local ports forwarded over the connection, re-established on the same port after a reconnect."""

    def __init__(self, name: str) -> None:
        self.name = name
        #: (remote host, remote port) -> local port, kept across reconnects.
        self._ports: dict[tuple[str, int], int] = {}
        #: The listeners of the live connection.
        self._open: dict[tuple[str, int], asyncssh.SSHListener] = {}

    async def open(self, conn: asyncssh.SSHClientConnection, remote_host: str, remote_port: int) -> int:
        """The local port forwarded to ``remote_host:remote_port`` (opened on first asking)."""
        key = (remote_host, remote_port)
        if key in self._open:
            return self._ports[key]
        try:
            listener = await conn.forward_local_port("127.0.0.1", 0, remote_host, remote_port)
        except (OSError, asyncssh.Error) as exc:
            raise TransportError(f"{self.name}: cannot forward to {remote_host}:{remote_port}: "
                                 f"{_describe(exc)}") from exc
        self._open[key] = listener
        self._ports[key] = listener.get_port()
        return self._ports[key]

    async def restore(self, conn: asyncssh.SSHClientConnection) -> None:
        """A new connection: each forward again, on its port."""
        for (host, port), local in list(self._ports.items()):
            try:
                listener = await conn.forward_local_port("127.0.0.1", local, host, port)
            except (OSError, asyncssh.Error):
                del self._ports[(host, port)]  # the port was taken meanwhile: a new one on request
                continue
            self._open[(host, port)] = listener

    def closed(self) -> None:
        """The connection is gone, and its listeners with it."""
        self._open.clear()


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data
