"""Preflight link checks: what the cable between the Sparks is worth before NCCL finds out.

Judges ``LINK_PY``'s report of one node (pure). The cable of a Spark is split across two RDMA devices
(``rocep1s0f1`` + ``roceP2p1s0f1``, one per PCIe x4 half); NVIDIA's figures for two Sparks: ~22–24 GB/s
busbw with both halves at MTU 9000, ~12 with one HCA, 18.9–21 at MTU 1500, ~3 over sockets. Checks:

- link speed: ``/sys/class/net/IF/speed`` is 200000 (Mb/s) on a CX7 port at full rate;
- MTU: below 9000 is a warning (jumbo frames are NVIDIA's setting for the cable);
- both RDMA devices of the cable ACTIVE (one down halves the bandwidth);
- RoCE v2 GIDs present on each (``gid_attrs/types/N`` = "RoCE v2"; none: no IP on the port, NCCL fails
  over to sockets or an unroutable GID);
- each peer's cable address reachable from this node over that interface.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparktui.config import NodeConfig, SparkConfig
from sparktui.domain.events import StepStatus, StepView
from sparktui.domain.json_report import last_json_object
from sparktui.domain.telemetry import group_cables

#: ``/sys/class/net/IF/speed`` of a ConnectX-7 port at full rate (Mb/s).
FULL_SPEED_MBPS = 200_000
#: Below this MTU, a warning (NVIDIA: 18.9–21 GB/s at 1500 vs 23.7 at 9000).
JUMBO_MTU = 9000


@dataclass(frozen=True)
class LinkFacts:
    rdma: tuple[Mapping[str, Any], ...] = ()
    netdevs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    interface: str | None = None
    source: str | None = None
    reach: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> LinkFacts:
        data = last_json_object(text)
        if data is None:
            raise ValueError("no JSON report in the output")
        return cls(rdma=tuple(data.get("rdma") or ()), netdevs=dict(data.get("netdevs") or {}),
                   interface=data.get("interface"), source=data.get("source"),
                   reach={str(k): str(v) for k, v in (data.get("reach") or {}).items()})


def _view(name: str, node: str, status: StepStatus, message: str) -> StepView:
    return StepView(name=name, node=node, status=status, message=message)


def _active(port: Mapping[str, Any]) -> bool:
    return str(port.get("state") or "").upper().endswith("ACTIVE")


def cable_ports(facts: LinkFacts, configured: Sequence[str] = (),
                interface: str | None = None) -> list[Mapping[str, Any]]:
    """The RDMA ports of the cable in use: the configured devices, else the cable (Spark twins) that holds
    the interface's netdev, else the first cable with an ACTIVE port."""
    if configured:
        return [p for p in facts.rdma if p.get("device") in configured]
    devices = [str(p.get("device")) for p in facts.rdma]
    cables = group_cables(devices)
    by_device = {str(p.get("device")): p for p in facts.rdma}
    if interface:
        for cable in cables:
            if any(by_device[d].get("netdev") == interface for d in cable.devices if d in by_device):
                return [by_device[d] for d in cable.devices if d in by_device]
    for cable in cables:
        if any(_active(by_device[d]) for d in cable.devices if d in by_device):
            return [by_device[d] for d in cable.devices if d in by_device]
    return []


