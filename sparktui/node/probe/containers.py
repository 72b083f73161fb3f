"""Our containers (name starts with the engine prefix): Docker socket first, CLI rarely, else null."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from typing import Any

from sparktui.node.probe.files import which
from sparktui.node.probe.problems import Problems, why_failed


class Containers:
    """Containers whose name starts with the engine prefix: Docker socket first, CLI rarely, else null."""

    def __init__(self, prefix: str, socket_path: str, every: float, problems: Problems) -> None:
        self.prefix = prefix
        self.socket_path = socket_path
        self.every = every
        self.problems = problems
        self.next_check = -1e9
        self.result: list[dict[str, Any]] | None = None
        self.cli = which("docker")
        self.disabled = not prefix

    def _socket(self) -> str | None:
        candidates = [self.socket_path]
        host = os.environ.get("DOCKER_HOST", "")
        if host.startswith("unix://"):
            candidates.insert(0, host[len("unix://"):])
        run_dir = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
        candidates.append(os.path.join(run_dir, "docker.sock"))    # rootless Docker
        return next((c for c in candidates if os.path.exists(c)), None)

    def sample(self) -> list[dict[str, Any]] | None:
        if self.disabled:
            return None
        if time.monotonic() < self.next_check:
            return self.result
        sock = self._socket()
        if sock is not None:
            self.next_check = time.monotonic() + self.every
            self.result = self._from_socket(sock)
        elif self.cli:
            # The CLI costs tens of ms of CPU per call: at most once a minute, every 5 min after a failure.
            self.result = self._from_cli()
            self.next_check = time.monotonic() + (max(self.every, 60.0) if self.result is not None else 300.0)
        else:
            self.next_check = time.monotonic() + max(self.every, 60.0)
            self.problems.note("containers", "docker not found on the node")
            self.result = None
        return self.result

    def _keep(self, names: list[str]) -> str | None:
        for n in names:
            n = n.lstrip("/")
            if n.startswith(self.prefix):
                return n
        return None

    def _from_socket(self, path: str) -> list[dict[str, Any]] | None:
        query = json.dumps({"name": [self.prefix]})
        request = (f"GET /containers/json?all=1&filters={_urlquote(query)} HTTP/1.0\r\n"
                   "Host: docker\r\n\r\n").encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(2.0)
                s.connect(path)
                s.sendall(request)
                chunks = []
                while True:
                    c = s.recv(65536)
                    if not c:
                        break
                    chunks.append(c)
        except OSError as exc:
            self.problems.note("containers", f"docker socket {path}: {why_failed(exc)}")
            return None
        head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0]
        if b" 200 " not in status + b" ":
            self.problems.note("containers", f"docker socket: {status.decode('latin-1')}")
            return None
        try:
            items = json.loads(body)
        except ValueError:
            self.problems.note("containers", "docker socket: unreadable answer")
            return None
        self.problems.clear("containers")
        out = []
        for c in items:
            name = self._keep(list(c.get("Names") or []))
            if name:
                out.append({"name": name, "id": str(c.get("Id", ""))[:12], "image": c.get("Image", ""),
                            "status": c.get("Status", "")})
        return out

    def _from_cli(self) -> list[dict[str, Any]] | None:
        argv = [self.cli or "docker", "ps", "-a", "--filter", f"name={self.prefix}", "--format", "{{json .}}"]
        try:
            res = subprocess.run(argv, capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.problems.note("containers", f"docker ps: {why_failed(exc)}")
            return None
        if res.returncode != 0:
            err = res.stderr.decode("utf-8", "replace").strip()[:200]
            self.problems.note("containers", f"docker ps: {err}")
            return None
        out = []
        for line in res.stdout.decode("utf-8", "replace").splitlines():
            try:
                c = json.loads(line)
            except ValueError:
                continue
            name = self._keep(str(c.get("Names", "")).split(","))
            if name:
                out.append({"name": name, "id": c.get("ID", ""), "image": c.get("Image", ""),
                            "status": c.get("Status", "")})
        return out


def _urlquote(text: str) -> str:
    safe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~"
    return "".join(ch if ch in safe else "".join(f"%{b:02X}" for b in ch.encode()) for ch in text)
