"""GPU readings through NVML (``pynvml``, package ``nvidia-ml-py``), when the node has it."""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

from sparktui.node.probe.files import read_once
from sparktui.node.probe.problems import Problems


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
