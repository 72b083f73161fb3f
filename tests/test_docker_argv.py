"""The docker runtime's exact argument lists (no Docker engine is needed: they are only built)."""

from __future__ import annotations

from typing import Any

import pytest

from sparktui.commands.start import print_plan
from sparktui.config import SparkConfig, parse_config
from sparktui.domain.events import EngineState
from sparktui.domain.lifecycle import argv as A
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle.discovery import Discovery
from sparktui.domain.lifecycle.preflight import DockerContainer
from sparktui.domain.lifecycle.ray_state import Readiness


def two_sparks(**engine: Any) -> SparkConfig:
    return parse_config({
        "nodes": [
            {"name": "spark1", "host": "spark1", "role": "head", "ip": "192.168.100.10"},
            {"name": "spark2", "host": "spark2", "ip": "192.168.100.11"},
        ],
        "engine": {
            "runtime": "docker", "image": "nvcr.io/nvidia/vllm:25.11-py3", "model": "/models/Qwen3-FP8",
            "served_model_name": "qwen", "extra_args": ["--max-model-len", "32768"],
            "mounts": [{"source": "~/models", "target": "/models", "read_only": True},
                       {"source": "~/.cache/huggingface", "target": "/root/.cache/huggingface",
                        "read_only": False}],
            "env": {"NCCL_SOCKET_IFNAME": "enp1s0f1np1", "RAY_memory_monitor_refresh_ms": "0"},
            **engine,
        },
    })


HOMES = {"spark1": "/home/aurora", "spark2": "/home/aurora"}


def test_docker_run_of_the_worker_is_exact() -> None:
    plan = P.build_start_plan(two_sparks(), HOMES)
    run = next(s for s in plan.steps if s.name == "container" and s.node == "spark2")
    assert list(run.argv) == [
        "docker", "run", "-d", "--name", "sparktui-ray-spark2", "--init",
        "--network", "host", "--ipc", "host", "--gpus", "all", "--shm-size", "10.24g",
        "--device", "/dev/infiniband", "--cap-add", "IPC_LOCK", "--ulimit", "memlock=-1",
        "--ulimit", "stack=67108864",
        "--label", "sparktui.tag=sparktui/spark2",
        "-v", "/home/aurora/models:/models:ro",
        "-v", "/home/aurora/.cache/huggingface:/root/.cache/huggingface",
        "-v", "/home/aurora/.cache/vllm:/root/.cache/vllm",
        "-v", "/home/aurora/.triton:/root/.triton",
        "-v", "/home/aurora/.cache/flashinfer:/root/.cache/flashinfer",
        "-v", "/home/aurora/.local/state/sparktui:/home/aurora/.local/state/sparktui",
        "-v", "/home/aurora/.local/state/sparktui/ray:/tmp/ray",
        "-e", "NCCL_DEBUG=INFO",
        "-e", "NCCL_SOCKET_IFNAME=enp1s0f1np1", "-e", "RAY_memory_monitor_refresh_ms=0",
        "-e", "VLLM_HOST_IP=192.168.100.11", "-e", "MASTER_ADDR=192.168.100.10",
        "-e", "SPARKTUI_TAG=sparktui/spark2",
        "--entrypoint", "sleep", "nvcr.io/nvidia/vllm:25.11-py3", "infinity",
    ]


def test_head_container_is_named_head_and_rdma_flags_follow_the_node() -> None:
    plan = P.build_start_plan(two_sparks(), HOMES, rdma={"spark1": False, "spark2": True})
    head = next(s for s in plan.steps if s.name == "container" and s.node == "spark1")
    assert head.argv[head.argv.index("--name") + 1] == "sparktui-ray-head"
    assert "/dev/infiniband" not in head.argv and "IPC_LOCK" not in head.argv
    assert "-e" in head.argv and "VLLM_HOST_IP=192.168.100.10" in head.argv


