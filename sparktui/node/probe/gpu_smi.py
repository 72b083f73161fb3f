"""GPU readings without NVML: ``nvidia-smi`` started once in its loop mode (``-lms``), not once a sample."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

from sparktui.node.probe.channel import die_with_parent
from sparktui.node.probe.problems import Problems, why_failed

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
                                         stderr=subprocess.DEVNULL, preexec_fn=die_with_parent)
            assert self.proc.stdout is not None
            os.set_blocking(self.proc.stdout.fileno(), False)
        except OSError as exc:
            self.proc = None
            self.problems.note("gpu", f"nvidia-smi: {why_failed(exc)}")

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
