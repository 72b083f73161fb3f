#!/usr/bin/env python3
"""sparktui node probe: one JSON object per interval on stdout, until its channel closes.

Runs on a DGX Spark (or any Linux node) with nothing but the Python standard library; ``pynvml``
(package ``nvidia-ml-py``) is used when the node has it. It imports nothing of sparktui, because the
controller ships this file's text to the node (see ``sparktui/remote/probe_runner.py``).

Cost on the node is kept low on purpose: it runs next to a serving model.
- No process is spawned per sample. /proc and /sys files stay open and are re-read with ``os.pread``
  at offset 0 (procfs/sysfs regenerate the text on a read at offset 0).
- The process list is rescanned every ``--proc-every`` seconds and only new PIDs' cmdlines are read.
- Containers come from the Docker socket every ``--docker-every`` seconds (the ``docker`` CLI only
  when the socket is not reachable, and then at most once a minute).
- Without NVML, ``nvidia-smi`` is started ONCE in its loop mode (``-lms``) and its lines are read as
  they come, instead of one ``nvidia-smi`` per sample.

Exit: with ``--until-stdin-closes`` (how sparktui starts it) the probe exits as soon as stdin reaches
EOF, i.e. when the SSH channel (or local pipe) that started it closes; a write to a closed stdout also
ends it, and on Linux it asks for SIGTERM when its parent dies. ``--count N`` stops after N samples.

Sample (``"v": 1``): ``seq``, ``mono`` (node monotonic s), ``wall`` (Unix s), ``host``, ``interval``,
``memory`` (unified memory, bytes), ``cpu``, ``gpu`` (NVML: also memory clock, max clocks, the raw
clock-event reason mask ``clock_event_reasons``, ``xid_errors`` from an Xid event set), ``rdma`` (raw
sysfs counters; data counters are octets/4 — the controller multiplies by 4), ``processes``,
``containers``, ``probe`` (own pid and CPU seconds), ``problems`` (path → reason for values that are
``null``; each said once), ``resolved`` (paths that read again; only when there are some), and with
``--engine-port`` (the head's probe) ``engine_api``: the engine's ``/health`` and the wanted families of
its ``/metrics`` as last read beside it (see ``EngineApiReader``).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import http.client
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

SCHEMA_VERSION = 1
UNIFIED_LABEL = "unified memory"

# Ray and vLLM processes as they show on a node (``ray::`` is the proctitle of Ray workers and actors).
RAY_DAEMONS = ("raylet", "gcs_server")


# ---- problems: a value that cannot be read is null, and its reason is said once ---------------------
class Problems:
    """Reasons for values that are null, each said once; a value that reads again is said resolved once."""

    def __init__(self) -> None:
        self.said: dict[str, str] = {}
        self._new: dict[str, str] = {}
        self._resolved: set[str] = set()

    def note(self, path: str, reason: str) -> None:
        if self.said.get(path) != reason:
            self.said[path] = reason
            self._new[path] = reason
            self._resolved.discard(path)

    def clear(self, path: str) -> None:
        if path in self.said:
            del self.said[path]
            self._new.pop(path, None)
            self._resolved.add(path)

    def drain(self) -> tuple[dict[str, str], list[str]]:
        out, self._new = self._new, {}
        resolved, self._resolved = sorted(self._resolved), set()
        return out, resolved


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno is not None:
        return f"{errno.errorcode.get(exc.errno, exc.errno)}: {exc.strerror}"
    return f"{type(exc).__name__}: {exc}"


class OpenFiles:
    """Files kept open and re-read from offset 0 (one ``pread`` per read, no open/close per sample)."""

    def __init__(self, problems: Problems) -> None:
        self._fds: dict[str, int] = {}
        self.problems = problems

    def read(self, path: str, key: str | None = None, size: int = 65536) -> bytes | None:
        fd = self._fds.get(path)
        try:
            if fd is None:
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                self._fds[path] = fd
            data = os.pread(fd, size, 0)
        except OSError as exc:
            if fd is not None:
                # The device may have gone (driver reload): reopen next time.
                self._drop(path)
            self.problems.note(key or path, _reason(exc))
            return None
        if (key or path) in self.problems.said:
            self.problems.clear(key or path)
        return data

    def _drop(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def drop_under(self, prefix: str) -> None:
        for path in [p for p in self._fds if p.startswith(prefix)]:
            self._drop(path)


def read_once(path: str, size: int = 65536) -> bytes | None:
    """Open, read, close: for files read rarely (per new PID, at discovery)."""
    try:
        with open(path, "rb", buffering=0) as f:
            return f.read(size)
    except OSError:
        return None


# ---- memory and CPU --------------------------------------------------------------------------------
_MEMINFO_KEYS = ("MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "SwapTotal", "SwapFree",
                 "HugePages_Total", "HugePages_Free", "Hugepagesize")
_MEMINFO_LINE = re.compile(rb"^(" + "|".join(_MEMINFO_KEYS).encode() + rb"):\s+(\d+)( kB)?", re.M)


def parse_meminfo(data: bytes) -> dict[str, int]:
    """The ``/proc/meminfo`` lines we use, in bytes (``kB`` × 1024; HugePages_* are page counts)."""
    return {key.decode(): int(value) * (1024 if unit else 1)
            for key, value, unit in _MEMINFO_LINE.findall(data)}


def memory_section(info: dict[str, int] | None, psi: dict[str, Any] | None) -> dict[str, Any]:
    mem: dict[str, Any] = {"label": UNIFIED_LABEL}
    if info is None:
        mem.update(total=None, used=None, available=None, free=None, cached=None, buffers=None,
                   swap_total=None, swap_used=None, basis="memavailable")
        return mem
    total = info.get("MemTotal")
    available = info.get("MemAvailable")
    hp_total = info.get("HugePages_Total", 0)
    hp_free = info.get("HugePages_Free")
    hp_size = info.get("Hugepagesize")
    swap_total = info.get("SwapTotal")
    swap_free = info.get("SwapFree")
    swap_used = None if swap_total is None or swap_free is None else swap_total - swap_free
    basis = "memavailable"
    if hp_total and hp_free is not None and hp_size:
        # With HugePages reserved, MemAvailable misleads on Spark; NVIDIA's advice: free = HugePages_Free ×
        # Hugepagesize, and swap reported as 0.
        basis = "hugepages"
        available = hp_free * hp_size
        swap_total, swap_used = 0, 0
    used = None if total is None or available is None else total - available
    mem.update(
        total=total, used=used, available=available, free=info.get("MemFree"), cached=info.get("Cached"),
        buffers=info.get("Buffers"), swap_total=swap_total, swap_used=swap_used, basis=basis,
        hugepages_total=hp_total, hugepages_free=hp_free, hugepage_size=hp_size,
    )
    mem["pressure"] = psi
    return mem


def parse_psi(data: bytes) -> dict[str, Any]:
    """``/proc/pressure/memory``: ``some avg10=0.00 avg60=0.00 avg300=0.00 total=0`` (+ ``full``)."""
    out: dict[str, Any] = {}
    for line in data.decode("ascii", "replace").splitlines():
        words = line.split()
        if not words:
            continue
        kind = words[0]
        for word in words[1:]:
            name, _, value = word.partition("=")
            try:
                if name == "total":
                    out[f"{kind}_total_us"] = int(value)
                else:
                    out[f"{kind}_{name}"] = float(value)
            except ValueError:
                continue
    return out


def parse_cpu_times(data: bytes) -> tuple[int, int] | None:
    """First line of ``/proc/stat`` → (busy, total) jiffies."""
    first = data.split(b"\n", 1)[0].split()
    if not first or first[0] != b"cpu":
        return None
    vals = [int(v) for v in first[1:9]]   # user nice system idle iowait irq softirq steal
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    total = sum(vals)
    return total - idle, total


# ---- GPU: NVML ---------------------------------------------------------------------------------------
class NvmlGpu:
    """GPU readings through NVML. A call that raises Not Supported is not called again (GB10 memory)."""

    def __init__(self, nv: Any, problems: Problems, proc_root: str, host_mem_total: int | None,
                 proc_every: float = 5.0) -> None:
        self.nv = nv
        self.proc_every = proc_every
        self.procs_cache: dict[int, tuple[float, list[dict[str, Any]] | None]] = {}
        self.problems = problems
        self.proc_root = proc_root
        self.host_mem_total = host_mem_total
        self.unsupported: dict[str, str] = {}
        self.names: dict[int, str] = {}     # pid → comm, read once per PID
        nv.nvmlInit()
        self.driver = self._call("gpu.driver_version", nv.nvmlSystemGetDriverVersion)
        count = nv.nvmlDeviceGetCount()
        self.handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        self.static = [
            {
                "index": i,
                "name": _text(self._call(f"gpu[{i}].name", nv.nvmlDeviceGetName, h)),
                "uuid": _text(self._call(f"gpu[{i}].uuid", nv.nvmlDeviceGetUUID, h)),
            }
            for i, h in enumerate(self.handles)
        ]
        self.max_clocks: dict[int, dict[str, Any]] = {}
        #: Xid critical errors NVML reported since the probe started (last 8 per GPU).
        self.xids: dict[int, list[dict[str, Any]]] = {}
        self.xid_events = self._open_xid_events()

    def _not_supported(self, exc: BaseException) -> bool:
        code = getattr(self.nv, "NVML_ERROR_NOT_SUPPORTED", 3)
        return getattr(exc, "value", None) == code or type(exc).__name__ == "NVMLError_NotSupported"

    def _call(self, key: str, fn: Any, *args: Any) -> Any:
        if key in self.unsupported:
            return None
        try:
            value = fn(*args)
        except Exception as exc:
            if self._not_supported(exc):
                reason = f"NVML: Not Supported ({getattr(fn, '__name__', 'call')})"
                self.unsupported[key] = reason
            else:
                reason = f"NVML: {exc} ({getattr(fn, '__name__', 'call')})"
            self.problems.note(key, reason)
            return None
        self.problems.clear(key)
        return value

    def sample(self) -> dict[str, Any]:
        nv = self.nv
        devices = []
        for i, h in enumerate(self.handles):
            d: dict[str, Any] = dict(self.static[i])
            util = self._call(f"gpu[{i}].util_percent", nv.nvmlDeviceGetUtilizationRates, h)
            d["util_percent"] = None if util is None else float(util.gpu)
            temp = self._call(f"gpu[{i}].temperature_c", nv.nvmlDeviceGetTemperature, h,
                              getattr(nv, "NVML_TEMPERATURE_GPU", 0))
            d["temperature_c"] = None if temp is None else float(temp)
            power = self._call(f"gpu[{i}].power_w", nv.nvmlDeviceGetPowerUsage, h)
            d["power_w"] = None if power is None else power / 1000.0   # NVML gives milliwatts
            clock = self._call(f"gpu[{i}].sm_clock_mhz", nv.nvmlDeviceGetClockInfo, h,
                               getattr(nv, "NVML_CLOCK_SM", 1))
            d["sm_clock_mhz"] = None if clock is None else float(clock)
            self._clocks(i, h, d)
            self._memory(i, h, d, util)
            d["processes"] = self._processes(i, h)
            devices.append(d)
        return {"source": "nvml", "devices": devices, "reason": None, "driver_version": _text(self.driver)}

    def _clocks(self, i: int, h: Any, d: dict[str, Any]) -> None:
        """Memory clock, maximum clocks (read once) and the clock-event (throttle) reason bitmask.

        The mask is sent raw (``nvmlClocksEventReason*`` bits); the controller names the bits
        (``sparktui.domain.telemetry.CLOCK_EVENT_BITS``). ``nvmlDeviceGetCurrentClocksEventReasons``
        is the name since driver 535; older pynvml only has ``…ThrottleReasons`` (same bits)."""
        nv = self.nv
        mem = self._call(f"gpu[{i}].mem_clock_mhz", nv.nvmlDeviceGetClockInfo, h,
                         getattr(nv, "NVML_CLOCK_MEM", 2))
        d["mem_clock_mhz"] = None if mem is None else float(mem)
        if i not in self.max_clocks:
            self.max_clocks[i] = {
                name: self._call(f"gpu[{i}].{name}", nv.nvmlDeviceGetMaxClockInfo, h,
                                 getattr(nv, const, code))
                for name, const, code in (("sm_clock_max_mhz", "NVML_CLOCK_SM", 1),
                                          ("mem_clock_max_mhz", "NVML_CLOCK_MEM", 2))
            } if hasattr(nv, "nvmlDeviceGetMaxClockInfo") else {}
        for name, value in self.max_clocks[i].items():
            d[name] = None if value is None else float(value)
        fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nv, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        reasons = None if fn is None else self._call(f"gpu[{i}].clock_event_reasons", fn, h)
        d["clock_event_reasons"] = None if reasons is None else int(reasons)
        d["xid_errors"] = self._xids(i)

    def _open_xid_events(self) -> Any:
        """An NVML event set for Xid critical errors on every GPU, or None where NVML refuses it."""
        nv = self.nv
        kind = getattr(nv, "nvmlEventTypeXidCriticalError", None)
        if kind is None or not hasattr(nv, "nvmlEventSetCreate"):
            return None
        try:
            events = nv.nvmlEventSetCreate()
            for h in self.handles:
                nv.nvmlDeviceRegisterEvents(h, kind, events)
        except Exception as exc:
            self.problems.note("gpu.xid_errors", f"NVML: Xid events unavailable ({exc})")
            return None
        return events

    def _drain_xids(self) -> None:
        """Collect the Xid events waiting in the set (wait 0 ms: never blocks a sample)."""
        nv = self.nv
        wait = getattr(nv, "nvmlEventSetWait_v2", None) or getattr(nv, "nvmlEventSetWait", None)
        if self.xid_events is None or wait is None:
            return
        uuids = {s["uuid"]: s["index"] for s in self.static}
        for _ in range(16):
            try:
                data = wait(self.xid_events, 0)
            except Exception:
                return    # NVML_ERROR_TIMEOUT: nothing waiting
            uuid = _text(self._call("gpu.xid_uuid", nv.nvmlDeviceGetUUID, data.device))
            index = int(uuids.get(uuid or "", 0) or 0)
            self.xids.setdefault(index, []).append({"xid": int(data.eventData), "wall": time.time()})
            del self.xids[index][:-8]

    def _xids(self, i: int) -> list[dict[str, Any]] | None:
        if self.xid_events is None:
            return None
        if i == 0:
            self._drain_xids()
        return list(self.xids.get(i, []))

    def _memory(self, i: int, h: Any, d: dict[str, Any], util: Any) -> None:
        key = f"gpu[{i}].memory_total"
        info = self._call(key, self.nv.nvmlDeviceGetMemoryInfo, h)
        d["memory_total"] = d["memory_used"] = d["memory_free"] = None
        d["memory_unified"] = key in self.unsupported
        if info is not None:
            total = int(info.total)
            if total <= 0:
                # Some integrated-GPU drivers answer "success" with zeros: unknown, not 0.
                self.problems.note(key, "NVML: memory info reported 0 bytes (integrated GPU)")
                d["memory_unified"] = True
            else:
                d["memory_total"], d["memory_used"], d["memory_free"] = total, int(info.used), int(info.free)
                # A driver may report the host's memory as the GPU's: then it is the unified pool.
                if self.host_mem_total and 0.9 <= total / self.host_mem_total <= 1.1:
                    d["memory_unified"] = True
        if d["memory_unified"]:
            # Memory-controller utilisation means nothing on a unified-memory GPU (GB10 reports 0).
            d["memory_util_percent"] = None
            self.problems.note(f"gpu[{i}].memory_util_percent", "unified memory: no separate GPU memory")
        else:
            d["memory_util_percent"] = None if util is None else float(util.memory)

    def _processes(self, i: int, h: Any) -> list[dict[str, Any]] | None:
        # Per-process GPU memory moves slowly (vLLM allocates up front): read it every proc_every seconds.
        now = time.monotonic()
        at, cached = self.procs_cache.get(i, (-1e9, None))
        if now - at < self.proc_every:
            return cached
        result = self._read_processes(i, h)
        self.procs_cache[i] = (now, result)
        return result

    def _read_processes(self, i: int, h: Any) -> list[dict[str, Any]] | None:
        procs = self._call(f"gpu[{i}].processes", self.nv.nvmlDeviceGetComputeRunningProcesses, h)
        if procs is None:
            return None
        out = []
        if len(self.names) > 512:
            self.names.clear()
        for p in procs:
            used = getattr(p, "usedGpuMemory", None)
            pid = int(p.pid)
            name = self.names.get(pid)
            if name is None:
                raw = read_once(os.path.join(self.proc_root, str(pid), "comm"), 256)
                name = self.names[pid] = raw.decode("utf-8", "replace").strip() if raw else ""
            out.append({
                "pid": pid,
                "name": name,
                # pynvml maps NVML_VALUE_NOT_AVAILABLE to None; keep unknown as null.
                "used_memory": None if used is None else int(used),
            })
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.nv.nvmlShutdown()


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


# ---- GPU: nvidia-smi fallback (one long-running child, never one per sample) --------------------------
SMI_FIELDS = ("index", "name", "uuid", "utilization.gpu", "utilization.memory", "temperature.gpu",
              "power.draw", "clocks.sm", "memory.total", "memory.used", "memory.free")


class SmiGpu:
    def __init__(self, exe: str, interval: float, problems: Problems) -> None:
        self.exe = exe
        self.interval = interval
        self.problems = problems
        self.proc: subprocess.Popen[bytes] | None = None
        self.buf = b""
        self.latest: dict[int, dict[str, Any]] = {}
        self.started_at = 0.0
        self._start()

    def _start(self) -> None:
        self.started_at = time.monotonic()
        ms = max(100, int(self.interval * 1000))
        argv = [self.exe, "--query-gpu=" + ",".join(SMI_FIELDS), "--format=csv,noheader,nounits",
                f"-lms={ms}"]
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
            assert self.proc.stdout is not None
            os.set_blocking(self.proc.stdout.fileno(), False)
        except OSError as exc:
            self.proc = None
            self.problems.note("gpu", f"nvidia-smi: {_reason(exc)}")

    def _drain(self) -> None:
        if self.proc is None or self.proc.stdout is None:
            if time.monotonic() - self.started_at > 30:
                self._start()
            return
        while True:
            try:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
            except BlockingIOError:
                break
            if not chunk:
                # nvidia-smi ended; start it again, but not more than every 30 s.
                self.proc.wait()
                self.proc = None
                break
            self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        for line in lines:
            row = self._row(line.decode("utf-8", "replace"))
            if row is not None:
                self.latest[row["index"]] = row

    def _row(self, line: str) -> dict[str, Any] | None:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(SMI_FIELDS):
            return None
        vals = {f: parts[i] for i, f in enumerate(SMI_FIELDS)}
        try:
            index = int(vals["index"])
        except ValueError:
            return None

        def num(field: str, key: str, scale: float = 1.0) -> float | None:
            raw = vals[field]
            try:
                value = float(raw) * scale
            except ValueError:
                self.problems.note(f"gpu[{index}].{key}", f"nvidia-smi: {raw}")
                return None
            self.problems.clear(f"gpu[{index}].{key}")
            return value

        mib = 1024 * 1024
        total = num("memory.total", "memory_total", mib)
        row: dict[str, Any] = {
            "index": index, "name": vals["name"], "uuid": vals["uuid"],
            "util_percent": num("utilization.gpu", "util_percent"),
            "temperature_c": num("temperature.gpu", "temperature_c"),
            "power_w": num("power.draw", "power_w"),
            "sm_clock_mhz": num("clocks.sm", "sm_clock_mhz"),
            "memory_total": None if total is None else int(total),
            "memory_unified": total is None,
            "processes": None,
        }
        used, free = num("memory.used", "memory_used", mib), num("memory.free", "memory_free", mib)
        row["memory_used"] = None if used is None else int(used)
        row["memory_free"] = None if free is None else int(free)
        row["memory_util_percent"] = (None if total is None
                                      else num("utilization.memory", "memory_util_percent"))
        self.problems.note(f"gpu[{index}].processes", "per-process GPU memory needs NVML")
        return row

    def sample(self) -> dict[str, Any]:
        self._drain()
        return {"source": "nvidia-smi", "devices": [self.latest[i] for i in sorted(self.latest)],
                "reason": None if self.latest else "waiting for nvidia-smi", "driver_version": None}

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(2)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class NoGpu:
    def __init__(self, reason: str) -> None:
        self.reason = reason

    def sample(self) -> dict[str, Any]:
        return {"source": "none", "devices": [], "reason": self.reason, "driver_version": None}

    def close(self) -> None:
        pass


def open_gpu(module_name: str, interval: float, problems: Problems, proc_root: str,
             host_mem_total: int | None, proc_every: float = 5.0) -> NvmlGpu | SmiGpu | NoGpu:
    why = ""
    try:
        import importlib

        nv = importlib.import_module(module_name)
    except ImportError as exc:
        why = f"{module_name} not installed ({exc})"
    else:
        try:
            gpu = NvmlGpu(nv, problems, proc_root, host_mem_total, proc_every)
        except Exception as exc:
            why = f"NVML: {exc}"
        else:
            if gpu.handles:
                return gpu
            gpu.close()
            return NoGpu("no GPU (NVML found no devices)")
    exe = _which("nvidia-smi")
    if exe:
        problems.note("gpu", f"{why}; using nvidia-smi")
        return SmiGpu(exe, interval, problems)
    return NoGpu(f"no GPU: {why}; nvidia-smi not found")


def _which(name: str) -> str | None:
    for d in os.environ.get("PATH", os.defpath).split(os.pathsep):
        p = os.path.join(d or ".", name)
        if os.access(p, os.X_OK) and not os.path.isdir(p):
            return p
    return None


def _die_with_parent() -> None:
    """Ask Linux to send SIGTERM when the parent dies (no orphans if the channel vanishes abruptly)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))   # PR_SET_PDEATHSIG
    except Exception:
        pass


