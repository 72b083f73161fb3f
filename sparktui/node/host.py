"""argv: none. Prints one JSON object (``sparktui init``'s discovery): hostname, arch, kernel, home, the
SSH_CONNECTION the session came in on, every interface (operstate, mtu, speed, IPv4 address/prefix), free
disk under $HOME, the tools on PATH."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import struct
from typing import Any

SIOCGIFADDR = 0x8915
SIOCGIFNETMASK = 0x891B


def rd(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def interfaces() -> list[dict[str, Any]]:
    ifs = []
    try:
        names = sorted(os.listdir("/sys/class/net"))
    except OSError:
        names = []
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for name in names:
        base = "/sys/class/net/" + name
        entry: dict[str, Any] = {"name": name, "operstate": rd(base + "/operstate"), "mtu": rd(base + "/mtu"),
                                 "speed": rd(base + "/speed"), "ipv4": None, "prefix": None}
        req = struct.pack("256s", name[:15].encode())
        try:
            entry["ipv4"] = socket.inet_ntoa(fcntl.ioctl(s.fileno(), SIOCGIFADDR, req)[20:24])
            mask = fcntl.ioctl(s.fileno(), SIOCGIFNETMASK, req)[20:24]
            entry["prefix"] = bin(int.from_bytes(mask, "big")).count("1")
        except OSError:
            pass
        ifs.append(entry)
    return ifs


def main() -> None:
    u = os.uname()
    home = os.path.expanduser("~")
    out: dict[str, Any] = {"hostname": socket.gethostname(), "arch": u.machine, "kernel": u.release,
                           "home": home, "ssh_connection": os.environ.get("SSH_CONNECTION", "")}
    out["interfaces"] = interfaces()
    try:
        st = os.statvfs(home)
        out["disk_free"] = st.f_bavail * st.f_frsize
    except OSError:
        out["disk_free"] = None
    out["tools"] = {t: shutil.which(t) for t in ("docker", "vllm", "ray", "nvidia-smi", "ibdev2netdev")}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
