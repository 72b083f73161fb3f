"""One sample: every reader's part in one JSON-ready dict (the format is said in ``__init__``)."""

from __future__ import annotations

import argparse
import os
import socket
import time
from typing import Any

from sparktui.node.probe.containers import Containers
from sparktui.node.probe.engine_api import EngineApiReader
from sparktui.node.probe.files import OpenFiles
from sparktui.node.probe.gpu import open_gpu
from sparktui.node.probe.host import memory_section, parse_cpu_times, parse_meminfo, parse_psi
from sparktui.node.probe.problems import Problems, why_failed
from sparktui.node.probe.processes import Processes
from sparktui.node.probe.rdma import Rdma

SCHEMA_VERSION = 1


class Probe:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.problems = Problems()
        self.files = OpenFiles(self.problems)
        self.proc = args.proc_root
        self.host = socket.gethostname()
        self.seq = 0
        info = self._meminfo()
        self.gpu = open_gpu(args.nvml_module, args.interval, self.problems, self.proc,
                            info.get("MemTotal") if info else None, args.proc_every)
        self.rdma = Rdma(self.files, args.sys_root, slow_every=args.errors_every)
        self.processes = Processes(self.proc, args.proc_every, self.problems)
        self.containers = Containers(args.name_prefix, args.docker_socket, args.docker_every, self.problems)
        self.containers.disabled = self.containers.disabled or args.no_containers
        self.cpu_prev = self._cpu_times()
        self.ncpu = os.cpu_count()
        self.engine_api = (None if args.engine_port is None else EngineApiReader(
            args.engine_port, tuple(f for f in args.engine_families.split(",") if f), args.engine_timeout))

    def _meminfo(self) -> dict[str, int] | None:
        raw = self.files.read(os.path.join(self.proc, "meminfo"), "memory")
        return None if raw is None else parse_meminfo(raw)

    def _cpu_times(self) -> tuple[int, int] | None:
        raw = self.files.read(os.path.join(self.proc, "stat"), "cpu.percent", 4096)
        return None if raw is None else parse_cpu_times(raw)

    def _psi(self) -> dict[str, Any] | None:
        raw = self.files.read(os.path.join(self.proc, "pressure", "memory"), "memory.pressure", 512)
        return None if raw is None else parse_psi(raw)

    def _cpu(self) -> dict[str, Any]:
        cur = self._cpu_times()
        percent = None
        if cur is not None and self.cpu_prev is not None and cur[1] > self.cpu_prev[1]:
            percent = round(100.0 * (cur[0] - self.cpu_prev[0]) / (cur[1] - self.cpu_prev[1]), 2)
        if cur is not None:
            self.cpu_prev = cur
        load = self.files.read(os.path.join(self.proc, "loadavg"), "cpu.load1", 256)
        load1 = None
        if load:
            try:
                load1 = float(load.split()[0])
            except (IndexError, ValueError):
                load1 = None
        return {"percent": percent, "count": self.ncpu, "load1": load1}

    def sample(self) -> dict[str, Any]:
        mono, wall = time.monotonic(), time.time()
        self.seq += 1
        out: dict[str, Any] = {"v": SCHEMA_VERSION, "seq": self.seq, "mono": mono, "wall": wall,
                               "host": self.host, "interval": self.args.interval}
        out["memory"] = memory_section(self._meminfo(), self._psi())
        out["cpu"] = self._cpu()
        try:
            out["gpu"] = self.gpu.sample()
        except Exception as exc:   # a GPU fault must not stop memory and RoCE readings
            self.problems.note("gpu", why_failed(exc))
            out["gpu"] = {"source": "none", "devices": [], "reason": why_failed(exc), "driver_version": None}
        devices = out["gpu"].get("devices") or []
        if devices and not any(d.get("memory_unified") for d in devices):
            # A discrete GPU (its own memory known): /proc/meminfo is the host's RAM, not a shared pool.
            out["memory"]["label"] = "host memory"
        out["rdma"] = self.rdma.sample()
        out["processes"] = self.processes.sample()
        out["containers"] = self.containers.sample()
        t = os.times()
        out["probe"] = {"pid": os.getpid(), "cpu_s": round(t[0] + t[1], 4)}
        if self.engine_api is not None:
            out["engine_api"] = self.engine_api.latest()
        out["problems"], resolved = self.problems.drain()
        if resolved:
            out["resolved"] = resolved
        return out

    def close(self) -> None:
        self.gpu.close()