# ---- RDMA (RoCE / InfiniBand) -------------------------------------------------------------------------
class RdmaPortReader:
    """One port's files, paths and problem keys worked out once; counters re-read with one ``pread`` each.

    What a read costs the node decides how often it is made. Each ``counters/`` (PMA) file read is a MAD
    that mlx5 answers with a firmware command, one per file; ``hw_counters/`` reads share one firmware
    query per ``lifespan`` (10 ms) window. So every sample reads the four traffic counters and all
    ``hw_counters``; the PMA error counters (``symbol_error``, ``link_downed``, …) are re-read every
    ``slow_every`` seconds (their last values are repeated in between, so an increase shows in the
    sample that read it). A port whose link is not up is read in full only every ``DOWN_EVERY`` seconds
    (its state every sample; in full once more as it goes down and as soon as it comes up).
    """

    DOWN_EVERY = 10.0
    #: ``counters/`` files read every sample.
    FAST_COUNTERS = frozenset({"port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets"})

    def __init__(self, files: OpenFiles, device: str, port: int, base: str, dev_dir: str,
                 slow_every: float = 5.0) -> None:
        self.files = files
        self.device = device
        self.port = port
        self.base = base
        self.key = f"rdma.{device}/{port}"
        self.slow_every = slow_every

        def items(group: str, keep: Any = lambda n: True) -> list[tuple[str, str, str]]:
            return [(n, os.path.join(base, group, n), f"{self.key}.{group}.{n}")
                    for n in _listdir(os.path.join(base, group)) if keep(n)]

        self.fast = items("counters", lambda n: n in self.FAST_COUNTERS)
        self.slow = items("counters", lambda n: n not in self.FAST_COUNTERS)
        self.hw = items("hw_counters")
        self.counter_names = sorted(n for n, _, _ in self.fast + self.slow)
        self.counters: dict[str, int | None] = {}
        self.slow_values: dict[str, int | None] = {}
        self.hw_counters: dict[str, int | None] = {}
        self.slow_at = -1e9
        self.text_files = {n: (os.path.join(base, n), f"{self.key}.{n}")
                           for n in ("state", "phys_state", "rate")}
        ll = read_once(os.path.join(base, "link_layer"))
        self.link_layer = ll.decode().strip() if ll else None
        self.netdev = _netdev(base, dev_dir, port)
        self.read_at = -1e9
        self.was_active = False
        self.state_text: str | None = None
        self.link_at = -1e9
        self.phys: tuple[int | None, str | None] = (None, None)
        self.rate: str | None = None

    def _text(self, name: str) -> str | None:
        path, key = self.text_files[name]
        raw = self.files.read(path, key, 256)
        return None if raw is None else raw.decode("utf-8", "replace").strip()

    def _read_group(self, items: list[tuple[str, str, str]]) -> dict[str, int | None]:
        files = self.files
        fds = files._fds
        said = files.problems.said
        out: dict[str, int | None] = {}
        for name, path, key in items:
            fd = fds.get(path)
            raw: bytes | None
            if fd is None:
                raw = files.read(path, key, 64)
            else:
                try:
                    raw = os.pread(fd, 64, 0)
                except OSError:
                    raw = files.read(path, key, 64)   # reopens, or notes the reason
            if raw is None:
                out[name] = None
                continue
            try:
                out[name] = int(raw)
            except ValueError:
                # e.g. "N/A (no PMA)" when the kernel's MAD query failed.
                files.problems.note(key, raw.decode("utf-8", "replace").strip() or "empty")
                out[name] = None
            else:
                if key in said:
                    files.problems.clear(key)
        return out

    def sample(self) -> dict[str, Any]:
        state_text = self._text("state")
        state_id, state = _id_name(state_text)
        now = time.monotonic()
        # phys_state and rate change with the link, which state shows: re-read them when it changes.
        if state_text != self.state_text or now - self.link_at >= self.DOWN_EVERY:
            self.state_text, self.link_at = state_text, now
            self.phys = _id_name(self._text("phys_state"))
            self.rate = self._text("rate")
        phys_id, phys = self.phys
        rate = self.rate
        active = state_id == 4
        changed = active != self.was_active
        if active or changed or now - self.read_at >= self.DOWN_EVERY:
            if changed or not active or now - self.slow_at >= self.slow_every:
                self.slow_values = self._read_group(self.slow)
                self.slow_at = now
            values = {**self.slow_values, **self._read_group(self.fast)}
            # A new dict each time (the previous sample's stays as it was), in the kernel's name order.
            self.counters = {n: values.get(n) for n in self.counter_names}
            self.hw_counters = self._read_group(self.hw)
            self.read_at = now
        self.was_active = active
        return {
            "device": self.device, "port": self.port,
            "state": state, "state_id": state_id, "phys_state": phys, "phys_state_id": phys_id,
            "rate": rate, "rate_gbps": _rate_gbps(rate), "link_layer": self.link_layer, "netdev": self.netdev,
            "counters": self.counters, "hw_counters": self.hw_counters,
        }


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _id_name(text: str | None) -> tuple[int | None, str | None]:
    """``"4: ACTIVE"`` → (4, "ACTIVE")."""
    if text is None:
        return None, None
    head, sep, tail = text.partition(":")
    try:
        return (int(head), tail.strip()) if sep else (None, text)
    except ValueError:
        return None, text


