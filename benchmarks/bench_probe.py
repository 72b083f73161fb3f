"""What the telemetry probe costs the node, next to the naive way, and how fresh its samples arrive.

Measured in one run, on the test bed when run as root (real sshd in a network/PID namespace; else on
this machine through LocalTransport):

1. The streaming probe (``sparktui/probe.py`` over one SSH channel): CPU per sample from
   ``/proc/<pid>/stat`` (utime+stime+cutime+cstime, 10 ms ticks, so many samples) and from
   ``/proc/<pid>/schedstat`` (ns), over the samples after the first; % of one core at 1 Hz.
   The node reads its real /proc and the two-Spark fixture /sys (4 RDMA devices, 51 counters each);
   NVML is the GB10 test double (pure Python calls; real NVML calls go into the driver).
2. The naive way: a new SSH command per tick that cats /proc/meminfo, /proc/stat, PSI and every RoCE
   counter file, then runs a GPU query (``nvidia-smi --query-gpu``; a Python stand-in that prints the
   same CSV when the node has no nvidia-smi). Its node CPU is what the connection's sshd session and
   every process it forks used (the children are reaped into the session's cutime/cstime).
3. End-to-end latency node → controller: controller wall clock at arrival − the sample's ``wall``
   (both hosts share this kernel's clock), p50/p95.

    .venv/bin/python benchmarks/bench_probe.py [--samples 200] [--interval 0.1] [--naive-ticks 40]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sparktui.config import NodeConfig  # noqa: E402
from sparktui.remote.probe_runner import stream_samples  # noqa: E402
from sparktui.remote.transport import LocalTransport, Transport  # noqa: E402
from tests.fixtures.telemetry import sparks  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
GPU_QUERY = ["nvidia-smi", "--query-gpu=index,name,utilization.gpu,temperature.gpu,power.draw,clocks.sm,"
             "memory.total,memory.used,memory.free", "--format=csv,noheader,nounits"]
#: The naive tick: cat everything, then the GPU query. Constant script, paths as arguments.
NAIVE_SCRIPT = (
    'p="$1"; s="$2"; shift 2; '
    'cat "$p/meminfo" "$p/stat" "$p/pressure/memory" '
    '"$s"/class/infiniband/*/ports/*/state "$s"/class/infiniband/*/ports/*/phys_state '
    '"$s"/class/infiniband/*/ports/*/rate "$s"/class/infiniband/*/ports/*/counters/* '
    '"$s"/class/infiniband/*/ports/*/hw_counters/*; "$@"'
)
SMI_STANDIN = """#!{python}
# Stand-in for nvidia-smi --query-gpu on a node without a GPU: loads an NVML module and prints one CSV row.
import sys
sys.path.insert(0, {nvml_dir!r})
import gb10_pynvml as nv
nv.nvmlInit()
h = nv.nvmlDeviceGetHandleByIndex(0)
u = nv.nvmlDeviceGetUtilizationRates(h)
print(f"0, {{nv.nvmlDeviceGetName(h)}}, {{u.gpu}}, {{nv.nvmlDeviceGetTemperature(h, 0)}}, "
      f"{{nv.nvmlDeviceGetPowerUsage(h) / 1000:.2f}}, {{nv.nvmlDeviceGetClockInfo(h, 1)}}, "
      "[N/A], [N/A], [N/A]")
"""


def cpu_stat(pid: int) -> tuple[float, float]:
    """(seconds from /proc/<pid>/stat incl. reaped children, seconds from schedstat of the process)."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    ticks = sum(int(v) for v in rest[11:15])          # utime stime cutime cstime
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            ns = int(f.read().split()[0])
    except OSError:
        ns = 0
    return ticks / TICK, ns / 1e9


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


