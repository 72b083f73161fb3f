"""Isolated test hosts with real OpenSSH servers, built from Linux namespaces (needs root).

Each host is a network namespace (veth to a per-run bridge in the root namespace) plus its own PID,
UTS and mount namespaces, with ``hostinit.py`` as PID 1 running ``sshd``. Every global name (bridge,
netns, veth, subnet, working directory) carries a per-run id, so concurrent runs never collide, and a
manifest in the working directory lets ``python -m tests.testbed down`` clean up after a crashed run.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import ipaddress
import json
import os
import random
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tests.testbed import toml_writer

SSHD = "/usr/sbin/sshd"
HOSTINIT = Path(__file__).with_name("hostinit.py")
#: Stand-ins for the NVIDIA prestart hook and a runc wrapper that clamps memlock (see the files).
DOCKER_STUBS = Path(__file__).with_name("docker_stubs")
_DOCKER_TOOLS = ("dockerd", "docker", "containerd", "runc")
#: The PATH directories ``hide_command`` covers (/bin and /sbin are links to them on Debian 12).
_PATH_DIRS = ("/usr/local/bin", "/usr/bin", "/usr/local/sbin", "/usr/sbin")
#: All test beds live under this directory (one sub-directory per run id) unless overridden.
DEFAULT_ROOT = Path("/var/tmp/sparktui-testbed")
ROOT_ENV = "SPARKTUI_TESTBED_ROOT"
#: The stand-in's "model" directory in every host's private /tmp (``up`` creates it; the config names it).
MODEL_DIR = "/tmp/models/standin-model"
_LOCK_NAME = ".subnet.lock"
#: The bridge's (controller's) host number in the /24; hosts get 1, 2, …
_BRIDGE_HOST = 254
_REQUIRED_TOOLS = ("ip", "unshare", "nsenter", "ssh-keygen", "mount")


class TestbedError(RuntimeError):
    """Building or driving the test bed failed."""


def unavailable_reason() -> str | None:
    """Why no test bed can be built here (``None`` when it can)."""
    if os.geteuid() != 0:
        return "the test bed needs root (network namespaces, sshd); run the tests as root (CI does)"
    if not os.access(SSHD, os.X_OK):
        return f"{SSHD} is missing: install openssh-server"
    missing = [tool for tool in _REQUIRED_TOOLS if shutil.which(tool) is None]
    if missing:
        return (f"missing tools for the test bed: {', '.join(missing)} "
                "(install iproute2, util-linux, openssh-client)")
    return None


def docker_unavailable_reason() -> str | None:
    """Why no test host can run its own dockerd here (``None`` when it can)."""
    missing = [tool for tool in _DOCKER_TOOLS if shutil.which(tool) is None]
    if missing:
        return f"missing for docker test hosts: {', '.join(missing)} (install docker.io)"
    return None


def testbed_root() -> Path:
    return Path(os.environ.get(ROOT_ENV) or DEFAULT_ROOT)


@dataclass
class Host:
    name: str
    index: int
    ip: str
    netns: str
    veth_root: str
    veth_ns: str
    dir: str
    #: PID (as seen from the root namespace) of hostinit.py, PID 1 of the host.
    init_pid: int | None = None
    #: PID of the ``unshare`` process that waits for init.
    unshare_pid: int | None = None

    @property
    def path(self) -> Path:
        return Path(self.dir)

    @property
    def tmp(self) -> Path:
        return self.path / "tmp"

    @property
    def sshd_config(self) -> Path:
        return self.path / "sshd_config"

    @property
    def sshd_log(self) -> Path:
        return self.path / "sshd.log"

    @property
    def host_key(self) -> Path:
        return self.path / "ssh_host_ed25519_key"


def _sh(*argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise TestbedError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def _pid_ns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def _ppid(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("PPid:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _all_pids() -> Iterator[int]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            yield int(entry)


def _kill(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _used_networks() -> list[ipaddress.IPv4Network]:
    nets: list[ipaddress.IPv4Network] = []
    for line in _sh("ip", "-4", "-o", "addr", "show", check=False).stdout.splitlines():
        parts = line.split()
        if "inet" in parts:
            nets.append(ipaddress.IPv4Interface(parts[parts.index("inet") + 1]).network)
    for line in _sh("ip", "-4", "route", "show", "table", "all", check=False).stdout.splitlines():
        dest = line.split()[0] if line.split() else ""
        if dest and dest[0].isdigit():
            with contextlib.suppress(ValueError):
                nets.append(ipaddress.IPv4Network(dest, strict=False))
    return nets


def _port_open(ip: str, port: int = 22) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        try:
            s.connect((ip, port))
        except OSError:
            return False
        return True


class Testbed:
    """N isolated SSH hosts. ``Testbed().up()`` builds them; ``teardown()`` removes everything."""

    __test__ = False  # not a pytest test class

    def __init__(self, names: Sequence[str] = ("spark1", "spark2"), root: Path | None = None, *,
                 docker: bool = False) -> None:
        if not names:
            raise ValueError("a test bed needs at least one host")
        self.names = tuple(names)
        self.root = root or testbed_root()
        self.id = ""
        self.dir = Path()
        self.bridge = ""
        self.subnet = ""
        self.hosts: dict[str, Host] = {}
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._torn_down = False
        #: The process that built it (``down --stale`` removes beds whose builder is gone; 0: never stale).
        self.owner_pid = os.getpid()
        #: Every host runs its own dockerd (private /run, cgroups, /dev with a stand-in uverbs device).
        self.with_docker = docker

    # -- context manager ---------------------------------------------------------------------------
    def __enter__(self) -> Testbed:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    # -- paths -------------------------------------------------------------------------------------
    @property
    def client_key(self) -> Path:
        return self.dir / "client_key"

    @property
    def known_hosts(self) -> Path:
        return self.dir / "known_hosts"

    @property
    def config_path(self) -> Path:
        return self.dir / "config.toml"

    @property
    def manifest_path(self) -> Path:
        return self.dir / "manifest.json"

    def host(self, name: str) -> Host:
        try:
            return self.hosts[name]
        except KeyError:
            raise KeyError(f"no test host {name!r} (hosts: {', '.join(self.hosts)})") from None

    def ip(self, name: str) -> str:
        return self.host(name).ip

    def host_tmp(self, name: str) -> Path:
        """The host's /tmp, as seen from the root namespace."""
        return self.host(name).tmp

    @property
    def controller_ip(self) -> str:
        """The root namespace's address on the test network (where pytest runs)."""
        return str(ipaddress.IPv4Network(self.subnet).network_address + _BRIDGE_HOST)

    # -- build -------------------------------------------------------------------------------------
    def up(self, timeout: float = 15.0) -> Testbed:
        reason = unavailable_reason() or (docker_unavailable_reason() if self.with_docker else None)
        if reason:
            raise TestbedError(reason)
        try:
            self._allocate_id()
            self._write_keys()
            self._build_network()
            for host in self.hosts.values():
                self._write_sshd_config(host)
                self._spawn_init(host)
            self._save_manifest()
            deadline = time.monotonic() + timeout
            for host in self.hosts.values():
                self._wait_init_pid(host, deadline)
            self._save_manifest()
            for host in self.hosts.values():
                self._wait_sshd(host, deadline)
            if self.with_docker:
                for name in self.names:
                    self.start_dockerd(name, wait=False)
                for name in self.names:
                    self.wait_dockerd(name)
            self._write_known_hosts()
            self.make_model_dirs()
            self.write_config(self.config_path)
        except BaseException:
            self.teardown()
            raise
        return self

    def _allocate_id(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for _ in range(100):
            run_id = "tb" + secrets.token_hex(2)
            try:
                (self.root / run_id).mkdir(mode=0o755)
            except FileExistsError:
                continue
            if Path(f"/run/netns/{run_id}-{self.names[0]}").exists():
                continue
            self.id = run_id
            self.dir = self.root / run_id
            break
        else:
            raise TestbedError(f"could not find a free run id under {self.root}")
        self.bridge = f"{self.id}-br"
        for index, name in enumerate(self.names):
            host_dir = self.dir / "hosts" / name
            (host_dir / "tmp").mkdir(parents=True)
            (host_dir / "tmp").chmod(0o1777)
            self.hosts[name] = Host(
                name=name, index=index, ip="", netns=f"{self.id}-{name}",
                veth_root=f"{self.id}h{index}", veth_ns=f"{self.id}n{index}", dir=str(host_dir),
            )
        self._save_manifest()

    def _write_keys(self) -> None:
        jobs = [subprocess.Popen(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"testbed-{self.id}",
                                  "-f", str(self.client_key)], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)]
        for host in self.hosts.values():
            jobs.append(subprocess.Popen(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", host.name,
                                          "-f", str(host.host_key)], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE))
        for job in jobs:
            _, err = job.communicate(timeout=30)
            if job.returncode != 0:
                raise TestbedError(f"ssh-keygen failed: {err.decode(errors='replace').strip()}")

    def _build_network(self) -> None:
        # Serialise subnet choice between concurrent runs: check-then-claim must not interleave.
        with open(self.root / _LOCK_NAME, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            subnet = self._pick_subnet()
            self.subnet = str(subnet)
            self._save_manifest()
            _sh("ip", "link", "add", self.bridge, "type", "bridge")
            _sh("ip", "addr", "add", f"{subnet.network_address + _BRIDGE_HOST}/24", "dev", self.bridge)
            _sh("ip", "link", "set", self.bridge, "up")
        for host in self.hosts.values():
            host.ip = str(subnet.network_address + host.index + 1)
            self._save_manifest()
            _sh("ip", "netns", "add", host.netns)
            _sh("ip", "link", "add", host.veth_root, "type", "veth", "peer", "name", host.veth_ns)
            _sh("ip", "link", "set", host.veth_ns, "netns", host.netns)
            _sh("ip", "link", "set", host.veth_root, "master", self.bridge, "up")
            _sh("ip", "-n", host.netns, "link", "set", host.veth_ns, "name", "eth0")
            _sh("ip", "-n", host.netns, "addr", "add", f"{host.ip}/24", "dev", "eth0")
            _sh("ip", "-n", host.netns, "link", "set", "eth0", "up")
            _sh("ip", "-n", host.netns, "link", "set", "lo", "up")

    @staticmethod
    def _pick_subnet() -> ipaddress.IPv4Network:
        used = _used_networks()
        rng = random.SystemRandom()
        for _ in range(500):
            candidate = ipaddress.IPv4Network(f"10.{rng.randrange(64, 250)}.{rng.randrange(1, 255)}.0/24")
            if not any(candidate.overlaps(net) for net in used if net.prefixlen > 0):
                return candidate
        raise TestbedError("no free 10.x.y.0/24 subnet found")

    def _write_sshd_config(self, host: Host) -> None:
        host.sshd_config.write_text("\n".join([
            f"# sshd of test host {host.name} (test bed {self.id})",
            "Port 22",
            "ListenAddress 0.0.0.0",
            f"HostKey {host.host_key}",
            f"PidFile {host.path / 'sshd.pid'}",
            "PermitRootLogin yes",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            f"AuthorizedKeysFile {self.client_key}.pub",
            "StrictModes no",
            # The client's keepalives detect dead links; the server must not drop idle sessions.
            "ClientAliveInterval 0",
            "UseDNS no",
            "PrintMotd no",
            "PrintLastLog no",
            # One shared connection carries many channels (commands, log streams, probe).
            "MaxSessions 200",
            "MaxStartups 100:30:200",
            "AllowTcpForwarding yes",
            "Subsystem sftp /usr/lib/openssh/sftp-server",
            "LogLevel VERBOSE",
            "",
        ]))

    def _spawn_init(self, host: Host) -> None:
        log = open(host.path / "init.log", "ab")  # noqa: SIM115 (handed to the child)
        try:
            proc = subprocess.Popen(
                ["ip", "netns", "exec", host.netns,
                 "unshare", "--pid", "--fork", "--mount-proc", "--uts", "--mount",
                 sys.executable, str(HOSTINIT), host.name, str(host.tmp), str(host.sshd_config),
                 str(host.sshd_log), *self._docker_init_args(host)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True,  # a Ctrl-C in the terminal must not reach the hosts
            )
        finally:
            log.close()
        self._procs[host.name] = proc
        host.unshare_pid = proc.pid

    def _docker_init_args(self, host: Host) -> list[str]:
        if not self.with_docker:
            return []
        etc = host.path / "etc-docker"
        etc.mkdir(exist_ok=True)
        return ["--docker", str(etc)]

    def _init_log(self, host: Host) -> str:
        with contextlib.suppress(OSError):
            return (host.path / "init.log").read_text(errors="replace")[-2000:]
        return ""

    def _wait_init_pid(self, host: Host, deadline: float) -> None:
        assert host.unshare_pid is not None
        own_ns = _pid_ns(os.getpid())
        while time.monotonic() < deadline:
            proc = self._procs.get(host.name)
            if proc is not None and proc.poll() is not None:
                raise TestbedError(
                    f"host {host.name} exited at start ({proc.returncode}): {self._init_log(host)}")
            # ``ip netns exec`` execs unshare, which forks init into the new PID namespace.
            for child in _children(host.unshare_pid):
                if _pid_ns(child) not in (None, own_ns):
                    host.init_pid = child
                    return
            time.sleep(0.005)
        raise TestbedError(f"host {host.name}: init did not start: {self._init_log(host)}")

    def _wait_sshd(self, host: Host, deadline: float) -> None:
        while time.monotonic() < deadline:
            if _port_open(host.ip):
                return
            proc = self._procs.get(host.name)
            if proc is not None and proc.poll() is not None:
                raise TestbedError(f"host {host.name} exited ({proc.returncode}): {self._init_log(host)}")
            time.sleep(0.01)
        log = host.sshd_log.read_text(errors="replace")[-2000:] if host.sshd_log.exists() else ""
        raise TestbedError(f"sshd on {host.name} ({host.ip}) did not come up: {log}")

    def _write_known_hosts(self) -> None:
        lines = []
        for host in self.hosts.values():
            key_type, key_b64 = Path(f"{host.host_key}.pub").read_text().split()[:2]
            lines.append(f"{host.ip} {key_type} {key_b64}")
        self.known_hosts.write_text("\n".join(lines) + "\n")

    def _save_manifest(self) -> None:
        data = {
            "id": self.id, "dir": str(self.dir), "bridge": self.bridge, "subnet": self.subnet,
            "owner_pid": self.owner_pid, "docker": self.with_docker,
            "hosts": [asdict(h) for h in self.hosts.values()],
        }
        tmp = self.manifest_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.manifest_path)

    @classmethod
    def from_manifest(cls, path: Path) -> Testbed:
        """A handle on a test bed built by another process (to drive it or tear it down)."""
        data = json.loads(Path(path).read_text())
        hosts = [Host(**h) for h in data["hosts"]]
        bed = cls([h.name for h in hosts], root=Path(data["dir"]).parent)
        bed.id, bed.dir = data["id"], Path(data["dir"])
        bed.bridge, bed.subnet = data["bridge"], data["subnet"]
        bed.owner_pid = int(data.get("owner_pid") or 0)
        bed.with_docker = bool(data.get("docker"))
        bed.hosts = {h.name: h for h in hosts}
        return bed

    # -- config ------------------------------------------------------------------------------------
    def config_dict(self, **overrides: Any) -> dict[str, Any]:
        """The config for these hosts as a dict; ``overrides`` are merged in (dicts deep, the rest replaced).

        ``nodes`` may be given as a dict ``{node_name: {key: value}}`` to change single nodes.
        """
        venv_bin = Path(sys.executable).parent
        nodes = [
            {
                "name": host.name, "host": host.ip, "user": "root",
                "identity_file": str(self.client_key), "known_hosts": str(self.known_hosts),
                "role": "head" if host.index == 0 else "worker", "ip": host.ip, "python": sys.executable,
            }
            for host in self.hosts.values()
        ]
        data: dict[str, Any] = {
            "cluster": {"name": f"testbed-{self.id}"},
            "nodes": nodes,
            "engine": {
                "runtime": "host",
                "model": MODEL_DIR,
                "served_model_name": "standin",
                "tensor_parallel_size": len(self.hosts),
                "executor": "ray",
                "vllm_command": [sys.executable, "-m", "sparktui.sim.vllm_standin"],
                "ray_command": [str(venv_bin / "ray")],
                # GPU-less hosts: each Ray node declares the one GPU vLLM's placement asks for.
                "ray_start_args": ["--num-gpus", "1", "--num-cpus", "1", "--object-store-memory", "80000000",
                                   "--include-dashboard=false"],
                "ray_python": [sys.executable],
                "state_dir": "/tmp/sparktui",
                "env": {"RAY_USAGE_STATS_ENABLED": "0"},
            },
        }
        node_overrides = overrides.pop("nodes", None)
        if isinstance(node_overrides, Mapping):
            for node in data["nodes"]:
                node.update(node_overrides.get(node["name"], {}))
        elif node_overrides is not None:
            data["nodes"] = node_overrides
        return _deep_merge(data, overrides)

    def write_config(self, path: Path | str | None = None, **overrides: Any) -> Path:
        """Write a config.toml for these hosts (``overrides`` as in ``config_dict``); returns its path."""
        target = Path(path) if path is not None else self.config_path
        target.write_text(toml_writer.dumps(self.config_dict(**overrides)))
        return target

    def spark_config(self, **overrides: Any) -> Any:
        """The parsed ``SparkConfig`` for these hosts."""
        from sparktui.config import parse_config

        return parse_config(self.config_dict(**overrides), "<testbed>")

    def make_model_dirs(self, names: Sequence[str] | None = None) -> None:
        """The same small "model" directory (``MODEL_DIR``, in each host's private /tmp) on every host, so
        the config ``up`` writes passes preflight's model check as it is."""
        for name in names or self.names:
            root = self.host_tmp(name) / MODEL_DIR.removeprefix("/tmp/")
            root.mkdir(parents=True, exist_ok=True)
            (root / "config.json").write_text('{"architectures": ["StandinForCausalLM"]}\n')
            (root / "model-00001-of-00001.safetensors").write_bytes(b"\0" * 4096)

    # -- driving the hosts -------------------------------------------------------------------------
    def _init_pid(self, name: str) -> int:
        host = self.host(name)
        if host.init_pid is None or _pid_ns(host.init_pid) is None:
            raise TestbedError(f"host {name} is not running")
        return host.init_pid

    def nsenter(self, name: str) -> list[str]:
        """The command prefix that runs a command inside host ``name``'s namespaces."""
        return ["nsenter", "--target", str(self._init_pid(name)), "--net", "--pid", "--uts", "--mount", "--"]

    #: The old name, for branches written before the rename (tests/test_no_sleep_asserts.py flags its use).
    _nsenter = nsenter

    def exec(
        self, name: str, argv: Sequence[str], *, input: str | None = None, timeout: float = 30,
        check: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside host ``name`` (its namespaces, its /tmp) from the root namespace."""
        return subprocess.run([*self.nsenter(name), *argv], input=input, capture_output=True, text=True,
                              timeout=timeout, check=check)

    def pids(self, name: str) -> list[int]:
        """Every process of host ``name`` (root-namespace PIDs), init included."""
        ns = _pid_ns(self._init_pid(name))
        return [pid for pid in _all_pids() if _pid_ns(pid) == ns]

    def _sshd_pids(self, name: str) -> tuple[list[int], list[int]]:
        """(listeners, sessions) of host ``name``'s sshd."""
        config = str(self.host(name).sshd_config)
        listeners, sessions = [], []
        for pid in self.pids(name):
            argv = _cmdline(pid)
            if not argv or not (argv[0].endswith("sshd") or argv[0].startswith("sshd:")):
                continue
            # The listener's title is "sshd: /usr/sbin/sshd ... -f CONFIG [listener] ..."; sshd re-executes
            # itself with -R for each new connection, then retitles it "sshd: root@notty" and the like.
            words = " ".join(argv).split()
            if config in words and "-R" not in words:
                listeners.append(pid)
            else:
                sessions.append(pid)
        return listeners, sessions

    def kill_sshd(self, name: str, sessions: bool = True) -> None:
        """Kill the host's sshd listener (and, by default, its established sessions)."""
        listeners, open_sessions = self._sshd_pids(name)
        for pid in listeners + (open_sessions if sessions else []):
            _kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while _port_open(self.ip(name)) and time.monotonic() < deadline:
            time.sleep(0.01)

    def kill_ssh_sessions(self, name: str) -> None:
        """Drop every established SSH session at once; sshd keeps listening."""
        _, open_sessions = self._sshd_pids(name)
        for pid in open_sessions:
            _kill(pid, signal.SIGKILL)

    def start_sshd(self, name: str, timeout: float = 10) -> None:
        """Start the host's sshd again (after ``kill_sshd``) and wait until it listens."""
        host = self.host(name)
        listeners, _ = self._sshd_pids(name)
        if not listeners:
            # Daemonised: it is re-parented to the host's init, like the first one.
            proc = subprocess.run([*self.nsenter(name), SSHD, "-f", str(host.sshd_config),
                                   "-E", str(host.sshd_log)], capture_output=True, text=True, timeout=timeout)
            if proc.returncode != 0:
                raise TestbedError(f"starting sshd on {name} failed: {proc.stderr.strip()}")
        self._wait_sshd(host, time.monotonic() + timeout)

    def sshd_running(self, name: str) -> bool:
        return bool(self._sshd_pids(name)[0])

    def link_down(self, name: str) -> None:
        """Cut the host's cable silently: packets vanish, no RST, no FIN (only keepalives notice)."""
        _sh("ip", "link", "set", self.host(name).veth_root, "down")

    def link_up(self, name: str) -> None:
        _sh("ip", "link", "set", self.host(name).veth_root, "up")

    def ssh_argv(self, name: str, *remote: str) -> list[str]:
        """A plain OpenSSH client command line for host ``name`` (for manual checks and tests)."""
        return ["ssh", "-i", str(self.client_key), "-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
                f"root@{self.ip(name)}", *remote]

    # -- docker ------------------------------------------------------------------------------------
    def cgroup_parent(self, name: str) -> str:
        """The cgroup under which host ``name``'s dockerd puts its containers (removed at teardown)."""
        return f"{self.id}-{name}"

    def docker_data(self, name: str) -> Path:
        return self.host(name).path / "docker-data"

    def dockerd_log(self, name: str) -> Path:
        return self.host(name).path / "dockerd.log"

    def dockerd_argv(self, name: str) -> list[str]:
        """The host's dockerd: its own data root, exec root, pid file and socket (the default path, in
        the host's private /run), no iptables/bridge (containers use the host network, as sparktui's do),
        and runc behind the memlock clamp."""
        host = self.host(name)
        config = host.path / "daemon.json"
        if not config.exists():
            config.write_text("{}\n")
        return ["dockerd", "--config-file", str(config), "--data-root", str(self.docker_data(name)),
                "--exec-root", "/run/docker", "--pidfile", "/run/docker.pid", "-H", "unix:///run/docker.sock",
                "--iptables=false", "--bridge=none", "--ip-masq=false",
                "--exec-opt", "native.cgroupdriver=cgroupfs",
                "--cgroup-parent", "/" + self.cgroup_parent(name),
                "--add-runtime", f"clamp={DOCKER_STUBS / 'runc-clamp'}", "--default-runtime", "clamp"]

    def start_dockerd(self, name: str, *, wait: bool = True, timeout: float = 60) -> None:
        """Start host ``name``'s dockerd (re-parented to the host's init, like sshd) and wait for it."""
        if not self.with_docker:
            raise TestbedError("this test bed was built without docker (Testbed(..., docker=True))")
        # The stub hook must be on dockerd's own PATH: that is where it looks for it.
        path = f"{DOCKER_STUBS}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        script = 'log=$1; shift; "$@" </dev/null >>"$log" 2>&1 &'
        proc = subprocess.run([*self.nsenter(name), "env", f"PATH={path}", "sh", "-c", script, "sh",
                               str(self.dockerd_log(name)), *self.dockerd_argv(name)],
                              capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            raise TestbedError(f"starting dockerd on {name} failed: {proc.stderr.strip()}")
        if wait:
            self.wait_dockerd(name, timeout)

    def wait_dockerd(self, name: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            res = self.exec(name, ["docker", "version", "--format", "{{.Server.Version}}"], timeout=30)
            if res.returncode == 0:
                return
            last = res.stderr.strip()
            time.sleep(0.2)
        log = self.dockerd_log(name).read_text(errors="replace")[-2000:] if self.dockerd_log(name).exists() \
            else ""
        raise TestbedError(f"dockerd on {name} did not answer in {timeout:.0f} s: {last}\n{log}")

    def dockerd_pid(self, name: str) -> int | None:
        """dockerd's PID as seen from the root namespace (``None`` when it does not run)."""
        for pid in self.pids(name):
            argv = _cmdline(pid)
            if argv and Path(argv[0]).name == "dockerd":
                return pid
        return None

    def stop_dockerd(self, name: str, timeout: float = 30) -> None:
        """Stop host ``name``'s dockerd the way its service would (SIGTERM; it stops its containers)."""
        pid = self.dockerd_pid(name)
        if pid is None:
            return
        _kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        _kill(pid, signal.SIGKILL)

    def docker(self, name: str, *args: str, timeout: float = 120,
               check: bool = True) -> subprocess.CompletedProcess[str]:
        """``docker ARGS`` on host ``name`` (its own daemon)."""
        res = self.exec(name, ["docker", *args], timeout=timeout)
        if check and res.returncode != 0:
            raise TestbedError(f"{name}: docker {' '.join(args)} failed ({res.returncode}): "
                               f"{res.stderr.strip()}")
        return res

    def hide_command(self, name: str, command: str) -> None:
        """Make ``command`` vanish from host ``name`` as if it were not installed: each PATH directory that
        has it gets an overlay (in the host's own mount namespace) whose whiteout hides it."""
        for n, directory in enumerate(_PATH_DIRS):
            if not Path(directory, command).exists():
                continue
            base = self.host(name).path / f"hide-{command}-{n}"
            (base / "upper").mkdir(parents=True, exist_ok=True)
            (base / "work").mkdir(exist_ok=True)
            with contextlib.suppress(FileExistsError):
                os.mknod(base / "upper" / command, 0o600 | stat.S_IFCHR, os.makedev(0, 0))
            res = self.exec(name, ["mount", "-t", "overlay", "overlay", "-o",
                                   f"lowerdir={directory},upperdir={base / 'upper'},workdir={base / 'work'}",
                                   directory])
            if res.returncode != 0:
                raise TestbedError(f"{name}: hiding {directory}/{command} failed: {res.stderr.strip()}")

    def unhide_commands(self, name: str) -> None:
        """Undo ``hide_command`` on host ``name``."""
        for base in sorted(self.host(name).path.glob("hide-*-*")):
            directory = _PATH_DIRS[int(base.name.rsplit("-", 1)[1])]
            self.exec(name, ["umount", directory])
            shutil.rmtree(base, ignore_errors=True)

    def _stop_docker(self, problems: list[str]) -> None:
        """Containers first (their processes sit in other PID namespaces), then each dockerd."""
        for name in self.names:
            host = self.hosts.get(name)
            if host is None or host.init_pid is None or _pid_ns(host.init_pid) is None:
                continue
            with contextlib.suppress(subprocess.TimeoutExpired, TestbedError):
                ids = self.docker(name, "ps", "-aq", timeout=20, check=False).stdout.split()
                if ids:
                    self.docker(name, "rm", "-f", *ids, timeout=60, check=False)
            with contextlib.suppress(TestbedError):
                self.stop_dockerd(name)

    def _remove_cgroups(self, problems: list[str]) -> None:
        """dockerd's cgroup directories stay behind in the machine's hierarchies: remove them."""
        for name in self.names:
            for top in Path("/sys/fs/cgroup").glob(f"*/{self.cgroup_parent(name)}"):
                for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
                    with contextlib.suppress(OSError):
                        d.rmdir()
                try:
                    top.rmdir()
                except OSError as exc:
                    problems.append(f"rmdir {top}: {exc}")

    # -- teardown ----------------------------------------------------------------------------------
    def teardown(self, keep_dir: bool = False) -> list[str]:
        """Remove every process, namespace, link and file of this test bed; safe after partial failure.

        Returns the problems met (it never raises, so a failing test still cleans up).
        """
        problems: list[str] = []
        if self._torn_down:
            return problems
        own_ns = _pid_ns(os.getpid())
        if self.with_docker:
            try:
                self._stop_docker(problems)
            except Exception as exc:  # never keep the rest of the teardown from running
                problems.append(f"stopping docker: {exc}")
        # 1. Ask each host's init to stop its processes, then make sure.
        inits: dict[str, tuple[int, str | None]] = {}
        for host in self.hosts.values():
            pid = host.init_pid
            if pid is not None and str(HOSTINIT) in _cmdline(pid):
                inits[host.name] = (pid, _pid_ns(pid))
                _kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 3
        for pid, _ in inits.values():
            while _pid_ns(pid) is not None and time.monotonic() < deadline:
                time.sleep(0.01)
            # Killing PID 1 of a namespace kills everything in it (Ray included).
            _kill(pid, signal.SIGKILL)
        for name, (_, ns) in inits.items():
            if ns is None or ns == own_ns:
                continue
            leftovers = [pid for pid in _all_pids() if _pid_ns(pid) == ns]
            for pid in leftovers:
                _kill(pid, signal.SIGKILL)
            if leftovers:
                problems.append(f"{name}: killed {len(leftovers)} leftover processes")
        for host in self.hosts.values():
            # Built by another process: only kill the pid if it still is our unshare.
            if (host.unshare_pid is not None and host.name not in self._procs
                    and str(HOSTINIT) in " ".join(_cmdline(host.unshare_pid))):
                _kill(host.unshare_pid, signal.SIGKILL)
        for child in self._procs.values():
            try:
                child.wait(timeout=3)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        # 2. Anything else that entered the network namespaces (``ip netns exec`` from other tests).
        for host in self.hosts.values():
            if Path(f"/run/netns/{host.netns}").exists():
                for word in _sh("ip", "netns", "pids", host.netns, check=False).stdout.split():
                    _kill(int(word), signal.SIGKILL)
                done = _sh("ip", "netns", "del", host.netns, check=False)
                if done.returncode != 0:
                    problems.append(f"ip netns del {host.netns}: {done.stderr.strip()}")
        # 3. Links (veths normally die with their namespace) and the bridge.
        for link in [h.veth_root for h in self.hosts.values()] + ([self.bridge] if self.bridge else []):
            if Path(f"/sys/class/net/{link}").exists():
                done = _sh("ip", "link", "del", link, check=False)
                # A veth may vanish on its own meanwhile (its peer's namespace went away): that is fine.
                if done.returncode != 0 and "Cannot find device" not in done.stderr:
                    problems.append(f"ip link del {link}: {done.stderr.strip()}")
        if self.with_docker:
            try:
                self._remove_cgroups(problems)
            except Exception as exc:
                problems.append(f"removing cgroups: {exc}")
        # 4. Files (a data root holds read-only overlay layers: rmtree copes as root).
        if self.id and not keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        self._torn_down = True
        return problems


def _deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def teardown_all(root: Path | None = None, stale_only: bool = False) -> list[str]:
    """Tear down every test bed recorded under ``root`` (CI's exit trap; ``down --all``).

    With ``stale_only``, only beds whose building process has exited (left behind by a killed run).
    """
    problems: list[str] = []
    base = root or testbed_root()
    if not base.is_dir():
        return problems
    for manifest in sorted(base.glob("tb*/manifest.json")):
        try:
            bed = Testbed.from_manifest(manifest)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problems.append(f"{manifest}: unreadable manifest ({exc})")
            continue
        # Owner 0: built by hand (``python -m tests.testbed up``) or by an older version: never "stale".
        if stale_only and (not bed.owner_pid or Path(f"/proc/{bed.owner_pid}").exists()):
            continue
        problems += [f"{bed.id}: {p}" for p in bed.teardown()]
    return problems