def _rate_gbps(text: str | None) -> float | None:
    """``"200 Gb/sec (4X HDR)"`` → 200.0."""
    if not text:
        return None
    try:
        return float(text.split()[0])
    except (ValueError, IndexError):
        return None


def _netdev(port_dir: str, dev_dir: str, port: int) -> str | None:
    """The netdev of an RDMA port: the GID table's ``ndevs/0`` (per port), else ``device/net/*``."""
    raw = read_once(os.path.join(port_dir, "gid_attrs", "ndevs", "0"), 256)
    if raw and raw.strip():
        return raw.decode("utf-8", "replace").strip()
    nets = _listdir(os.path.join(dev_dir, "device", "net"))
    if len(nets) == 1:
        return nets[0]
    for net in nets:
        dp = read_once(os.path.join(dev_dir, "device", "net", net, "dev_port"), 32)
        if dp is not None and dp.strip() == str(port - 1).encode():
            return net
    return nets[0] if nets else None


class Rdma:
    """All RDMA ports under ``<sys>/class/infiniband``; rediscovered every ``rescan`` seconds."""

    def __init__(
        self, files: OpenFiles, sys_root: str, rescan: float = 30.0, slow_every: float = 5.0
    ) -> None:
        self.files = files
        self.slow_every = slow_every
        self.root = os.path.join(sys_root, "class", "infiniband")
        self.rescan = rescan
        self.ports: list[RdmaPortReader] = []
        self.scanned_at = -1e9
        self.names: tuple[str, ...] = ()

    def _scan(self) -> None:
        self.scanned_at = time.monotonic()
        found = []
        for dev in _listdir(self.root):
            dev_dir = os.path.join(self.root, dev)
            for port in _listdir(os.path.join(dev_dir, "ports")):
                if port.isdigit():
                    found.append((dev, int(port), os.path.join(dev_dir, "ports", port), dev_dir))
        if not found:
            self.files.problems.note("rdma", f"no RDMA devices under {self.root}")
        names = tuple(f"{d}/{p}" for d, p, _, _ in found)
        if names != self.names:
            self.files.drop_under(self.root)
            self.ports = [RdmaPortReader(self.files, *f, slow_every=self.slow_every) for f in found]
            self.names = names

    def sample(self) -> list[dict[str, Any]]:
        if time.monotonic() - self.scanned_at > self.rescan:
            self._scan()
        return [p.sample() for p in self.ports]