class Node:
    """Where the benchmark runs: a test-bed host over SSH, or this machine."""

    def __init__(self) -> None:
        self.bed: Any = None
        self.name = "local"
        self.work: Path = Path(tempfile.mkdtemp(prefix="bench-probe-"))
        self.remote_work = str(self.work)

    def start(self) -> None:
        from tests.testbed import Testbed, unavailable_reason

        reason = unavailable_reason()
        if reason:
            print(f"test bed unavailable ({reason}); measuring on this machine via LocalTransport")
            return
        self.bed = Testbed(("spark1",)).up()
        self.name = "spark1"
        run = f"bench-probe-{uuid.uuid4().hex[:8]}"
        shutil.rmtree(self.work)
        self.work = self.bed.host_tmp("spark1") / run
        self.work.mkdir()
        self.remote_work = f"/tmp/{run}"

    def stop(self) -> None:
        if self.bed is not None:
            self.bed.teardown()
        else:
            shutil.rmtree(self.work, ignore_errors=True)

    def node(self) -> NodeConfig:
        if self.bed is None:
            return NodeConfig(name="local", host="localhost", local=True, python=sys.executable,
                              proc_root="/proc", sys_root=f"{self.remote_work}/spark-a/sys")
        return self.bed.spark_config().node("spark1").model_copy(
            update={"sys_root": f"{self.remote_work}/spark-a/sys"})

    async def transport(self) -> Transport:
        if self.bed is None:
            t: Transport = LocalTransport("local")
        else:
            from sparktui.remote.ssh import SSHTransport

            t = SSHTransport(self.node())
        await t.connect()
        await t.wait_connected(20)
        return t

    def probe_pid(self, reported: int) -> int:
        """The probe's PID as this (root) namespace sees it."""
        if self.bed is None:
            return reported
        from tests.testbed.bed import _cmdline

        pids = [p for p in self.bed.pids(self.name) if any("sparktui-probe" in w for w in _cmdline(p))]
        if len(pids) != 1:
            raise RuntimeError(f"expected one probe on {self.name}, found {pids}")
        return pids[0]

    def session_pids(self) -> set[int]:
        if self.bed is None:
            return set()
        return set(self.bed._sshd_pids(self.name)[1])

    async def new_sessions(self, before: set[int]) -> set[int]:
        """The sshd processes serving a connection just opened (pre-auth helpers come and go: settle)."""
        await asyncio.sleep(0.5)
        return self.session_pids() - before


