"""The dashboard's own CPU and memory, idle at ready and while a start streams, read from
``/proc/<pid>/stat`` (utime + stime) and ``/proc/<pid>/status`` (VmRSS) of a real dashboard process
drawing into a pseudo-terminal (160×50) whose output this process reads and throws away.

``--demo`` (default): `sparktui --demo`; the start streams for its first ~60 s, then it is ready and
serving. The previous way runs in the same run (``baselines.poll_always``: a 20 Hz drain and every panel
re-rendered each second whether anything arrived or not).

``--testbed``: the SSH backend on the test bed (root; two hosts, real Ray, the stand-in engine started
first and ready), idle; with ``--start SECONDS`` also while the dashboard's own start (the `s` key) streams,
the stand-in's start-up paced over SECONDS.

    .venv/bin/python benchmarks/bench_idle.py [--demo | --testbed [--start 40] [--refresh 2]] [--idle 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
import time
from fcntl import ioctl
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TICKS = os.sysconf("SC_CLK_TCK")
#: The child: the real CLI, with the previous way switched on when asked.
CHILD = ("import sys; sys.path.insert(0, 'benchmarks'); from sparktui.ui.app import SparkApp; "
         "from baselines import poll_always; sys.argv[1] == 'poll' and poll_always(SparkApp); "
         "from sparktui.cli import main; sys.exit(main(sys.argv[2:]))")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS   # utime, stime (fields 14 and 15)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def loadavg() -> str:
    return "load " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


class Dashboard:
    """A dashboard process on a pseudo-terminal; its screen output is read and dropped."""

    def __init__(self, args: list[str], poll: bool, env: dict[str, str] | None = None) -> None:
        master, slave = pty.openpty()
        ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, "poll" if poll else "event", *args], stdin=slave, stdout=slave,
            stderr=slave, cwd=REPO, env={**os.environ, "TERM": "xterm-256color", **(env or {})},
            start_new_session=True)
        os.close(slave)
        self.master = master
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        try:
            while os.read(self.master, 65536):
                pass
        except OSError:
            pass

    def window(self, seconds: float) -> tuple[float, float]:
        """CPU (% of one core) and RSS (MB) over the next ``seconds``."""
        pid = self.proc.pid
        c0, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(seconds)
        c1, t1 = cpu_seconds(pid), time.monotonic()
        return 100 * (c1 - c0) / (t1 - t0), rss_mb(pid)

    def close(self) -> None:
        os.write(self.master, b"q")
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


def demo(idle: float) -> None:
    print(f"Dashboard CPU (% of one core) and RSS, `sparktui --demo` on a 160×50 pty, {loadavg()}")
    for poll in (False, True):
        d = Dashboard(["--demo"], poll)
        try:
            time.sleep(8)   # imports and the first frames
            start_cpu, start_rss = d.window(40)   # the start streams (preflight, weights, graphs)
            time.sleep(25)   # past ready (~60 s), into serving
            idle_cpu, idle_rss = d.window(idle)
        finally:
            d.close()
        way = "previous (20 Hz poll)" if poll else "sparktui (event-driven)"
        print(f"  {way:24}: start streaming {start_cpu:5.1f} % {start_rss:5.0f} MB;"
              f"   ready {idle_cpu:5.1f} % {idle_rss:5.0f} MB   {loadavg()}", flush=True)


def testbed(idle: float, start: float = 0.0, refresh: float | None = None) -> int:
    from sparktui.remote.cluster import close_cluster, open_cluster
    from sparktui.remote.engine import EngineController
    from sparktui.remote.engine_wait import wait_until_ready
    from tests.lifecycle_helpers import lifecycle_overrides, make_model_dirs
    from tests.testbed import Testbed, unavailable_reason

    reason = unavailable_reason()
    if reason:
        print(f"bench_idle: needs the test bed: {reason}", file=sys.stderr)
        return 2
    with Testbed(("spark1", "spark2")) as bed:
        make_model_dirs(bed)
        overrides = lifecycle_overrides(bed, pace=1.0)
        overrides["engine"]["ray_wait_timeout"] = 120.0
        if refresh is not None:   # the telemetry rate: the probe's samples, and so the panels' repaints
            overrides["ui"] = {"refresh_interval": refresh}
        path = bed.write_config(**overrides)
        config = bed.spark_config(**overrides)

        async def up() -> None:
            transports = await open_cluster(config)
            controller = EngineController(config, transports)
            try:
                view = await controller.start(preflight=False)
                if not view.ok or (await wait_until_ready(controller, timeout=180)).outcome != "ready":
                    raise SystemExit(f"engine not ready: {view.message}")
            finally:
                await close_cluster(transports)

        async def down() -> None:
            transports = await open_cluster(config)
            try:
                await EngineController(config, transports).stop()
            finally:
                await close_cluster(transports)

        asyncio.run(up())
        rate = f", ui.refresh_interval = {refresh:g} s" if refresh is not None else ""
        print(f"Dashboard CPU and RSS, SSH backend on the test bed (2 hosts, engine ready{rate}), "
              f"{loadavg()}")
        try:
            for poll in (False, True):
                d = Dashboard(["--config", str(path)], poll)
                try:
                    time.sleep(15)   # connect, re-attach, read the log, first samples
                    cpu, rss = d.window(idle)
                finally:
                    d.close()
                way = "previous (20 Hz poll)" if poll else "sparktui (event-driven)"
                print(f"  {way:24}: ready {cpu:5.1f} % {rss:5.0f} MB   {loadavg()}", flush=True)
        finally:
            asyncio.run(down())
        if start:
            # The dashboard's own start (`s`), a stand-in replaying its recorded start-up over ~start s:
            # the window covers preflight, Ray, and the log streaming through the stages.
            slow = lifecycle_overrides(bed, pace=start)
            slow["engine"]["ray_wait_timeout"] = 120.0
            slow_path = bed.write_config(**slow)
            print(f"Dashboard CPU and RSS while its own start streams (`s`; start-up over ~{start:.0f} s)")
            for poll in (False, True):
                d = Dashboard(["--config", str(slow_path)], poll)
                try:
                    time.sleep(12)   # connect, nothing running
                    os.write(d.master, b"s")
                    time.sleep(2)
                    cpu, rss = d.window(start * 0.75)
                finally:
                    d.close()
                    asyncio.run(down())
                way = "previous (20 Hz poll)" if poll else "sparktui (event-driven)"
                print(f"  {way:24}: start streaming {cpu:5.1f} % {rss:5.0f} MB   {loadavg()}", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--testbed", action="store_true", help="the SSH backend on the test bed (root)")
    parser.add_argument("--demo", action="store_true", help="the demo (the default)")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds of the idle window")
    parser.add_argument("--start", type=float, default=0.0, metavar="SECONDS",
                        help="(--testbed) also measure the dashboard's own start, the stand-in's start-up "
                        "paced over SECONDS (e.g. 40)")
    parser.add_argument("--refresh", type=float, metavar="SECONDS",
                        help="(--testbed) the config's ui.refresh_interval (default 1 s)")
    args = parser.parse_args()
    if args.testbed:
        return testbed(args.idle, args.start, args.refresh)
    demo(args.idle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
