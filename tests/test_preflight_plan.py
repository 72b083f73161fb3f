"""Preflight as a plan of data (pure), and the plan runner's relations between steps that it uses (run
here with LocalTransport and plain shell commands): a step ``after`` a failed one neither runs nor shows,
a step gated by a failed one shows as skipped with its reason, a row-less step runs unseen, rows listed as
their steps start."""

from __future__ import annotations

from typing import Any

from sparktui.config import SparkConfig, parse_config
from sparktui.domain.events import StepStatus, StepView
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle.plan import Phase, Plan, Step, StepKind
from sparktui.domain.lifecycle.preflight_plan import DOCKER_UNUSABLE, build_preflight_plan
from sparktui.remote.engine_nodes import EngineNodes
from sparktui.remote.plan_runner import PlanRunner, Tracker
from sparktui.remote.ray_queries import RayQueries
from sparktui.remote.transport import LocalTransport


def config(runtime: str = "host", **engine: Any) -> SparkConfig:
    return parse_config({
        "nodes": [{"name": "a", "host": "10.0.0.1", "role": "head", "python": "/venv/bin/python"},
                  {"name": "b", "host": "10.0.0.2"}],
        "engine": {"runtime": runtime, "model": "/models/m", "vllm_command": ["/venv/bin/vllm"],
                   "image": "vllm:test", **engine},
    })


def test_host_preflight_plan_every_node_after_reachable_the_head_also_reads_flags_and_model() -> None:
    plan = build_preflight_plan(config())
    assert plan.kind == "preflight" and len(plan.phases) == 1 and plan.list_when_run
    by_node: dict[str | None, list[Step]] = {}
    for s in plan.steps:
        by_node.setdefault(s.node, []).append(s)
    assert [s.name for s in by_node["a"]] == ["reachable", "node facts", "link facts", "vLLM version", "GPUs",
                                             "audit facts", "vLLM help", "model for sizing"]
    assert [s.name for s in by_node["b"]] == ["reachable", "node facts", "link facts", "vLLM version", "GPUs",
                                             "audit facts"]
    for s in plan.steps:
        assert s.after == (() if s.kind is StepKind.REACH else ("reachable",)) and s.gated_by == ()
    assert {s.name for s in plan.steps if not s.shown} == {"link facts", "model for sizing", "audit facts"}
    audit = by_node["b"][5]
    # One round trip on a host runtime: the node's files and addresses, and the engine's env, together.
    assert audit.kind is StepKind.AUDIT and audit.also == () and '"engine"' in audit.argv[-1]
    assert '"peers": ["10.0.0.1"]' in audit.argv[-1] and '"path": "/models/m"' in audit.argv[-1]
    version = by_node["b"][3]
    assert version.argv == ("/venv/bin/vllm", "--version")
    facts = by_node["a"][1]
    assert facts.argv[:2] == ("/venv/bin/python", "-c") and '"model_path": "/models/m"' in facts.argv[3]
    help_step = by_node["a"][6]
    assert help_step.argv[-1] == "--help=all" and help_step.fallback[-1] == "--help"


def test_docker_preflight_plan_asks_vllm_only_once_docker_and_the_image_are_there() -> None:
    plan = build_preflight_plan(config("docker"))
    steps = {(s.node, s.name): s for s in plan.steps}
    docker = steps[("b", "docker")]
    assert docker.argv == ("docker", "version", "--format", "{{.Server.Version}}")
    assert docker.also[0][-1] == "vllm:test" and docker.also[1][:2] == ("docker", "ps")
    version = steps[("b", "vLLM version")]
    assert version.gated_by == ("docker",) and version.gate_message == DOCKER_UNUSABLE
    assert version.argv[:3] == ("docker", "run", "--rm") and "vllm:test" in version.argv
    assert steps[("a", "vLLM help")].gated_by == ("docker",)
    assert steps[("b", "GPUs")].gated_by == () and "--gpus" in steps[("b", "GPUs")].argv
    # The node's files on the node; the engine's environment and libnccl inside the image (once it is there).
    audit = steps[("b", "audit facts")]
    assert audit.gated_by == ("docker",) and '"image": "vllm:test"' in audit.argv[-1]
    assert audit.also[0][:3] == ("docker", "run", "--rm") and "vllm:test" in audit.also[0]
    assert '"engine"' in audit.also[0][-1] and '"engine"' not in audit.argv[-1]


def sh(name: str, node: str, script: str, **kw: Any) -> Step:
    return Step(name, node, ("sh", "-c", script), 20.0, **kw)


async def test_after_gated_and_rowless_steps_rows_listed_as_they_start() -> None:
    cfg = parse_config({"nodes": [{"name": "a", "host": "localhost", "local": True, "role": "head"},
                                  {"name": "b", "host": "localhost", "local": True}],
                        "engine": {"runtime": "host", "model": "m"}})
    nodes = EngineNodes(cfg, {"a": LocalTransport("a"), "b": LocalTransport("b")})
    for t in nodes.transports.values():
        await t.connect()
    runner = PlanRunner(nodes, RayQueries(nodes))
    plan = Plan("preflight", (Phase("all", (
        sh("reach", "a", "exit 2"), sh("facts", "a", "echo never", after=("reach",)),
        sh("reach", "b", "true"), sh("docker", "b", "echo gone >&2; exit 1", after=("reach",)),
        sh("version", "b", "echo never", after=("reach",), gated_by=("docker",), gate_message="no docker"),
        sh("quiet", "b", "echo unseen", after=("reach",), shown=False),
        sh("late", "b", "sleep 0.3; echo late", after=("reach",)),
    )),), list_when_run=True, row_prefix="pre: ")
    seen: list[int] = []
    tracker = Tracker("preflight", lambda v: seen.append(len(v.steps)))
    done: list[StepView] = []
    failed = await runner.run_plan(tracker, plan, stop_on_failure=False, on_done=done.append)
    rows = {(s.node, s.name): s for s in tracker.view.steps}
    assert set(rows) == {("a", "pre: reach"), ("b", "pre: reach"), ("b", "pre: docker"),
                         ("b", "pre: version"), ("b", "pre: late")}
    assert rows[("a", "pre: reach")].message == "exit 2"
    assert rows[("b", "pre: docker")].status is StepStatus.FAILED
    assert rows[("b", "pre: version")].status is StepStatus.SKIPPED
    assert rows[("b", "pre: version")].message == "no docker"
    assert rows[("b", "pre: late")].message == "late"
    assert seen[0] == 0 and max(seen) == 5  # nothing listed before it started
    assert failed is not None and failed.status is StepStatus.FAILED
    assert sorted((v.node, v.name) for v in done) == sorted((n, name[5:]) for n, name in rows)


def test_start_plan_steps_keep_their_defaults() -> None:
    plan = P.build_start_plan(config())
    assert all(s.after == () and s.gated_by == () and s.shown for s in plan.steps)
    assert not plan.list_when_run and plan.row_prefix == ""
