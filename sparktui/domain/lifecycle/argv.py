"""Argument lists for every command the lifecycle runs: docker, ray, vllm (pure; no I/O).

Every builder returns a list of words. Nothing here is ever joined into a shell string except by the
transport's ``shlex.join``, so a config value can never be interpreted by a shell on a node.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: Environment variable carried by every process sparktui starts on a node (Ray daemons and their
#: workers inherit it, vLLM too). Stop, verify and preflight find *our* processes by it and only those,
#: so a Ray cluster of another user on the same host is never touched.
TAG_ENV = "SPARKTUI_TAG"

#: Log and pid file names inside ``engine.state_dir``.
VLLM_LOG = "vllm.log"
VLLM_PID = "vllm.pid"


def node_tag(prefix: str, node_name: str) -> str:
    """The tag value of one node's processes (per node: test hosts may share one process table)."""
    return f"{prefix}/{node_name}"


def container_name(prefix: str, node_name: str, is_head: bool) -> str:
    """``<prefix>-ray-head`` / ``<prefix>-ray-<node>``; a node name Docker would refuse (a space, ``é``)
    becomes its safe characters plus a short hash of the whole name, so two nodes never share one."""
    if is_head:
        return f"{prefix}-ray-head"
    if re.fullmatch(r"[A-Za-z0-9_.-]+", node_name):
        return f"{prefix}-ray-{node_name}"
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", node_name)
    digest = hashlib.sha1(node_name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{prefix}-ray-{safe}-{digest}"


@dataclass(frozen=True)
class BindMount:
    source: str
    target: str
    read_only: bool = True

    def volume_arg(self) -> str:
        return f"{self.source}:{self.target}" + (":ro" if self.read_only else "")


# ---- docker -----------------------------------------------------------------------------------------
def docker_run(
    *,
    name: str,
    image: str,
    shm_size: str,
    mounts: Sequence[BindMount] = (),
    env: Mapping[str, str] | None = None,
    rdma: bool = True,
    labels: Mapping[str, str] | None = None,
) -> list[str]:
    """An idle, named engine container; Ray and vLLM are started in it with ``docker exec``.

    Flags follow NVIDIA's ``run_cluster.sh`` (host network, ``--gpus all``, ``--shm-size``, the model
    cache mounted, the NCCL/UCX environment block) plus what that script lacks for RoCE: the RDMA
    devices, ``IPC_LOCK`` and an unlimited memlock so NCCL can register memory (the
    docker runtime section of docs/lifecycle.md).
    The container idles (``sleep infinity`` under ``--init``, which reaps orphans) instead of running
    ``ray start --block`` in the foreground, so no terminal has to stay open.
    """
    argv = [
        "docker", "run", "-d",
        "--name", name,
        "--init",
        "--network", "host",
        "--ipc", "host",
        "--gpus", "all",
        "--shm-size", shm_size,
    ]
    if rdma:
        argv += [
            "--device", "/dev/infiniband",
            "--cap-add", "IPC_LOCK",
            "--ulimit", "memlock=-1",
            "--ulimit", "stack=67108864",
        ]
    for key, value in (labels or {}).items():
        argv += ["--label", f"{key}={value}"]
    for mount in mounts:
        argv += ["-v", mount.volume_arg()]
    for key, value in (env or {}).items():
        argv += ["-e", f"{key}={value}"]
    argv += ["--entrypoint", "sleep", image, "infinity"]
    return argv


def docker_exec(
    name: str,
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    detach: bool = False,
    interactive: bool = False,
) -> list[str]:
    out = ["docker", "exec"]
    if detach:
        out.append("-d")
    if interactive:
        out.append("-i")
    for key, value in (env or {}).items():
        out += ["-e", f"{key}={value}"]
    return [*out, name, *argv]


def docker_rm(names: Sequence[str]) -> list[str]:
    """Remove containers, running or not (SIGKILL); ``docker rm -f`` of a missing name is harmless."""
    return ["docker", "rm", "-f", *names]


def docker_ps(prefix: str) -> list[str]:
    """Every container (running or exited) named like ``<prefix>-``; the caller filters exactly."""
    return ["docker", "ps", "-a", "--no-trunc", "--filter", f"name={prefix}-",
            "--format", "{{.Names}}\t{{.ID}}\t{{.State}}\t{{.Status}}"]


def docker_image_id(image: str) -> list[str]:
    return ["docker", "image", "inspect", "--format", "{{.Id}}", image]


def docker_version() -> list[str]:
    return ["docker", "version", "--format", "{{.Server.Version}}"]


def docker_run_once(image: str, argv: Sequence[str]) -> list[str]:
    """Run one command in a throw-away container of ``image`` (``vllm --version`` before any start)."""
    return ["docker", "run", "--rm", "--network", "none", "--entrypoint", argv[0], image, *argv[1:]]


# ---- ray --------------------------------------------------------------------------------------------
def ray_start_head(ray: Sequence[str], ip: str, port: int, extra: Sequence[str] = ()) -> list[str]:
    return [*ray, "start", "--head", "--node-ip-address", ip, "--port", str(port),
            "--disable-usage-stats", *extra]


def ray_start_worker(
    ray: Sequence[str], head_ip: str, port: int, ip: str, extra: Sequence[str] = ()
) -> list[str]:
    return [*ray, "start", "--address", f"{head_ip}:{port}", "--node-ip-address", ip,
            "--disable-usage-stats", *extra]


def ray_stop(ray: Sequence[str], force: bool = False) -> list[str]:
    return [*ray, "stop", *(["--force"] if force else [])]


def ray_status(ray: Sequence[str], head_ip: str, port: int) -> list[str]:
    return [*ray, "status", "--address", f"{head_ip}:{port}"]


# ---- vllm -------------------------------------------------------------------------------------------
def vllm_serve(
    vllm: Sequence[str],
    *,
    model: str,
    tensor_parallel_size: int,
    pipeline_parallel_size: int = 1,
    api_port: int,
    served_model_name: str | None = None,
    executor: str = "ray",
    nnodes: int = 1,
    node_rank: int = 0,
    master_addr: str | None = None,
    master_port: int | None = None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """``vllm serve`` for one node. ``executor="ray"``: the head only; ``"mp"``: one per node, rank > 0
    headless (vLLM's own multi-node mode, no Ray)."""
    argv = [*vllm, "serve", model, "--tensor-parallel-size", str(tensor_parallel_size)]
    if pipeline_parallel_size > 1:
        argv += ["--pipeline-parallel-size", str(pipeline_parallel_size)]
    if executor == "ray":
        argv += ["--distributed-executor-backend", "ray"]
    elif executor == "mp":
        if master_addr is None or master_port is None:
            raise ValueError("executor mp needs master_addr and master_port")
        argv += ["--nnodes", str(nnodes), "--node-rank", str(node_rank),
                 "--master-addr", master_addr, "--master-port", str(master_port)]
        if node_rank > 0:
            argv.append("--headless")
    else:
        raise ValueError(f"unknown executor {executor!r}")
    if node_rank == 0:
        argv += ["--port", str(api_port)]
        if served_model_name:
            argv += ["--served-model-name", served_model_name]
    return [*argv, *extra_args]


def vllm_version(vllm: Sequence[str]) -> list[str]:
    return [*vllm, "--version"]


def vllm_serve_help(vllm: Sequence[str], help_arg: str = "--help") -> list[str]:
    """``vllm serve --help``; ``help_arg="--help=all"`` lists every flag in vLLM ≥ 0.10 (grouped help)."""
    return [*vllm, "serve", help_arg]


def with_env(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """``env K=V … argv``: the environment travels as words, visible in ``--dry-run``."""
    if not env:
        return list(argv)
    return ["env", *(f"{k}={v}" for k, v in env.items()), *argv]


def expand_home(path: str, home: str | None) -> str:
    """``~`` / ``~/x`` → ``<home>/x`` when the node's home is known; otherwise unchanged."""
    if home is None:
        return path
    if path == "~":
        return home
    if path.startswith("~/"):
        return home.rstrip("/") + path[1:]
    return path