def sessions_cpu(pids: set[int]) -> float:
    """CPU seconds of the connection's sshd processes, children they reaped included."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += cpu_stat(pid)[0]
    return total


async def measure_probe(node: Node, samples: int, interval: float, env: dict[str, str]) -> dict[str, Any]:
    before = node.session_pids()
    transport = await node.transport()
    sessions = await node.new_sessions(before)
    s0 = s1 = 0.0
    gen = stream_samples(transport, node.node(), interval, env=env)
    latencies: list[float] = []
    start: tuple[float, float] | None = None
    pid = 0
    first_cpu = 0.0
    n = 0
    try:
        async for s in gen:
            arrived = time.time()
            n += 1
            if n == 1:
                # Steady state only: the first sample carries start-up (compile, NVML init, discovery).
                pid = node.probe_pid(s.probe_pid or 0)
                start = cpu_stat(pid)
                s0 = sessions_cpu(sessions)
                first_cpu = start[0]
                continue
            latencies.append((arrived - s.wall) * 1000)
            if n > samples:
                end = cpu_stat(pid)
                s1 = sessions_cpu(sessions)
                break
    finally:
        await gen.aclose()
        await transport.close()
    assert start is not None
    count = n - 1
    stat_ms = (end[0] - start[0]) / count * 1000
    sched_ms = (end[1] - start[1]) / count * 1000
    return {"samples": count, "stat_ms": stat_ms, "sched_ms": sched_ms, "startup_s": first_cpu,
            "sshd_ms": (s1 - s0) / count * 1000 if sessions else None,
            "p50_ms": statistics.median(latencies), "p95_ms": pct(latencies, 0.95),
            "max_ms": max(latencies)}


async def measure_naive(
    node: Node, ticks: int, interval: float, gpu: bool, env: dict[str, str]
) -> dict[str, Any]:
    before = node.session_pids()
    transport = await node.transport()
    argv_gpu = list(GPU_QUERY) if gpu else []
    argv = ["sh", "-c", NAIVE_SCRIPT, "sh", "/proc", f"{node.remote_work}/spark-a/sys", *argv_gpu]
    latencies: list[float] = []
    try:
        await transport.run(["true"])
        sessions = await node.new_sessions(before)
        usage: Callable[[], float] = (lambda: sessions_cpu(sessions)) if sessions else _children_cpu
        c0 = usage()
        next_at = time.monotonic()
        for _ in range(ticks):
            t0 = time.monotonic()
            res = await transport.run(argv, env=env, timeout=30)
            latencies.append((time.monotonic() - t0) * 1000)
            if res.returncode != 0:
                raise RuntimeError(f"naive tick failed: {res.stderr.strip()[:300]}")
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        c1 = usage()
    finally:
        await transport.close()
    return {"ticks": ticks, "ms": (c1 - c0) / ticks * 1000, "p50_ms": statistics.median(latencies),
            "p95_ms": pct(latencies, 0.95)}


def _children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


async def main_async(args: argparse.Namespace) -> None:
    node = Node()
    node.start()
    try:
        sparks.copy_spark("spark-a", node.work)
        probe_env = {"PYTHONPATH": str(sparks.NVML_DIR), "SPARKTUI_PROBE_NVML_MODULE": sparks.NVML_MODULE}
        naive_env: dict[str, str] = {}
        if shutil.which("nvidia-smi") is None or node.bed is not None:
            bindir = node.work / "bin"
            bindir.mkdir()
            smi = bindir / "nvidia-smi"
            smi.write_text(SMI_STANDIN.format(python=sys.executable, nvml_dir=str(sparks.NVML_DIR)))
            smi.chmod(0o755)
            naive_env["PATH"] = f"{node.remote_work}/bin:/usr/local/bin:/usr/bin:/bin"
        print(f"node: {node.name}; interval {args.interval} s; probe samples {args.samples}; "
              f"naive ticks {args.naive_ticks}; clock tick {1000 / TICK:.0f} ms")
        p = await measure_probe(node, args.samples, args.interval, probe_env)
        cat = await measure_naive(node, args.naive_ticks, args.interval, False, naive_env)
        full = await measure_naive(node, args.naive_ticks, args.interval, True, naive_env)
    finally:
        node.stop()
    per = p["stat_ms"]
    print(f"probe:  {per:.3f} ms CPU per sample from /proc/<pid>/stat "
          f"({p['sched_ms']:.3f} ms from schedstat) over {p['samples']} samples "
          f"= {per / 10:.3f} % of one core at 1 Hz; start-up {p['startup_s'] * 1000:.0f} ms once")
    if p["sshd_ms"] is not None:
        print(f"        its sshd channel (encrypting the lines): {p['sshd_ms']:.3f} ms per sample")
    print(f"        latency node -> controller p50 {p['p50_ms']:.1f} ms, p95 {p['p95_ms']:.1f} ms, "
          f"max {p['max_ms']:.1f} ms")
    print(f"naive (new SSH command per tick, cat only):        {cat['ms']:.1f} ms CPU per tick, "
          f"round trip p50 {cat['p50_ms']:.1f} ms p95 {cat['p95_ms']:.1f} ms")
    print(f"naive (new SSH command per tick, cat + GPU query): {full['ms']:.1f} ms CPU per tick, "
          f"round trip p50 {full['p50_ms']:.1f} ms p95 {full['p95_ms']:.1f} ms")
    best = max(per, p["sched_ms"], 1e-6)
    with_sshd = best + (p["sshd_ms"] or 0.0)
    print(f"ratio: probe is {full['ms'] / best:.0f}x cheaper than the naive way "
          f"({cat['ms'] / best:.0f}x than cat alone; {full['ms'] / with_sshd:.0f}x counting its sshd "
          f"channel, as the naive figure counts sshd)")
    goals = [("<= 1 ms CPU per sample", best <= 1.0), (">= 20x cheaper than naive", full["ms"] / best >= 20),
             ("p95 latency <= 100 ms", p["p95_ms"] <= 100)]
    print("goals: " + "; ".join(f"{g}: {'met' if ok else 'MISSED'}" for g, ok in goals))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=200, help="probe samples measured (>= 60)")
    ap.add_argument("--interval", type=float, default=0.1, help="seconds between samples/ticks")
    ap.add_argument("--naive-ticks", type=int, default=40)
    args = ap.parse_args()
    if args.samples < 60:
        ap.error("--samples must be >= 60")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
