"""PID 1 of one test host (standard library only; run as a script inside the host's namespaces).

Started as ``ip netns exec NS unshare --pid --fork --mount-proc --uts --mount python hostinit.py ...``.
It gives the host its name and its own /tmp and /dev/shm, starts sshd as a *child* (so killing sshd
leaves the host alive and ``start_sshd`` can bring it back), reaps every orphan (Ray daemonises and
its processes end up re-parented to us), and on SIGTERM takes every process of the host down with it.

Usage: hostinit.py HOSTNAME HOST_TMP_DIR SSHD_CONFIG SSHD_LOG [--docker ETC_DOCKER_DIR]

With ``--docker`` the host is also made fit for its own ``dockerd`` (started later by the test bed):
a private ``/run`` (the default docker socket, exec-root and ``/run/containerd`` are per host), the
cgroup hierarchies mounted again (``ip netns exec`` put a fresh sysfs on ``/sys``, hiding them: dockerd
fails with "Devices cgroup isn't mounted"), a private ``/dev`` with a stand-in RDMA device
``/dev/infiniband/uverbs0`` (``--device /dev/infiniband`` needs one), and a private ``/etc/docker``
(dockerd writes its key there).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

SSHD = "/usr/sbin/sshd"


class _Stop(Exception):
    """Raised from the signal handler to leave the reaping loop."""


def _on_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop


#: This checkout (with its virtual environment). When it lives under /tmp (CI clones to /tmp/ci) it must stay
#: visible inside the host after the host's own /tmp covers the real one: the hosts run its Python.
REPO = Path(__file__).resolve().parents[2]


def _isolate(hostname: str, host_tmp: str) -> None:
    socket.sethostname(hostname)
    # unshare made the mount namespace private already; these mounts never reach the root namespace.
    if REPO.is_relative_to("/tmp"):
        keep = Path(host_tmp) / REPO.relative_to("/tmp")
        keep.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "--bind", str(REPO), str(keep)], check=True)
    # --rbind carries that bind mount along onto /tmp.
    subprocess.run(["mount", "--rbind", host_tmp, "/tmp"], check=True)
    # Ray keeps its object store in /dev/shm: give each host its own.
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/dev/shm"], check=True)
    # sshd's privilege-separation directory (shared with the root namespace; harmless).
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)


#: cgroup v1 controllers dockerd (cgroupfs driver) needs, then the named systemd hierarchy and cgroup2.
_CGROUP_V1 = ("cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids")
#: Device nodes a host's private /dev shares with the machine (bind mounts, nothing created).
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")


def _mount(*argv: str) -> None:
    subprocess.run(["mount", *argv], check=True)


def _docker_ready(etc_docker: str) -> None:
    _mount("-t", "tmpfs", "-o", "mode=755", "tmpfs", "/run")
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    _mount("-t", "tmpfs", "-o", "mode=755", "cgroup", "/sys/fs/cgroup")
    for ctl in _CGROUP_V1:
        os.makedirs(f"/sys/fs/cgroup/{ctl}", exist_ok=True)
        _mount("-t", "cgroup", "-o", ctl, "cgroup", f"/sys/fs/cgroup/{ctl}")
    os.makedirs("/sys/fs/cgroup/systemd", exist_ok=True)
    _mount("-t", "cgroup", "-o", "none,name=systemd", "cgroup", "/sys/fs/cgroup/systemd")
    os.makedirs("/sys/fs/cgroup/unified", exist_ok=True)
    with contextlib.suppress(subprocess.CalledProcessError):  # a kernel without cgroup2: v1 is enough
        _mount("-t", "cgroup2", "cgroup2", "/sys/fs/cgroup/unified")
    # The private /dev is built aside (in the host's /tmp), then moved over /dev in one step.
    dev = "/tmp/.dev"
    os.makedirs(dev, exist_ok=True)
    _mount("-t", "tmpfs", "-o", "mode=755", "devtmp", dev)
    for name in _DEVICES:
        Path(dev, name).touch()
        _mount("--bind", f"/dev/{name}", f"{dev}/{name}")
    for name in ("pts", "shm"):  # shm: the host's own tmpfs, mounted just before
        os.makedirs(f"{dev}/{name}")
        _mount("--rbind", f"/dev/{name}", f"{dev}/{name}")
    os.symlink("pts/ptmx", f"{dev}/ptmx")
    os.symlink("/proc/self/fd", f"{dev}/fd")
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{i}", f"{dev}/{name}")
    # A character device that behaves as /dev/null (1:3): enough for docker's --device to pass it on.
    os.makedirs(f"{dev}/infiniband")
    os.mknod(f"{dev}/infiniband/uverbs0", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    _mount("--move", dev, "/dev")
    os.makedirs("/etc/docker", exist_ok=True)
    _mount("--bind", etc_docker, "/etc/docker")


def _start_sshd(config: str, log_path: str) -> None:
    with open(log_path, "ab") as log:
        subprocess.Popen([SSHD, "-D", "-e", "-f", config], stdin=subprocess.DEVNULL, stdout=log, stderr=log)


def _reap_all() -> bool:
    """Reap every child that has exited; return whether any child is left."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def _shutdown() -> None:
    # As PID 1 of the namespace, kill(-1) reaches every other process of this host and nothing else.
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGTERM)
    deadline = time.monotonic() + 1.0
    while _reap_all() and time.monotonic() < deadline:
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while _reap_all() and time.monotonic() < deadline:
        time.sleep(0.02)


def main(argv: list[str]) -> int:
    hostname, host_tmp, sshd_config, sshd_log = argv[:4]
    etc_docker = argv[5] if len(argv) > 5 and argv[4] == "--docker" else None
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_stop)
    try:
        _isolate(hostname, host_tmp)
        if etc_docker is not None:
            _docker_ready(etc_docker)
        _start_sshd(sshd_config, sshd_log)
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                # No children right now (sshd was killed on purpose): wait for new orphans.
                time.sleep(0.2)
    except _Stop:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        _shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
