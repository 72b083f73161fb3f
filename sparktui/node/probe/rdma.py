"""RDMA (RoCE / InfiniBand) ports and their raw sysfs counters."""

from __future__ import annotations

import os
import time
from typing import Any

from sparktui.node.probe.files import OpenFiles, read_once


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
