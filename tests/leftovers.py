"""What of ours runs on the test hosts, seen from outside sparktui (each host's own PID namespace, containers
included), and the sparktui process a test kills: shared by the docker and the host-runtime test beds."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

from tests.cli_helpers import REPO
from tests.testbed import Testbed

#: What of ours may run on a host: Ray, the stand-in, and sparktui's node-side helpers (their script texts
#: are in their command lines: the Ray probe prints RAYPROBE, the follower frames).
OURS = re.compile(r"raylet|gcs_server|ray::|vllm_standin|ray/_private|ray/dashboard|ray/autoscaler|"
                  r"ray\.util\.client|RAYPROBE|def frame\(|sparktui-(detach|stop|state)|docker exec")
#: sparktui's node-side helpers (not the engine): they must end with the channel that started them.
HELPERS = re.compile(r"RAYPROBE|def frame\(|sparktui-(stop|state)|docker exec")


def processes(bed: Testbed, name: str) -> list[str]:
    """Ray / vLLM / sparktui helper processes on a host (containers included), seen from outside."""
    out = bed.exec(name, ["ps", "-ww", "-eo", "pid=,args="]).stdout
    return [line.strip() for line in out.splitlines() if OURS.search(line)]


def helpers_left(bed: Testbed, within: float = 10.0) -> list[str]:
    """The helper processes still there after ``within`` s (on every host, containers included)."""
    deadline = time.monotonic() + within
    while True:
        left = [f"{n}: {line[:160]}" for n in bed.names for line in processes(bed, n) if HELPERS.search(line)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def spawn_sparktui(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "sparktui", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def read_until(proc: subprocess.Popen[str], needle: str, timeout: float) -> str:
    """The process's output up to the first line containing ``needle`` (fails after ``timeout``)."""
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return "".join(seen)
    raise AssertionError(f"no {needle!r} in {timeout:.0f} s:\n{''.join(seen)}")


def sigkill_after(args: Sequence[str], *waits: tuple[str, float]) -> None:
    """Run ``sparktui ARGS``, read its output up to each ``(needle, timeout)`` in turn, then SIGKILL it
    (a killed sparktui cannot say goodbye: what it started on the nodes must end by itself)."""
    proc = spawn_sparktui(*args)
    try:
        for needle, timeout in waits:
            read_until(proc, needle, timeout)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