def test_ray_and_vllm_run_through_docker_exec() -> None:
    plan = P.build_start_plan(two_sparks(name_prefix="lab"), HOMES)
    head = next(s for s in plan.steps if s.name == "ray start (head)")
    assert list(head.argv[:3]) == ["docker", "exec", "lab-ray-head"]
    assert list(head.argv[3:7]) == ["timeout", "-k", "5", "90"]
    assert list(head.argv[7:]) == ["ray", "start", "--head", "--node-ip-address", "192.168.100.10",
                                   "--port", "6379", "--disable-usage-stats",
                                   "--object-store-memory", str(4 * 1024**3)]
    worker = next(s for s in plan.steps if s.name == "ray start (worker)")
    assert list(worker.argv[:3]) == ["docker", "exec", "lab-ray-spark2"]
    # (through the join script under the container's python3: see test_lifecycle_plan)
    assert list(worker.argv[7:9]) == ["python3", "-c"]
    assert list(worker.argv[14:]) == ["ray", "start", "--address", "192.168.100.10:6379",
                                     "--node-ip-address", "192.168.100.11", "--disable-usage-stats",
                                     "--object-store-memory", str(4 * 1024**3)]
    serve = next(s for s in plan.steps if s.name == "vllm serve")
    # On the host first: the earlier runs' logs kept (bounded), the run stamped; then the detach, exec'd.
    keep, detach = list(serve.argv[:serve.argv.index("--")]), list(serve.argv[serve.argv.index("--") + 1:])
    assert keep[3:] == ["keep", "/home/aurora/.local/state/sparktui", "vllm.log", "10", str(500 * 1024**2)]
    assert list(detach[:5]) == ["docker", "exec", "lab-ray-head", "sh", "-c"]
    tail = list(detach[6:])
    assert tail[:4] == ["sparktui-detach", "/home/aurora/.local/state/sparktui", "vllm.log", "vllm.pid"]
    assert tail[4:] == ["vllm", "serve", "/models/Qwen3-FP8", "--tensor-parallel-size", "2",
                        "--distributed-executor-backend", "ray", "--port", "8000",
                        "--served-model-name", "qwen", "--max-model-len", "32768"]


def test_docker_exec_rm_ps_inspect_builders() -> None:
    assert A.docker_exec("c", ["ray", "stop"]) == ["docker", "exec", "c", "ray", "stop"]
    assert A.docker_exec("c", ["x"], env={"A": "1"}, detach=True, interactive=True) == [
        "docker", "exec", "-d", "-i", "-e", "A=1", "c", "x"]
    assert A.docker_rm(["a", "b"]) == ["docker", "rm", "-f", "a", "b"]
    assert A.docker_ps("sparktui") == ["docker", "ps", "-a", "--no-trunc", "--filter", "name=sparktui-",
                                       "--format", "{{.Names}}\t{{.ID}}\t{{.State}}\t{{.Status}}"]
    assert A.docker_image_id("img:1") == ["docker", "image", "inspect", "--format", "{{.Id}}", "img:1"]
    assert A.docker_run_once("img:1", ["vllm", "--version"]) == [
        "docker", "run", "--rm", "--network", "none", "--entrypoint", "vllm", "img:1", "--version"]


def test_stop_plan_for_docker_stops_vllm_then_ray_then_removes_containers_then_verifies() -> None:
    plan = P.build_stop_plan(two_sparks(), HOMES)
    assert [p.name for p in plan.phases] == ["stop vLLM", "stop Ray on every node", "remove our containers",
                                             "verify nothing of ours remains"]
    ray_stop = plan.phases[1].steps[0]
    assert list(ray_stop.argv) == ["docker", "exec", "sparktui-ray-head", "ray", "stop"]
    assert list(ray_stop.fallback) == ["docker", "exec", "sparktui-ray-head", "ray", "stop", "--force"]
    assert "No such container" in ray_stop.ok_if_output
    rm = plan.phases[2].steps[1]
    assert list(rm.argv) == ["docker", "rm", "-f", "sparktui-ray-spark2"]
    verify = plan.phases[3].steps[0]
    assert verify.also and verify.also[0][:2] == ("docker", "ps")


def test_config_values_never_reach_a_shell_unquoted() -> None:
    # A hostile value stays one argv word; the scripts take it as a positional argument.
    cfg = two_sparks(model="/models/x; rm -rf /", served_model_name="$(reboot)")
    plan = P.build_start_plan(cfg, HOMES)
    serve = next(s for s in plan.steps if s.name == "vllm serve")
    assert "/models/x; rm -rf /" in serve.argv and "$(reboot)" in serve.argv
    script = serve.argv[serve.argv.index("-c") + 1]
    assert "rm -rf" not in script and "reboot" not in script