# ---- our processes and containers ---------------------------------------------------------------------
def classify(argv: list[str], comm: str) -> str | None:
    """Which of our kinds a process is (Ray daemons, Ray workers, vLLM), or None."""
    first = argv[0] if argv else comm
    base = os.path.basename(first.split(" ", 1)[0])
    if first.startswith("ray::") or comm.startswith("ray::"):
        return "ray-worker"
    if base in RAY_DAEMONS:
        return base
    if comm in RAY_DAEMONS:
        return comm
    # vLLM renames its processes (VLLM::EngineCore, VllmWorker…), which shows in comm.
    if "vllm" in comm.lower() or first.lower().startswith("vllm::"):
        return "vllm"
    # The program, or the script/module a Python runs: ".../bin/vllm serve", "python3 /usr/local/bin/vllm",
    # "python -m vllm.entrypoints.openai.api_server" — but not "tail -F …/vllm.log".
    if base == "vllm":
        return "vllm"
    if base.startswith("python") and len(argv) > 1:
        if os.path.basename(argv[1]) == "vllm":
            return "vllm"
        if argv[1] == "-m" and len(argv) > 2 and argv[2].split(".")[0] == "vllm":
            return "vllm"
    return None


class Processes:
    def __init__(self, proc_root: str, every: float, problems: Problems) -> None:
        self.root = proc_root
        self.every = every
        self.problems = problems
        self.known: dict[int, dict[str, Any] | None] = {}
        self.scanned_at = -1e9
        self.result: list[dict[str, Any]] = []
        self.me = os.getpid()

    def sample(self) -> list[dict[str, Any]]:
        if time.monotonic() - self.scanned_at >= self.every:
            self._scan()
        return self.result

    def _scan(self) -> None:
        self.scanned_at = time.monotonic()
        try:
            pids = {int(n) for n in os.listdir(self.root) if n.isdigit()}
        except OSError as exc:
            self.problems.note("processes", _reason(exc))
            return
        for gone in set(self.known) - pids:
            del self.known[gone]
        for pid in pids - set(self.known):
            self.known[pid] = None if pid == self.me else self._identify(pid)
        out = []
        for pid in sorted(self.known):
            info = self.known[pid]
            if info is None:
                continue
            statm = read_once(os.path.join(self.root, str(pid), "statm"), 128)
            rss = None
            if statm:
                try:
                    rss = int(statm.split()[1]) * os.sysconf("SC_PAGE_SIZE")
                except (IndexError, ValueError):
                    rss = None
            stat = read_once(os.path.join(self.root, str(pid), "stat"), 1024)
            # CPU seconds and when they were read (this node's monotonic clock): CPU % = their deltas.
            out.append({**info, "rss": rss, "cpu_s": cpu_seconds(stat), "at": round(self.scanned_at, 3)})
        self.result = out

    def _identify(self, pid: int) -> dict[str, Any] | None:
        raw = read_once(os.path.join(self.root, str(pid), "cmdline"), 4096)
        comm_raw = read_once(os.path.join(self.root, str(pid), "comm"), 256)
        if raw is None and comm_raw is None:
            return None
        argv = [a.decode("utf-8", "replace") for a in (raw or b"").split(b"\0") if a]
        comm = comm_raw.decode("utf-8", "replace").strip() if comm_raw else ""
        kind = classify(argv, comm)
        if kind is None:
            return None
        return {"pid": pid, "name": comm or (os.path.basename(argv[0]) if argv else ""), "kind": kind,
                "cmdline": " ".join(argv)[:300]}


