"""The host's memory and CPU as ``/proc`` shows them (``meminfo``, ``pressure/memory``, ``stat``)."""

from __future__ import annotations

import re
from typing import Any

UNIFIED_LABEL = "unified memory"


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