def _volumes(argv: tuple[str, ...]) -> list[str]:
    return [argv[i + 1] for i, w in enumerate(argv) if w == "-v"]


def test_cache_mounts_change_or_go() -> None:
    moved = two_sparks(cache_mounts=[{"source": "/data/vllm-cache", "target": "/root/.cache/vllm"}])
    run = next(s for s in P.build_start_plan(moved, HOMES).steps if s.name == "container")
    vols = _volumes(run.argv)
    assert "/data/vllm-cache:/root/.cache/vllm" in vols
    assert not any(".triton" in v or "flashinfer" in v for v in vols)
    none = two_sparks(cache_mounts=[])
    run = next(s for s in P.build_start_plan(none, HOMES).steps if s.name == "container")
    assert not any("/root/.cache/vllm" in v for v in _volumes(run.argv))
    # A target that engine.mounts gives already is that mount's (docker refuses two at one point).
    own = two_sparks(mounts=[{"source": "/fast/vllm", "target": "/root/.cache/vllm", "read_only": False}])
    run = next(s for s in P.build_start_plan(own, HOMES).steps if s.name == "container")
    at_root = [v for v in _volumes(run.argv) if v.endswith(":/root/.cache/vllm")]
    assert at_root == ["/fast/vllm:/root/.cache/vllm"]


def _healthy(**changes: object) -> Discovery:
    base: dict[str, object] = {
        "state": EngineState.STARTING, "detail": "vLLM running",
        "containers": {"spark1": (DockerContainer("sparktui-ray-head", "a", "running"),),
                       "spark2": (DockerContainer("sparktui-ray-spark2", "b", "running"),)},
        "ray_readiness": Readiness(True, "2/2 nodes, 2/2 GPUs"),
    }
    base.update(changes)
    return Discovery(**base)  # type: ignore[arg-type]


def test_vllm_restart_keeps_ray_only_when_healthy() -> None:
    cfg = two_sparks(restart="vllm")
    assert P.keep_ray_problem(cfg, _healthy()) is None
    assert P.keep_ray_problem(cfg, _healthy(unreachable={"spark2": "refused"})) == "cannot reach spark2"
    gone = _healthy(containers={"spark1": (DockerContainer("sparktui-ray-head", "a", "running"),)})
    assert P.keep_ray_problem(cfg, gone) == "no engine container on spark2"
    exited = _healthy(containers={"spark1": (DockerContainer("sparktui-ray-head", "a", "running"),),
                                  "spark2": (DockerContainer("sparktui-ray-spark2", "b", "exited"),)})
    assert P.keep_ray_problem(cfg, exited) == "container sparktui-ray-spark2 on spark2 is exited"
    short = _healthy(ray_readiness=Readiness(False, "spark2 (192.168.100.11) is not in Ray"))
    assert P.keep_ray_problem(cfg, short) == "Ray: spark2 (192.168.100.11) is not in Ray"
    assert P.keep_ray_problem(cfg, _healthy(ray_readiness=None)) == "Ray does not answer on the head"


def test_vllm_restart_plan_stops_and_serves_vllm_and_leaves_ray_and_containers() -> None:
    plan = P.build_vllm_restart_plan(two_sparks(restart="vllm"), HOMES)
    assert [p.name for p in plan.phases] == ["stop vLLM", "vllm serve (detached)"]
    words = [w for s in plan.steps for w in s.argv]
    assert "run" not in words and "rm" not in words and "start" not in words and "stop" not in words
    stop = plan.phases[0].steps[0]
    assert stop == P.build_stop_plan(two_sparks(), HOMES).phases[0].steps[0]
    start = P.build_start_plan(two_sparks(), HOMES)
    assert plan.phases[1].steps == start.phases[-1].steps


def test_restart_dry_run_shows_the_vllm_only_plan_then_the_full_one(
        capsys: pytest.CaptureFixture[str]) -> None:
    print_plan(two_sparks(restart="vllm"), "restart")
    text = capsys.readouterr().out
    only = text.index("# sparktui restart: 2 step(s) in 2 phase(s)")
    otherwise = text.index("# otherwise (the reason is said) the full restart:")
    assert only < otherwise < text.index("# sparktui stop")
    assert "docker exec sparktui-ray-head sh -c '<detach.sh>'" in text
