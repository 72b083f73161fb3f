"""Reconnect and fail-fast timings on the test bed (root), over real SSH to real sshd.

1. **Node back → connected.** spark2's sshd is killed (or its cable cut) for ``--outage`` seconds, so the
   reconnect backoff has grown; then it returns. Measured from the moment sshd listens again (or the link
   is up) to:
   - *dashboard*: the real ``SshBackend`` posting ``NodeLinkChanged(spark2, connected)``;
   - *verb*: ``sparktui logs -f``'s follower (``LogFollower``, the same code) delivering the first byte
     written to the log after the node returned.
   Each with the TCP probe (now) and with the backoff alone (before: ``SSHTransport(probe=False)``), in the
   same run.
2. **Unreachable node said.** ``sparktui status|start|stop|logs --node spark2`` as a user runs them, with
   spark2's sshd down: seconds until the one line ``spark2 (…:22): connection refused — is sshd running?``
   appears, and until the command exits; the same verbs with every node up, in the same run, for scale.

    .venv/bin/python benchmarks/bench_reconnect.py [--outage 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sparktui.config import SparkConfig  # noqa: E402
from sparktui.domain.events import Event, NodeLinkChanged  # noqa: E402
from sparktui.remote.backend import SshBackend  # noqa: E402
from sparktui.remote.log_follower import LogFollower  # noqa: E402
from sparktui.remote.ssh import SSHTransport  # noqa: E402
from sparktui.remote.transport import LinkPhase, Transport  # noqa: E402
from tests.testbed import Testbed, unavailable_reason  # noqa: E402
from tests.testbed.bed import _port_open  # noqa: E402

FAULTS = ("sshd", "link")


def break_node(bed: Testbed, fault: str) -> None:
    if fault == "sshd":
        bed.kill_sshd("spark2")
    else:
        bed.link_down("spark2")


def mend_node(bed: Testbed, fault: str) -> float:
    """Put spark2 back; returns the monotonic time it is back (sshd listening / link up)."""
    if fault == "sshd":
        bed.start_sshd("spark2")
        while not _port_open(bed.ip("spark2")):
            time.sleep(0.01)
    else:
        bed.link_up("spark2")
    return time.monotonic()


async def wait_for(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def outage(bed: Testbed, fault: str, seconds: float, transport: Transport) -> float:
    """Break spark2, wait until the link is seen lost and ``seconds`` have passed, mend it."""
    await asyncio.to_thread(break_node, bed, fault)
    t0 = time.monotonic()
    # A cut cable is only noticed by keepalives (~8 s).
    await wait_for(lambda: transport.state.phase is not LinkPhase.CONNECTED, 60)
    await asyncio.sleep(max(0.0, seconds - (time.monotonic() - t0)))
    return await asyncio.to_thread(mend_node, bed, fault)


async def dashboard_reconnect(bed: Testbed, config: SparkConfig, fault: str, probe: bool,
                              seconds: float) -> float | None:
    transports: dict[str, Transport] = {n.name: SSHTransport(n, probe=probe) for n in config.nodes}
    await asyncio.gather(*(t.connect() for t in transports.values()))
    connected_at: list[float] = []

    def sink(event: Event) -> None:
        if isinstance(event, NodeLinkChanged) and event.node == "spark2" and event.phase == "connected":
            connected_at.append(time.monotonic())

    backend = SshBackend(config, transports=transports)
    task = asyncio.create_task(backend.run(sink))
    try:
        await asyncio.sleep(3.0)  # let discovery, probes and the log follower settle
        back = await outage(bed, fault, seconds, transports["spark2"])
        n = len(connected_at)
        if not await wait_for(lambda: len(connected_at) > n, 90):
            return None
        return connected_at[n] - back
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        await asyncio.gather(*(t.close() for t in transports.values()))


async def verb_reconnect(bed: Testbed, config: SparkConfig, fault: str, probe: bool,
                         seconds: float) -> float | None:
    """``logs -f``'s follower on spark2: first byte written after the node returned → delivered."""
    node = config.node("spark2")
    log = bed.host_tmp("spark2") / "bench-reconnect.log"
    log.write_bytes(b"before\n")
    transport = SSHTransport(node, probe=probe)
    await transport.connect()
    got = bytearray()
    follower = asyncio.create_task(
        LogFollower(transport, "/tmp/bench-reconnect.log", got.extend, python=(node.python,)).run())
    try:
        if not await wait_for(lambda: b"before" in got, 30):
            return None
        back = await outage(bed, fault, seconds, transport)
        with log.open("ab") as f:
            f.write(b"after\n")
        if not await wait_for(lambda: b"after" in got, 90):
            return None
        return time.monotonic() - back
    finally:
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await follower
        await transport.close()
        log.unlink(missing_ok=True)


def timed_verb(config: Path, argv: list[str], line: str) -> tuple[float | None, float, int]:
    """Run ``sparktui ARGV``; seconds until ``line`` appeared (stdout or stderr) and until it exited."""
    env = {k: v for k, v in os.environ.items() if k != "SPARKTUI_CONFIG"}
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "sparktui", "--config", str(config), *argv], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen: float | None = None
    assert proc.stdout is not None
    for raw in proc.stdout:
        if seen is None and line and line in raw.decode("utf-8", "replace"):
            seen = time.monotonic() - t0
    rc = proc.wait()
    return seen, time.monotonic() - t0, rc


def fmt(value: float | None) -> str:
    return "  n/a" if value is None else f"{value:5.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outage", type=float, default=20.0, help="seconds each node stays away")
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason:
        print(f"bench_reconnect: no test bed: {reason}", file=sys.stderr)
        return 1
    bed = Testbed(("spark1", "spark2")).up()
    try:
        config: SparkConfig = bed.spark_config()
        print(f"# node back → connected after a {args.outage:.0f} s outage (seconds; lower is better)")
        print(f"{'fault':<6} {'path':<10} {'probe (now)':>12} {'backoff only':>13} {'ratio':>6}")
        results: dict[str, Any] = {}
        for fault in FAULTS:
            for path, measure in (("dashboard", dashboard_reconnect), ("logs -f", verb_reconnect)):
                now = asyncio.run(measure(bed, config, fault, True, args.outage))
                before = asyncio.run(measure(bed, config, fault, False, args.outage))
                ratio = f"{before / now:5.1f}x" if now and before else "   n/a"
                results[(fault, path)] = (now, before)
                print(f"{fault:<6} {path:<10} {fmt(now):>12} {fmt(before):>13} {ratio:>6}", flush=True)

        print()
        print("# unreachable node said (spark2's sshd down): seconds to the line / to exit; all up: exit")
        line = f"spark2 ({bed.ip('spark2')}:22): connection refused — is sshd running?"
        verbs = (["status"], ["start"], ["stop"], ["logs", "--node", "spark2"])
        up = {" ".join(v): timed_verb(bed.config_path, v, "")[1] for v in verbs if v[0] in ("status", "stop")}
        bed.kill_sshd("spark2")
        print(f"{'verb':<22} {'line at':>8} {'exit at':>8} {'rc':>3} {'all up':>7}")
        for verb in verbs:
            seen, took, rc = timed_verb(bed.config_path, verb, line)
            name = " ".join(verb)
            print(f"{name:<22} {fmt(seen):>8} {fmt(took):>8} {rc:>3} {fmt(up.get(name)):>7}", flush=True)
        bed.start_sshd("spark2")
    finally:
        bed.teardown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
