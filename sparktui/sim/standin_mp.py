"""vLLM's own multi-node mode for the stand-in (``--nnodes N --node-rank R --master-addr A --master-port P``,
``--headless`` on ranks > 0): no Ray.

Rank 0 listens on the master port and waits, silently as torch's rendezvous does, until every headless
rank has connected; then the replay sends each remote rank its worker lines over that connection and the
headless process prints them into its *own* output (in this mode a worker's lines stay on its node).
A headless rank that goes away is noticed by rank 0; rank 0 going away ends the headless ranks.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

CONNECT_RETRY_SECONDS = 0.3


def worker_prefix(
    version: tuple[int, ...], rank: int, tensor_parallel: int, pipeline_parallel: int, pid: int
) -> str:
    """vLLM's multiprocessing-worker prefix for this version (its stdout patch, ≤0.30)."""
    tp, pp = rank % tensor_parallel, rank // tensor_parallel
    if version < (0, 10):
        name = "VllmWorkerProcess"
    elif version < (0, 11):
        name = f"VllmWorker TP{tp}" if pipeline_parallel == 1 else f"VllmWorker PP{pp}_TP{tp}"
    else:
        name = f"Worker_TP{tp}" if pipeline_parallel == 1 else f"Worker_PP{pp}_TP{tp}"
    if version <= (0, 11):
        return f"\x1b[1;36m({name} pid={pid})\x1b[0;0m "  # always coloured then, even into a file
    return f"({name} pid={pid}) "


@dataclass
class Peer:
    """One connected headless rank, as seen from rank 0."""

    sock: socket.socket
    rank: int
    pid: int
    ip: str
    lock: threading.Lock = field(default_factory=threading.Lock)

    def send(self, lines: list[str]) -> None:
        data = (json.dumps({"lines": lines}) + "\n").encode()
        with self.lock, contextlib.suppress(OSError):
            self.sock.sendall(data)

    def watch(self, on_gone: Callable[[Peer], None]) -> None:
        def run() -> None:
            with contextlib.suppress(OSError):
                while self.sock.recv(4096):
                    pass
            on_gone(self)

        threading.Thread(target=run, name=f"standin-peer-{self.rank}", daemon=True).start()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


class Rendezvous:
    """Rank 0's side: the master port, and the headless ranks that joined it."""

    def __init__(self, port: int) -> None:
        self.listener = socket.create_server(("0.0.0.0", port), reuse_port=False)
        self.listener.settimeout(0.2)
        self.peers: list[Peer] = []

    def wait(self, expected: int, stop: threading.Event, deadline: float) -> bool:
        """Accept until ``expected`` ranks joined (True), the deadline passed (False), or ``stop``."""
        while len(self.peers) < expected:
            if stop.is_set() or time.monotonic() >= deadline:
                return False
            try:
                sock, (ip, _port) = self.listener.accept()
            except TimeoutError:
                continue
            sock.settimeout(5)
            try:
                hello = json.loads(sock.makefile("r").readline())
                rank, pid = int(hello["rank"]), int(hello["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                # Not a headless rank's hello (a stray connection to the port): rank 0 keeps waiting.
                sock.close()
                continue
            sock.settimeout(None)
            self.peers.append(Peer(sock, rank, pid, ip))
        return True

    def close(self) -> None:
        for peer in self.peers:
            peer.close()
        self.listener.close()


def run_headless(master_addr: str, master_port: int, node_rank: int, stop: threading.Event) -> int:
    """A headless rank: join rank 0, print what it is sent, end when rank 0 goes away or on a signal."""
    sock: socket.socket | None = None
    while sock is None:
        if stop.wait(0):
            return 0
        try:
            sock = socket.create_connection((master_addr, master_port), timeout=2)
        except OSError:
            if stop.wait(CONNECT_RETRY_SECONDS):
                return 0
    sock.settimeout(None)
    sock.sendall((json.dumps({"rank": node_rank, "pid": os.getpid()}) + "\n").encode())

    def close_on_stop() -> None:
        stop.wait()
        _shutdown(sock)

    threading.Thread(target=close_on_stop, daemon=True).start()
    with contextlib.suppress(OSError), sock.makefile("r", encoding="utf-8") as stream:
        for raw in stream:
            try:
                lines = json.loads(raw)["lines"]
            except (ValueError, KeyError):
                continue
            for line in lines:
                sys.stdout.write(line + "\n")
            sys.stdout.flush()
    return 0


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