def check_links(node: str, facts: LinkFacts, configured: Sequence[str] = (),
                interface: str | None = None, peers: Mapping[str, str] | None = None) -> list[StepView]:
    """One view per check; ``peers``: peer node name → its cable address."""
    views: list[StepView] = []
    ports = cable_ports(facts, configured, interface)
    if ports:
        down = [p for p in ports if not _active(p)]
        names = ", ".join(str(p.get("device")) for p in ports)
        if down and len(down) < len(ports):
            which = ", ".join(f"{p.get('device')} {p.get('state')}" for p in down)
            views.append(_view("both HCAs", node, StepStatus.WARNING,
                               f"{which}: "
                               f"one HCA of the cable ({names}) is down — NCCL gets about half the bandwidth "
                               "(~12 instead of ~20 GB/s)"))
        elif not down:
            views.append(_view("both HCAs", node, StepStatus.OK, f"{names} ACTIVE"))
        roce = [p for p in ports if str(p.get("link_layer") or "") == "Ethernet"]
        missing = [str(p.get("device")) for p in roce if not p.get("rocev2_gids")]
        if missing:
            views.append(_view("RoCE v2 GID", node, StepStatus.WARNING,
                               f"no RoCE v2 GID on {', '.join(missing)} (no IPv4 address on its port?): "
                               "NCCL cannot use it and may fall back to sockets"))
        elif roce:
            views.append(_view("RoCE v2 GID", node, StepStatus.OK, ", ".join(
                f"{p.get('device')} GID {p['rocev2_gids'][0]}" for p in roce)))
    netdevs = sorted({str(p.get("netdev")) for p in ports if p.get("netdev")}
                     | ({interface} if interface else set()))
    for name in netdevs:
        info = facts.netdevs.get(name) or {}
        if not info.get("exists", True) or not info:
            views.append(_view("link speed", node, StepStatus.FAILED, f"{name}: no such interface"))
            continue
        views.append(_speed_view(node, name, info.get("speed")))
        views.append(_mtu_view(node, name, info.get("mtu")))
    for peer, address in (peers or {}).items():
        answer = facts.reach.get(address)
        via = f" over {facts.interface}" if facts.interface else ""
        if answer is None:
            continue
        if answer == "ok":
            views.append(_view("peer reachable", node, StepStatus.OK, f"{peer} ({address}) answers{via}"))
        else:
            views.append(_view("peer reachable", node, StepStatus.FAILED,
                               f"{peer} ({address}) not reachable{via}: {answer}"))
    return views


def _speed_view(node: str, name: str, raw: Any) -> StepView:
    try:
        mbps = int(str(raw))
    except (TypeError, ValueError):
        return _view("link speed", node, StepStatus.WARNING, f"{name}: speed unknown ({raw or 'unreadable'})")
    if mbps <= 0:
        return _view("link speed", node, StepStatus.FAILED, f"{name}: no link (speed {mbps})")
    if mbps < FULL_SPEED_MBPS:
        return _view("link speed", node, StepStatus.WARNING,
                     f"{name} at {mbps // 1000} Gb/s, not 200 Gb/s: reseat or replace the cable, or check "
                     "the port's speed setting")
    return _view("link speed", node, StepStatus.OK, f"{name} at {mbps // 1000} Gb/s")


def _mtu_view(node: str, name: str, raw: Any) -> StepView:
    try:
        mtu = int(str(raw))
    except (TypeError, ValueError):
        return _view("MTU", node, StepStatus.WARNING, f"{name}: MTU unknown")
    if mtu < JUMBO_MTU:
        return _view("MTU", node, StepStatus.WARNING,
                     f"{name} MTU {mtu}: below {JUMBO_MTU} costs ~15 % NCCL bandwidth "
                     f"(`ip link set {name} mtu {JUMBO_MTU}` on both nodes)")
    return _view("MTU", node, StepStatus.OK, f"{name} MTU {mtu}")


def link_argv(config: SparkConfig, node: NodeConfig, port: int = 22) -> list[str]:
    """``LINK_PY`` for one node: its sysfs root, its cable interface, every other node's cable address."""
    from sparktui.domain.lifecycle.scripts import LINK_PY

    peers = [n.address for n in config.nodes if n.name != node.name]
    req = {"sys_root": node.sys_root, "interface": node.interface, "peers": peers, "port": port}
    return [node.python, "-c", LINK_PY, json.dumps(req)]


def peer_addresses(config: SparkConfig, node: NodeConfig) -> dict[str, str]:
    return {n.name: n.address for n in config.nodes if n.name != node.name}


def link_views(config: SparkConfig, gathered: Mapping[str, LinkFacts | str]) -> list[StepView]:
    """Every node's link checks, in config order; a node whose report could not be read is one warning."""
    views: list[StepView] = []
    for node in config.nodes:
        got = gathered.get(node.name)
        if got is None:
            continue
        if isinstance(got, str):
            views.append(_view("link checks", node.name, StepStatus.WARNING, f"link facts unreadable: {got}"))
            continue
        views += check_links(node.name, got, node.rdma_devices, node.interface, peer_addresses(config, node))
    return views
