"""argv: one JSON object {"sys_root", "interface", "peers": [address, …], "port"}. Prints one JSON object:
every RDMA port (state, link layer, netdev, RoCE v2 GID indices), the netdevs' speed / MTU / operstate, and
for each peer whether it answers from this node over the interface (a TCP connect from the interface's
address: a reset counts as reachable, a timeout or "no route" does not). Preflight's link checks judge it
(``sparktui.domain.lifecycle.links``)."""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
from typing import Any

from sparktui.node.if_addr import if_addr


def text(*parts: str) -> str | None:
    try:
        with open(os.path.join(*parts)) as f:
            return f.read().strip()
    except (OSError, ValueError):
        return None


def listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def rdma_ports(root: str, netdevs: set[str]) -> list[dict[str, Any]]:
    """Every RDMA port under ``root``; each port's netdev is added to ``netdevs``."""
    ib = os.path.join(root, "class", "infiniband")
    rdma = []
    for dev in listdir(ib):
        for port in listdir(os.path.join(ib, dev, "ports")):
            base = os.path.join(ib, dev, "ports", port)
            types = {}
            for n in listdir(os.path.join(base, "gid_attrs", "types")):
                t = text(base, "gid_attrs", "types", n)
                if t:
                    types[n] = t
            netdev = text(base, "gid_attrs", "ndevs", "0")
            if not netdev:
                nets = listdir(os.path.join(ib, dev, "device", "net"))
                netdev = nets[0] if nets else None
            if netdev:
                netdevs.add(netdev)
            rdma.append({"device": dev, "port": port, "state": text(base, "state"),
                         "link_layer": text(base, "link_layer"), "rate": text(base, "rate"), "netdev": netdev,
                         "rocev2_gids": sorted(int(n) for n, t in types.items() if t == "RoCE v2")})
    return rdma


def reach(peer: str, port: int, source: str | None) -> str:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(3.0)
    try:
        if source:
            s.bind((source, 0))
        s.connect((peer, port))
        return "ok"
    except ConnectionRefusedError:
        return "ok"
    except OSError as e:
        if e.errno:
            return errno.errorcode.get(e.errno, "") + " " + (e.strerror or str(e))
        return str(e) or "timed out"
    finally:
        s.close()


def main(argv: list[str]) -> None:
    req = json.loads(argv[0])
    root = req.get("sys_root") or "/sys"
    netdevs: set[str] = set()
    rdma = rdma_ports(root, netdevs)
    iface = req.get("interface")
    if iface:
        netdevs.add(iface)
    nets = {}
    for name in sorted(netdevs):
        d = os.path.join(root, "class", "net", name)
        nets[name] = {"exists": os.path.isdir(d), "speed": text(d, "speed"), "mtu": text(d, "mtu"),
                      "operstate": text(d, "operstate")}
    source = if_addr(iface) if iface else None
    answers = {peer: reach(peer, int(req.get("port") or 22), source) for peer in req.get("peers") or []}
    print(json.dumps({"rdma": rdma, "netdevs": nets, "interface": iface, "source": source,
                      "reach": answers}))


if __name__ == "__main__":
    main(sys.argv[1:])