def cpu_seconds(stat: bytes | None) -> float | None:
    """utime + stime of a ``/proc/PID/stat`` line, in seconds (the controller turns deltas into CPU %).
    Fields are counted after the command's closing parenthesis: a command may hold spaces and ``)``."""
    if not stat:
        return None
    try:
        fields = stat[stat.rindex(b")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (ValueError, IndexError, OSError):
        return None


class Containers:
    """Containers whose name starts with the engine prefix: Docker socket first, CLI rarely, else null."""

    def __init__(self, prefix: str, socket_path: str, every: float, problems: Problems) -> None:
        self.prefix = prefix
        self.socket_path = socket_path
        self.every = every
        self.problems = problems
        self.next_check = -1e9
        self.result: list[dict[str, Any]] | None = None
        self.cli = _which("docker")
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
            self.problems.note("containers", f"docker socket {path}: {_reason(exc)}")
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
            self.problems.note("containers", f"docker ps: {_reason(exc)}")
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


# ---- the engine's API, read beside it (the head's probe only) -----------------------------------------
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
                return None, b"", f"connection dropped ({url}): {_reason(exc)}"
            except TimeoutError:
                self._close()
                return None, b"", f"timed out after {self.timeout:g}s ({url})"
            except ConnectionRefusedError:
                self._close()
                return None, b"", f"connection refused ({url})"
            except (OSError, http.client.HTTPException) as exc:
                self._close()
                return None, b"", f"cannot connect ({url}): {_reason(exc)}"
            if response.will_close:
                self._close()
            return response.status, body, "" if response.status == 200 else f"HTTP {response.status}"
        return None, b"", f"connection dropped ({url})"     # not reached: the second attempt returns

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


# ---- the probe ----------------------------------------------------------------------------------------
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
            self.problems.note("gpu", _reason(exc))
            out["gpu"] = {"source": "none", "devices": [], "reason": _reason(exc), "driver_version": None}
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


def _write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(1, view)
        view = view[n:]


def _stdin_closed(until: float) -> bool:
    """Wait until monotonic ``until``; True as soon as stdin reaches EOF (the channel that started us
    closed). Anything written to stdin is read and ignored."""
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return False
        ready, _, _ = select.select([0], [], [], left)
        if ready:
            try:
                if os.read(0, 65536) == b"":
                    return True
            except OSError:
                return True


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="sparktui-probe",
                                description=__doc__.split("\n\n")[0] if __doc__ else "")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples (default 1)")
    p.add_argument("--count", type=int, default=0, help="emit N samples then exit (0: until closed)")
    p.add_argument("--proc-root", default="/proc")
    p.add_argument("--sys-root", default="/sys")
    p.add_argument("--nvml-module", default=os.environ.get("SPARKTUI_PROBE_NVML_MODULE", "pynvml"),
                   help="module used as pynvml (a test double in tests); env SPARKTUI_PROBE_NVML_MODULE")
    p.add_argument("--name-prefix", default="sparktui",
                   help="containers whose name starts with this are ours")
    p.add_argument("--docker-socket", default="/var/run/docker.sock")
    p.add_argument("--docker-every", type=float, default=10.0, help="seconds between container checks")
    p.add_argument("--no-containers", action="store_true",
                   help="do not look for containers (the engine runs on the host, not in docker)")
    p.add_argument("--proc-every", type=float, default=5.0,
                   help="seconds between process-list scans and per-process GPU memory reads")
    p.add_argument("--errors-every", type=float, default=5.0,
                   help="seconds between reads of the RoCE PMA error counters "
                        "(each read is a firmware command)")
    p.add_argument("--engine-port", type=int, default=None,
                   help="read the engine's /health and /metrics on 127.0.0.1:PORT into the samples")
    p.add_argument("--engine-families", default="",
                   help="comma-separated name prefixes of the /metrics families to send (default: none)")
    p.add_argument("--engine-timeout", type=float, default=5.0,
                   help="seconds an engine API request may take (default 5)")
    p.add_argument("--until-stdin-closes", action="store_true",
                   help="exit when stdin reaches EOF (how sparktui runs it over its channel)")
    args = p.parse_args(argv)
    if args.interval <= 0:
        p.error("--interval must be > 0")
    return args


def next_aligned(mono: float, wall: float, interval: float) -> float:
    """When the next sample of a stream is due (monotonic): at the next whole multiple of ``interval`` of
    the wall clock, at least half an interval from now. Every node's stream then samples at the same
    moments (their clocks agree to milliseconds under NTP): a dashboard draws all nodes' samples in one
    frame instead of one frame per node, and the readings it compares across nodes are of one instant.
    (Never a burst: a stream that fell behind waits for the next mark.)"""
    wait = interval - wall % interval
    if wait < interval / 2:
        wait += interval
    return mono + wait


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.until_stdin_closes:
        _die_with_parent()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    probe = Probe(args)
    # The sample is a tree of fresh dicts and lists: no cycles to look for.
    encode = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode
    try:
        next_at = time.monotonic()
        while True:
            line = encode(probe.sample()) + "\n"
            try:
                _write_all(line.encode())
            except (BrokenPipeError, OSError):
                return 0
            if probe.engine_api is not None:
                probe.engine_api.kick()     # read now; the next sample carries it
            if args.count and probe.seq >= args.count:
                return 0
            now = time.monotonic()
            if args.count:
                next_at += args.interval
                if next_at < now:          # fell behind (suspended, slow read): skip, do not burst
                    next_at = now
            else:
                next_at = next_aligned(now, time.time(), args.interval)
            if args.until_stdin_closes:
                if _stdin_closed(next_at):
                    return 0
            else:
                time.sleep(next_at - now)
    except KeyboardInterrupt:
        return 130
    finally:
        probe.close()


if __name__ == "__main__":
    sys.exit(main())
