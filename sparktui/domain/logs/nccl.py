"""The NCCL verdict: which transport NCCL chose between the nodes, read from its ``NCCL_DEBUG=INFO`` lines.

NCCL falls back to TCP sockets without an error when it cannot use the RDMA devices (wrong
``NCCL_IB_HCA``, no ``/dev/infiniband`` in the container, no RoCE v2 GID), and a two-Spark TP 2 engine then
all-reduces at ~3 GB/s busbw instead of ~22. One HCA of the two a Spark cable is split across halves it.
The lines, as NCCL prints them (``src/transport/net_ib*.cc``, ``net_socket.cc``, ``transport/net.cc``,
``init.cc``), after the ``host:pid:tid [cudaDev] NCCL INFO`` prefix:

- ``NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:10.0.0.1<0>``
  (merged devices, NCCL ≥ 2.20: ``[0]={[0] rocep1s0f1:1/RoCE, [1] roceP2p1s0f1:1/RoCE}``)
- ``NET/Socket : Using [0]enp1s0f1np1:10.0.0.1<0>``
- ``Using network IB`` / ``Using network Socket``
- ``Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA`` (``[receive]``; ``NET/IB/0(1)`` when proxied,
  ``/Shared`` …) vs ``… via NET/Socket/0``

:func:`observe` folds one line into the timeline's facts (JSON-ready, per node); :func:`verdict` turns
them into the sentence shown; :func:`cross_check` weighs it against the RoCE counters moving during
weight loading and graph capture. Pure code; garbage never raises.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Substrings of the lines this module reads (the stage machine's keyword prefilter uses them).
KEYWORDS: tuple[str, ...] = ("NET/IB : Using", "NET/Socket : Using", "via NET/", "Using network ")

_PREFIX = re.compile(r"(?:^|\s)(?P<host>[\w.-]+):\d+:\d+ \[\d+\] NCCL INFO ")
_IB_USING = re.compile(r"NET/IB : Using(?P<devs>.*?)(?:\s\[RO\])?\s*;\s*OOB\s+(?P<oob>\S+)")
_IB_DEV = re.compile(r"\[(?P<i>\d+)\]\s?(?P<dev>[\w.-]+):(?P<port>\d+)/(?P<ll>RoCE|IB)")
_GROUP = re.compile(r"\[(?P<i>\d+)\]=\{(?P<members>[^}]*)\}|\[(?P<j>\d+)\](?P<one>[\w.-]+:\d+/(?:RoCE|IB))")
_SOCKET_USING = re.compile(r"NET/Socket : Using\s+(?P<ifs>.*)$")
_NETWORK = re.compile(r"Using network (?P<net>\w+)")
_CHANNEL = re.compile(r"Channel \d+/\d+ : \d+\[\w+\] -> \d+\[\w+\] \[(?:send|receive)\] "
                      r"via NET/(?P<net>\w+)/(?P<dev>\d+)")

#: What the fallback costs (issue 10, NVIDIA forum figures for two Sparks).
SOCKET_WARNING = "NCCL fell back to sockets (expect ~3 GB/s busbw)"


def observe(message: str, node: str | None, facts: dict[str, Any]) -> bool:
    """Fold one NCCL INFO line into ``facts``; True when it was one of ours."""
    if "NET/" not in message and "Using network" not in message:
        return False
    m = _PREFIX.search(message)
    where = m.group("host") if m else (node or "head")
    # Copy on write: a snapshot handed out earlier keeps the nested dicts it was given.
    for key in ("nccl_ib_devices", "nccl_nets", "nccl_socket_ifs", "nccl_channels", "nccl_netdevs_used"):
        if key in facts:
            facts[key] = {k: (list(v) if isinstance(v, list) else v) for k, v in facts[key].items()}
    if (u := _IB_USING.search(message)) is not None:
        groups: dict[str, list[str]] = {}
        for g in _GROUP.finditer(u.group("devs")):
            if g.group("members") is not None:       # merged: [0]={[0] a:1/RoCE, [1] b:1/RoCE}
                groups[g.group("i")] = [d.group("dev") for d in _IB_DEV.finditer(g.group("members"))]
            else:
                groups[g.group("j")] = [g.group("one").split(":", 1)[0]]
        if "/IB" in u.group("devs") and "/RoCE" not in u.group("devs"):
            facts["nccl_link_layer"] = "IB"
        facts.setdefault("nccl_ib_devices", {})[where] = groups
        facts.setdefault("nccl_nets", {}).setdefault(where, "IB")
    elif (s := _SOCKET_USING.search(message)) is not None:
        facts.setdefault("nccl_socket_ifs", {})[where] = s.group("ifs").strip()
        facts.setdefault("nccl_nets", {})[where] = "Socket"
    elif (n := _NETWORK.search(message)) is not None:
        facts.setdefault("nccl_nets", {})[where] = n.group("net")
    elif (c := _CHANNEL.search(message)) is not None:
        net = c.group("net")
        counts = facts.setdefault("nccl_channels", {})
        counts[net] = counts.get(net, 0) + 1
        if net == "IB":
            used = facts.setdefault("nccl_netdevs_used", {}).setdefault(where, [])
            dev = int(c.group("dev"))
            if dev not in used:
                used.append(dev)
                used.sort()
    else:
        return False
    v = verdict(facts)
    if v is not None:
        facts["nccl_verdict"], facts["nccl_verdict_level"] = v.text, v.level
    return True


@dataclass(frozen=True)
class NcclVerdict:
    level: str          # "ok" | "warning"
    text: str


def hcas_in_use(facts: Mapping[str, Any]) -> dict[str, list[str]]:
    """Per node: the RDMA devices behind the NET/IB device indices its channels use."""
    out: dict[str, list[str]] = {}
    devices = facts.get("nccl_ib_devices") or {}
    for node, used in (facts.get("nccl_netdevs_used") or {}).items():
        groups = devices.get(node) or {}
        names = [name for i in used for name in groups.get(str(i), [])]
        out[node] = sorted(dict.fromkeys(names))
    return out


def verdict(facts: Mapping[str, Any], expected_hcas: int = 2) -> NcclVerdict | None:
    """The sentence for what the log says so far (None: no NCCL line seen)."""
    channels = facts.get("nccl_channels") or {}
    nets = facts.get("nccl_nets") or {}
    if channels.get("Socket") or (not channels.get("IB") and "Socket" in nets.values()):
        where = ", ".join(sorted(n for n, net in nets.items() if net == "Socket"))
        return NcclVerdict("warning", SOCKET_WARNING + (f" on {where}" if where else ""))
    if not channels.get("IB"):
        return None
    if facts.get("nccl_link_layer") == "IB":
        return NcclVerdict("ok", "NCCL over InfiniBand (RDMA)")
    listed = {node: sum(len(g) for g in groups.values())
              for node, groups in (facts.get("nccl_ib_devices") or {}).items()}
    # A Spark's cable is split across two HCAs, one GPU per node; a node that lists more RDMA devices
    # (one NIC per GPU, a DGX) is not judged by how many one GPU's channels use.
    short = {node: hcas for node, hcas in hcas_in_use(facts).items()
             if len(hcas) < expected_hcas and listed.get(node, 0) <= expected_hcas}
    if short:
        node, hcas = sorted(short.items())[0]
        return NcclVerdict("warning", f"NCCL over RoCE on one HCA only on {node} ({', '.join(hcas) or '?'}): "
                                      "about half the bandwidth (expect ~12 instead of ~20 GB/s)")
    return NcclVerdict("ok", "NCCL over RoCE, both HCAs")


def cross_check(v: NcclVerdict | None, moved: Mapping[str, bool]) -> NcclVerdict | None:
    """Weigh the log's verdict against the RoCE counters: ``moved`` is RDMA device → its traffic counters
    rose during weight loading / graph capture (when NCCL's first all-reduces run)."""
    if v is None or not moved:
        return v
    idle = sorted(d for d, m in moved.items() if not m)
    if v.level == "ok" and idle:
        if len(idle) == len(moved):
            return NcclVerdict("warning", "NCCL says RoCE, but the RoCE counters did not move "
                                          "during weight loading / graph capture")
        return NcclVerdict("warning", f"NCCL over RoCE, but {', '.join(idle)} carried no traffic: one HCA "
                                      "(expect ~12 instead of ~20 GB/s)")
    if v.level == "ok":
        return NcclVerdict("ok", v.text + " (RoCE counters moved on " + ", ".join(sorted(moved)) + ")")
    return v


#: Start-up stages in which NCCL moves data between the nodes (the profiling run all-reduces, graph
#: capture warms the collectives): the RoCE counters must rise on every HCA NCCL uses.
ACTIVE_STAGES = frozenset({"weights", "compile", "kv_cache", "cuda_graphs", "engine"})
#: Traffic below this per device over those stages counts as "did not move" (bytes).
MOVED_BYTES = 64 * 1024**2


class RoceActivity:
    """Per node and RDMA device: the traffic counters (bytes, rx + tx) first and last seen while the start
    is in :data:`ACTIVE_STAGES`; :meth:`moved` says which rose (``node/device`` → bool)."""

    def __init__(self, min_bytes: int = MOVED_BYTES) -> None:
        self.min_bytes = min_bytes
        self._first: dict[str, int] = {}
        self._last: dict[str, int] = {}

    def reset(self) -> None:
        self._first.clear()
        self._last.clear()

    def observe(self, node: str, counters: Mapping[str, int | None], stage: str | None) -> None:
        if stage not in ACTIVE_STAGES:
            return
        for device, value in counters.items():
            if value is None:
                continue
            key = f"{node}/{device}"
            self._first.setdefault(key, value)
            self._last[key] = value

    def moved(self) -> dict[str, bool]:
        return {k: self._last[k] - self._first[k] >= self.min_bytes for k in self._first}
