"""argv: one JSON object (the request); stdin: the telemetry probe's source, to EOF. Everything
``sparktui status`` asks of one node, in one round trip, each part at the same time (a thread each), so
the script takes as long as its slowest part (the probe's two samples, 0.5 s apart), not their sum.

Request keys (each optional but ``tag``):
- ``proc_root``: the node's /proc (host facts: uptime);
- ``tag``: our processes (``ours``), as ``tagged list`` finds them; ``list_first``: before any command
  starts (a command run in the engine's container carries the tag there, and would be listed as ours);
- ``commands``: {name: argv} run as they are (no shell), each bounded by ``timeout``; ``probe`` is given
  stdin's bytes. A word ``~`` or ``~/…`` is this node's home: a command run in the engine's container
  (``docker exec``) would otherwise see the container's $HOME, and nobody knew the node's before now;
- ``ray``: {"gcs": [host, port], "argv": argv}: when the GCS port answers, Ray's node table read from the
  GCS's gRPC API here (``gcs_grpc``: no ``import ray``), else — that failing — the Ray probe ``argv``;
- ``peers``: [[name, ip, port], …]: one reach round (``tcp.one_round``);
- ``log``: [path, limit]: the file's last ``limit`` bytes (``~`` expanded);
- ``timeout``: seconds for each command.

Prints one JSON object: ``host`` (hostname, kernel, uptime_seconds), ``home``, ``processes``,
``commands`` ({name: {rc, stdout, stderr, seconds}}; rc 124 timed out, 127 not found), ``ray`` (the
probe's result like a command's, or null when the GCS did not answer / was not asked), ``gcs_open``,
``reach``, ``log`` ({path, size, data} or null: data is the bytes decoded with surrogateescape, so the
ASCII-only JSON carries any byte back unchanged), ``seconds``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any, Callable

from sparktui.node.gcs_grpc import grpc_reading
from sparktui.node.ours import ours
from sparktui.node.tcp import one_round, port_open


def expand(word: str, home: str) -> str:
    if word == "~" or word.startswith("~/"):
        return home + word[1:]
    return word


def run(argv: list[str], stdin: bytes | None, timeout: float) -> dict[str, Any]:
    t0 = time.monotonic()
    try:
        res = subprocess.run(argv, input=stdin if stdin is not None else b"", capture_output=True,
                             timeout=timeout)
        rc, out, err = res.returncode, res.stdout, res.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = 124, e.stdout or b"", (e.stderr or b"") + f"timed out after {timeout:g} s".encode()
    except OSError as e:
        rc, out, err = 127, b"", f"{argv[0]}: {e}".encode()
    return {"rc": rc, "stdout": out.decode("utf-8", "replace"),
            "stderr": err.decode("utf-8", "replace")[-2000:], "seconds": round(time.monotonic() - t0, 3)}


def host(proc_root: str) -> dict[str, Any]:
    u = os.uname()
    try:
        with open(os.path.join(proc_root, "uptime")) as f:
            uptime: float | None = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        uptime = None
    return {"hostname": u.nodename, "kernel": u.release, "uptime_seconds": uptime}


def read_log(path: str, limit: int) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if limit:
                f.seek(max(0, size - limit))
            data = f.read()
    except OSError:
        return None
    return {"path": path, "size": size, "data": data.decode("utf-8", "surrogateescape")}


def main(argv: list[str]) -> None:
    t0 = time.monotonic()
    req = json.loads(argv[0])
    home = os.path.expanduser("~")
    timeout = float(req.get("timeout", 20))
    out: dict[str, Any] = {"home": home, "commands": {}, "ray": None, "gcs_open": None, "reach": None,
                           "log": None}
    jobs: list[Callable[[], None]] = []
    #: Held to write a result and to print: a part still running at the end must not change ``out``
    #: while it is encoded.
    lock = threading.Lock()

    def put(key: str, value: Any, name: str | None = None) -> None:
        with lock:
            if name is None:
                out[key] = value
            else:
                out[key][name] = value

    def command(name: str, words: list[str]) -> Callable[[], None]:
        def job() -> None:
            # stdin is read here, not before the other parts start: they need not wait for its bytes.
            given = sys.stdin.buffer.read() if name == "probe" else None
            put("commands", run([expand(w, home) for w in words], given, timeout), name)
        return job

    ray = req.get("ray")
    if ray:  # started first: the slowest part (``import ray``)
        def ray_job() -> None:
            host_, port = ray["gcs"][0], int(ray["gcs"][1])
            is_open = port_open(host_, port, 1.0)
            put("gcs_open", is_open)
            if not is_open:
                return
            t = time.monotonic()
            try:
                doc = grpc_reading(host_, port, 5.0)
            except Exception as e:  # any surprise: Ray is asked the usual way (the probe)
                answer = run([expand(w, home) for w in ray["argv"]], None, timeout)
                answer["stderr"] = f"gRPC: {type(e).__name__}: {e}\n" + answer["stderr"]
            else:
                line = "RAYPROBE " + json.dumps(doc, sort_keys=True) + "\n"
                answer = {"rc": 0, "stdout": line, "stderr": "", "seconds": round(time.monotonic() - t, 3)}
            put("ray", answer)
        jobs.append(ray_job)
    for name, words in req.get("commands", {}).items():
        jobs.append(command(name, words))
    peers = [(str(n), str(ip), int(port)) for n, ip, port in req.get("peers", [])]
    if peers:
        def reach_job() -> None:
            put("reach", one_round(peers, 1.0))
        jobs.append(reach_job)
    log = req.get("log")
    if log:
        def log_job() -> None:
            put("log", read_log(expand(log[0], home), int(log[1])))
        jobs.append(log_job)
    threads = [threading.Thread(target=job, daemon=True) for job in jobs]
    for t in threads:
        t.start()
    # Meanwhile, here: the cheap in-process parts.
    put("host", host(req.get("proc_root", "/proc")))
    put("processes", [{"pid": p, "cmdline": c[:400]} for p, c in sorted(ours(req["tag"]).items())])
    deadline = time.monotonic() + timeout + 5
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    with lock:
        out["seconds"] = round(time.monotonic() - t0, 3)
        text = json.dumps(out)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    # A part still running (past its bound) must not hold the answer back: daemon threads end with us,
    # their subprocesses were bounded by ``timeout`` already.
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
