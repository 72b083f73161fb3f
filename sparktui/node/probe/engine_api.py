"""The engine's API, read beside it on the head (the head's probe only)."""

from __future__ import annotations

import http.client
import threading
import time
from typing import Any

from sparktui.node.probe.problems import why_failed


def only_families(text: str, prefixes: tuple[str, ...]) -> str:
    """The lines of the Prometheus families whose names start with one of ``prefixes`` (their ``# HELP``
    and ``# TYPE`` lines included), ending in a newline.

    A full vLLM 0.33 scrape is ~650 lines, mostly histograms the serving panel never shows. The probe sends
    only the wanted families (13 KB of a 54 KB scrape), and the dashboard parses only them."""
    kept = []
    for line in text.splitlines():
        if line.startswith("#"):
            parts = line.split(None, 3)
            name = parts[2] if len(parts) > 2 and parts[1] in ("HELP", "TYPE") else ""
        else:
            name = line
        if name.startswith(prefixes):
            kept.append(line)
    kept.append("")
    return "\n".join(kept)


def has_vllm_stats(text: str) -> bool:
    """Whether a scrape holds vLLM's own stats (none when the server runs with ``--disable-log-stats``)."""
    return any(line.startswith("vllm:") for line in text.splitlines())


class EngineApiReader:
    """The engine's ``GET /health`` and, while healthy, ``GET /metrics``, read on the head beside it.

    Why here: the dashboard had made both requests every second through an SSH port forward, about a third
    of what a dashboard idle at ready cost, all day. Here they are two loopback requests on one kept-alive
    connection, and the reading rides on the sample the dashboard receives anyway.

    Why in a thread: a wedged server can take the whole ``timeout`` to answer, and the node's own readings
    (memory, GPU) must not wait for it; that is when they matter. ``kick()`` (after each sample is written)
    starts one reading; ``latest()`` is the last finished one, which the next sample carries. Its ``id``
    grows by one a reading, so the dashboard tells a new reading from one it has seen (the API slow)."""

    def __init__(self, port: int, families: tuple[str, ...], timeout: float, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = port
        self.families = families
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None
        self._id = 0
        self._latest: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._due = threading.Event()
        threading.Thread(target=self._run, name="engine-api", daemon=True).start()

    def kick(self) -> None:
        self._due.set()

    def latest(self) -> dict[str, Any] | None:
        with self._lock:
            return self._latest

    def _run(self) -> None:
        while True:
            self._due.wait()
            self._due.clear()
            reading = self.read()
            with self._lock:
                self._latest = reading

    def read(self) -> dict[str, Any]:
        """One reading: ``{"id", "mono", "health": {"status", "seconds", "error"}}``, and after a healthy
        answer either ``metrics`` (the wanted families' text) with ``stats``, or ``metrics_error``."""
        self._id += 1
        started = time.monotonic()
        status, _, error = self._get("/health")
        out: dict[str, Any] = {"id": self._id, "mono": round(started, 3),
                               "health": {"status": status, "seconds": round(time.monotonic() - started, 4),
                                          "error": error}}
        if status == 200:
            status, body, error = self._get("/metrics")
            if status == 200:
                text = body.decode("utf-8", "replace")
                out["metrics"] = only_families(text, self.families)
                out["stats"] = has_vllm_stats(text)
            else:
                out["metrics_error"] = error
        return out

    def _url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"

    def _get(self, path: str) -> tuple[int | None, bytes, str]:
        """``(status, body, error)``; ``status`` None when nothing answered. Never raises."""
        url = self._url(path)
        for attempt in (1, 2):
            reused = self._conn is not None
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                # No Accept header: vLLM <= 0.7 would switch /metrics to OpenMetrics for one.
                self._conn.request("GET", path)
                response = self._conn.getresponse()
                body = response.read()
            except (ConnectionResetError, BrokenPipeError, http.client.BadStatusLine) as exc:
                self._close()    # RemoteDisconnected is both of the first and the last
                if reused and attempt == 1:
                    continue     # the server closed the kept-alive connection: once more, on a new one
                return None, b"", f"connection dropped ({url}): {why_failed(exc)}"
            except TimeoutError:
                self._close()
                return None, b"", f"timed out after {self.timeout:g}s ({url})"
            except ConnectionRefusedError:
                self._close()
                return None, b"", f"connection refused ({url})"
            except (OSError, http.client.HTTPException) as exc:
                self._close()
                return None, b"", f"cannot connect ({url}): {why_failed(exc)}"
            if response.will_close:
                self._close()
            return response.status, body, "" if response.status == 200 else f"HTTP {response.status}"
        return None, b"", f"connection dropped ({url})"     # not reached: the second attempt returns

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
