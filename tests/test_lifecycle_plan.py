"""Start and stop plans for the host runtime and both executors (pure)."""

from __future__ import annotations

from typing import Any

from sparktui.config import SparkConfig, parse_config
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle.gcs_wait import GCS_STEP, RAY_JOIN_PY
from sparktui.domain.lifecycle.plan import StepKind


def host_config(gpus: int = 1, **engine: Any) -> SparkConfig:
    return parse_config({
        "nodes": [
            {"name": "a", "host": "10.0.0.1", "role": "head", "python": "/venv/bin/python", "gpus": gpus},
            {"name": "b", "host": "10.0.0.2", "gpus": gpus},
            {"name": "c", "host": "10.0.0.3", "gpus": gpus},
        ],
        "engine": {"runtime": "host", "model": "org/model", "tensor_parallel_size": 3,
                   "ray_command": ["/venv/bin/ray"], "vllm_command": ["/venv/bin/vllm"],
                   "state_dir": "~/state", "env": {"X": "1"}, **engine},
    })


def test_host_start_plan_phases_and_environment() -> None:
    plan = P.build_start_plan(host_config(ray_start_args=["--num-gpus", "1", "--include-dashboard=false",
                                                          "--temp-dir", "/tmp/r"]))
    assert [p.name for p in plan.phases] == ["Ray head", "Ray workers; wait for every node and GPU in Ray",
                                             "vllm serve (detached)"]
    head = plan.phases[0].steps[0]
    assert list(head.argv[:7]) == ["env", "NCCL_DEBUG=INFO", "X=1", "VLLM_HOST_IP=10.0.0.1",
                                   "MASTER_ADDR=10.0.0.1", "SPARKTUI_TAG=sparktui/a", "timeout"]
    assert head.argv[-5:] == ("--disable-usage-stats", "--num-gpus", "1", "--include-dashboard=false",
                              "--temp-dir", "/tmp/r")[-5:]
    *workers, wait = plan.phases[1].steps
    assert [w.node for w in workers] == ["b", "c"]
    # head-only options are not passed to workers
    assert "--include-dashboard=false" not in workers[0].argv and "--temp-dir" not in workers[0].argv
    assert "/tmp/r" not in workers[0].argv and "--num-gpus" in workers[0].argv
    assert "VLLM_HOST_IP=10.0.0.2" in workers[0].argv and "MASTER_ADDR=10.0.0.1" in workers[0].argv
    assert wait.kind is StepKind.WAIT_RAY and [e.name for e in wait.expected] == ["a", "b", "c"]
    assert all(e.gpus == 1 for e in wait.expected)
    serve = plan.phases[2].steps[0]
    assert serve.kind is StepKind.DETACH and serve.argv[serve.argv.index("sparktui-detach") + 1] == "~/state"
    assert P.ray_temp_dir(host_config(ray_start_args=["--temp-dir=/x"])) == "/x"


def test_homes_expand_the_state_dir() -> None:
    plan = P.build_start_plan(host_config(), homes={"a": "/home/u"})
    serve = plan.phases[-1].steps[0]
    assert "/home/u/state" in serve.argv


def test_mp_executor_runs_vllm_on_every_node_without_ray() -> None:
    plan = P.build_start_plan(host_config(executor="mp", master_port=29501))
    assert [p.name for p in plan.phases] == ["vllm serve (detached)"]
    steps = plan.phases[0].steps
    assert [s.node for s in steps] == ["c", "b", "a"]  # headless ranks first
    by_node = {s.node: list(s.argv) for s in steps}
    head = by_node["a"][by_node["a"].index("/venv/bin/vllm"):]
    assert head == ["/venv/bin/vllm", "serve", "org/model", "--tensor-parallel-size", "3",
                    "--nnodes", "3", "--node-rank", "0", "--master-addr", "10.0.0.1",
                    "--master-port", "29501", "--port", "8000"]
    rank2 = by_node["c"][by_node["c"].index("/venv/bin/vllm"):]
    assert rank2 == ["/venv/bin/vllm", "serve", "org/model", "--tensor-parallel-size", "3",
                     "--nnodes", "3", "--node-rank", "2", "--master-addr", "10.0.0.1",
                     "--master-port", "29501", "--headless"]
    stop = P.build_stop_plan(host_config(executor="mp"))
    assert [s.node for s in stop.phases[0].steps] == ["a", "b", "c"]


def test_host_stop_plan_kills_only_tagged_processes() -> None:
    plan = P.build_stop_plan(host_config(stop_grace=2.5))
    assert [p.name for p in plan.phases] == ["stop vLLM", "stop Ray on every node",
                                             "verify nothing of ours remains"]
    stop_vllm = plan.phases[0].steps[0]
    assert stop_vllm.argv[-4:] == ("~/state", "vllm.pid", "sparktui/a", "25")
    ray = plan.phases[1].steps
    assert all(s.kind is StepKind.STOP_TAGGED for s in ray)
    assert ray[1].argv[0] == "python3" and ray[1].argv[-3:] == ("stop", "sparktui/b", "2.5")
    assert "ray" not in " ".join(ray[0].argv[3:])  # never `ray stop`: it would kill other users' Ray
    assert all(s.kind is StepKind.VERIFY for s in plan.phases[2].steps)


def test_plan_renders_for_dry_run() -> None:
    text = P.build_start_plan(host_config()).render()
    assert "1. Ray head" in text and "<detach.sh>" in text and "<ray-probe.py>" in text
    assert "--distributed-executor-backend ray" in text
    assert "[b] ray start (worker)" in text


def test_expected_gpus_split_tp_times_pp_over_nodes() -> None:
    cfg = host_config(gpus=2, tensor_parallel_size=2, pipeline_parallel_size=3)
    assert [e.gpus for e in P.expected_nodes(cfg)] == [2.0, 2.0, 2.0]


def test_workers_join_when_the_head_node_is_in_the_gcs_with_rays_cli_imported_meanwhile() -> None:
    """A worker's `ray start` goes out when the head's GCS port answers and waits there for the head's node
    (Ray's CLI run in-process by the join script under `ray_python`); with a `ray_command` of the config's
    own (a wrapper the script cannot run in-process) the head's wait includes the head's node instead."""
    plan = P.build_start_plan(host_config(ray_python=["/venv/bin/python"]))
    gcs = next(s for s in plan.phases[0].steps if s.name == GCS_STEP)
    assert gcs.argv[-1] != "head"
    worker = plan.phases[1].steps[0]
    at = worker.argv.index(RAY_JOIN_PY)
    assert worker.argv[at - 2 : at] == ("/venv/bin/python", "-c")
    assert worker.argv[at + 1 : at + 3] == ("10.0.0.1", "6379")
    assert worker.argv[at + 5 : at + 8] == ("/venv/bin/ray", "start", "--address")

    wrapped = P.build_start_plan(host_config(ray_command=["/opt/ray-wrapper", "--quiet"]))
    gcs = next(s for s in wrapped.phases[0].steps if s.name == GCS_STEP)
    assert gcs.argv[-1] == "head"
    worker = wrapped.phases[1].steps[0]
    assert RAY_JOIN_PY not in worker.argv and "/opt/ray-wrapper" in worker.argv
    serial = P.build_start_plan(host_config(), early_workers=False)
    assert RAY_JOIN_PY not in serial.phases[1].steps[0].argv
