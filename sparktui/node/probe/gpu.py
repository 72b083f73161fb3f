"""Which GPU reader the node gets: NVML, else ``nvidia-smi``, else none (with the reason)."""

from __future__ import annotations

from typing import Any

from sparktui.node.probe.files import which
from sparktui.node.probe.gpu_nvml import NvmlGpu
from sparktui.node.probe.gpu_smi import SmiGpu
from sparktui.node.probe.problems import Problems


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
    exe = which("nvidia-smi")
    if exe:
        problems.note("gpu", f"{why}; using nvidia-smi")
        return SmiGpu(exe, interval, problems)
    return NoGpu(f"no GPU: {why}; nvidia-smi not found")
