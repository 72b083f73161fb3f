"""Lifecycle plans as data: which command runs on which node, in which order, judged how.

``build_start_plan`` / ``build_stop_plan`` are pure: the executor (``sparktui.remote.engine``) runs them,
``--dry-run`` prints them, and the UI lists their steps. Phases run one after another; the steps of a
phase run concurrently (one per node).
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from sparktui.config import NodeConfig, SparkConfig
from sparktui.domain.lifecycle import argv as A
from sparktui.domain.lifecycle import scripts as S
from sparktui.domain.lifecycle.discovery import Discovery
from sparktui.domain.lifecycle.gcs_wait import (
    GCS_STEP,
    GCS_WAIT_PY,
    RAY_JOIN_PY,
    gcs_wait_argv,
    is_plain_ray,
    ray_join_argv,
)
from sparktui.domain.lifecycle.ray_state import ExpectedNode
from sparktui.domain.lifecycle.ready_timeout import ReadyTimeout

#: ``ray start``'s success line (with exit status 0), the same in Ray 2.9 … 2.60.
RAY_STARTED = "Ray runtime started."

#: How often the Ray probe reports while sparktui waits for every node and GPU (≤ 1 s by design).
RAY_POLL_INTERVAL = 0.2


class StepKind(StrEnum):
    COMMAND = "command"          # ok when the exit status is in ok_codes (or output says "nothing to do")
    DETACH = "detach"            # DETACH_SH: ok when it printed "pid N"
    WAIT_RAY = "wait_ray"        # stream the Ray probe until every node and GPU is there
    STOP_TAGGED = "stop_tagged"  # TAGGED_PY stop: ok when nothing of ours is left
    VERIFY = "verify"            # TAGGED_PY list (+ docker ps): ok when nothing of ours remains
    # Preflight's gathering steps (``preflight_plan``), judged by the preflight executor:
    REACH = "reach"              # the transport connected, $HOME read
    FACTS = "facts"              # FACTS_PY: memory, RDMA, ports, leftovers, the model directory
    LINK = "link"                # LINK_PY: the cable (no row: the link checks judge it afterwards)
    DOCKER = "docker"            # docker version, the image's id (also), our containers (also)
    VLLM_VERSION = "vllm_version"
    VLLM_HELP = "vllm_help"      # `vllm serve --help=all`, the plain `--help` as fallback
    GPUS = "gpus"                # the GPU list command, judged against the node's share
    MODEL_INFO = "model_info"    # config.json + safetensors headers for sizing (no row)
    AUDIT = "audit"              # AUDIT_PY: files, mounts, engine env, libnccl, addresses (no row)


@dataclass(frozen=True)
class Step:
    name: str
    node: str | None
    argv: tuple[str, ...]
    timeout: float
    kind: StepKind = StepKind.COMMAND
    ok_codes: tuple[int, ...] = (0,)
    #: Output fragments that make a non-zero exit a success ("No such container" for an idempotent stop).
    ok_if_output: tuple[str, ...] = ()
    #: Run when ``argv`` fails (``ray stop --force`` after ``ray stop``).
    fallback: tuple[str, ...] = ()
    #: Extra commands of a VERIFY step (``docker ps``), judged by the executor.
    also: tuple[tuple[str, ...], ...] = ()
    #: A failure is shown as a warning and the plan goes on.
    tolerate_failure: bool = False
    #: What the step needs beyond its argv (WAIT_RAY: the nodes and GPUs expected).
    expected: tuple[ExpectedNode, ...] = ()
    #: Shown as the step's message when the output contains it (instead of the last output line).
    success_marker: str = ""
    #: Steps of the same node and phase that must succeed first; otherwise this one neither runs nor
    #: shows (preflight: nothing more is asked of a node that is not reachable).
    after: tuple[str, ...] = ()
    #: Steps of the same node and phase that must succeed first; otherwise this one is shown as skipped,
    #: with ``gate_message`` (the image's vLLM is asked only once docker and the image are there).
    gated_by: tuple[str, ...] = ()
    gate_message: str = ""
    #: Whether the step has a row of its own (a gathering step judged afterwards has none).
    shown: bool = True
    #: Steps of earlier phases (by name) left running by a ``done_when`` that this one waits for.
    after_lingering: tuple[str, ...] = ()
    #: What judges this step's effect later (a worker's `ray start`: Ray's node list on the head): a link
    #: that drops while it runs and is back within ``engine.link_grace_s`` does not fail it.
    judged_later: str = ""

    def render(self) -> str:
        where = self.node or "-"
        lines = [f"[{where}] {self.name}: {_show(self.argv)}"]
        if self.fallback:
            lines.append(f"[{where}]   if that fails: {_show(self.fallback)}")
        lines += [f"[{where}]   and: {_show(a)}" for a in self.also]
        return "\n".join(lines)


def _show(argv: Sequence[str]) -> str:
    """argv as one quoted line; the long constant scripts shown by name, not text."""
    words = list(argv)
    for i, w in enumerate(words):
        if w == "-c" and i + 1 < len(words) and "\n" in words[i + 1]:
            words[i + 1] = _script_name(words[i + 1])
    return shlex.join(words)


_SCRIPT_NAMES = {
    S.DETACH_SH: "<detach.sh>", S.STOP_DETACHED_SH: "<stop-detached.sh>",
    S.DETACHED_STATE_SH: "<detached-state.sh>", S.TAGGED_PY: "<tagged.py>", S.FACTS_PY: "<facts.py>",
    S.RAY_PROBE_PY: "<ray-probe.py>", S.FOLLOW_PY: "<follow.py>", S.RAY_LOGS_PY: "<ray-logs.py>",
    S.READ_PY: "<read.py>", S.DROP_CACHES_SH: "<drop-caches.sh>", S.LINK_PY: "<link.py>",
    S.LOCK_PY: "<lock.py>", S.RUN_LOGS_PY: "<run-logs.py>", GCS_WAIT_PY: "<gcs-wait.py>",
    RAY_JOIN_PY: "<ray-join.py>",
}


def _script_name(text: str) -> str:
    return _SCRIPT_NAMES.get(text, "<script>")


@dataclass(frozen=True)
class Phase:
    name: str
    steps: tuple[Step, ...]
    #: The phase is over as soon as this step succeeds; its other steps finish meanwhile (awaited at the
    #: end of the plan). The Ray wait ends the workers' phase: a registered worker's `ray start` command
    #: takes another second to exit, and `vllm serve` need not wait for that.
    done_when: str | None = None
    #: Steps of earlier phases (by name) that must have finished, and not failed, before this phase
    #: begins: ones a ``done_when`` left running (`vllm serve` waits for `ray start --head` to return).
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    kind: str
    phases: tuple[Phase, ...]
    notes: tuple[str, ...] = field(default=())
    #: Rows are listed as their steps start (preflight: many quick checks), not all up front.
    list_when_run: bool = False
    #: Put before each step's name in its row ("preflight: ").
    row_prefix: str = ""

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(s for p in self.phases for s in p.steps)

    def render(self) -> str:
        out = [f"# sparktui {self.kind}: {len(self.steps)} step(s) in {len(self.phases)} phase(s)"]
        out += [f"# {n}" for n in self.notes]
        for i, phase in enumerate(self.phases, 1):
            out.append(f"{i}. {phase.name}" + ("  (concurrently)" if len(phase.steps) > 1 else ""))
            out += ["   " + line for s in phase.steps for line in s.render().splitlines()]
        return "\n".join(out)


# ---- per-node runtime -----------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeRuntime:
    """How commands reach the engine's world on one node: in its container (docker) or directly (host)."""

    node: NodeConfig
    is_head: bool
    docker: bool
    container: str
    tag: str
    #: engine.env + VLLM_HOST_IP + MASTER_ADDR + the tag: the environment of everything we start.
    env: Mapping[str, str]

    def wrap(self, argv: Sequence[str], *, tagged: bool = False, interactive: bool = False) -> list[str]:
        """``argv`` in the runtime. ``tagged``: with the engine environment (host; the container has it)."""
        if self.docker:
            return A.docker_exec(self.container, argv, interactive=interactive)
        return A.with_env(argv, self.env) if tagged else list(argv)


#: Set in the engine environment unless ``engine.env`` says otherwise: NCCL's INFO lines name the
#: transport it chose (``NET/IB … RoCE`` or ``NET/Socket``), which the NCCL verdict reads from the log.
NCCL_DEFAULT_ENV: Mapping[str, str] = {"NCCL_DEBUG": "INFO"}


def runtimes(config: SparkConfig) -> dict[str, NodeRuntime]:
    e = config.engine
    head = config.head
    out = {}
    for node in config.nodes:
        tag = A.node_tag(e.name_prefix, node.name)
        env = {**NCCL_DEFAULT_ENV, **e.env, "VLLM_HOST_IP": node.address, "MASTER_ADDR": head.address,
               A.TAG_ENV: tag}
        out[node.name] = NodeRuntime(
            node=node, is_head=node is head, docker=e.runtime == "docker",
            container=A.container_name(e.name_prefix, node.name, node is head), tag=tag, env=env,
        )
    return out


def expected_nodes(config: SparkConfig) -> tuple[ExpectedNode, ...]:
    """Every node once, at its configured IP, with its share of the TP×PP GPUs."""
    total = config.engine.tensor_parallel_size * config.engine.pipeline_parallel_size
    per_node = total / len(config.nodes)
    per_node = float(math.ceil(per_node)) if per_node >= 1 else per_node
    return tuple(ExpectedNode(n.name, n.address, per_node) for n in config.nodes)


def state_dir(config: SparkConfig, homes: Mapping[str, str] | None, node: str) -> str:
    return A.expand_home(config.engine.state_dir, (homes or {}).get(node))


def vllm_log_path(config: SparkConfig, homes: Mapping[str, str] | None, node: str) -> str:
    """The vLLM log ``DETACH_SH`` writes on ``node`` (``~`` expanded when the node's home is known)."""
    return state_dir(config, homes, node).rstrip("/") + "/" + A.VLLM_LOG


def ray_temp_dir(config: SparkConfig) -> str:
    """Ray's temp dir on the nodes (``--temp-dir`` in ``engine.ray_start_args``, else ``/tmp/ray``)."""
    args = list(config.engine.ray_start_args)
    for i, a in enumerate(args):
        if a.startswith("--temp-dir="):
            return a.split("=", 1)[1]
        if a == "--temp-dir" and i + 1 < len(args):
            return args[i + 1]
    return "/tmp/ray"


#: ``ray start`` options that only the head accepts (a worker exits with a usage error).
HEAD_ONLY_RAY_ARGS = ("--temp-dir", "--include-dashboard", "--dashboard-host", "--dashboard-port",
                      "--ray-client-server-port", "--autoscaling-config", "--dashboard-agent-grpc-port")


#: Where the kernel takes ``echo 3`` to free the page cache.
DROP_CACHES_PATH = "/proc/sys/vm/drop_caches"


def object_store_args(config: SparkConfig) -> list[str]:
    """``--object-store-memory`` from ``engine.ray_object_store_memory`` unless ``ray_start_args`` has one
    (Ray's own default reserves ~30 % of a Spark's unified memory for the object store)."""
    size = int(config.engine.ray_object_store_memory)
    given = any(a.split("=", 1)[0] == "--object-store-memory" for a in config.engine.ray_start_args)
    return [] if given or size <= 0 else ["--object-store-memory", str(size)]


def _ray_args(config: SparkConfig, is_head: bool) -> tuple[str, ...]:
    """``ray start`` extras for one node: ``engine.ray_start_args`` less the head-only options on workers."""
    args = [*object_store_args(config), *config.engine.ray_start_args]
    if is_head:
        return tuple(args)
    out: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a.split("=", 1)[0] in HEAD_ONLY_RAY_ARGS:
            # "--opt value" form: drop the value too (unless the next word is an option).
            if "=" not in a and i < len(args) and not args[i].startswith("-"):
                i += 1
            continue
        out.append(a)
    return tuple(out)


def ray_log_root(config: SparkConfig, homes: Mapping[str, str] | None, node: str) -> str:
    """Ray's temp dir as seen on the node itself (for docker: the host side of its mount)."""
    if config.engine.runtime == "docker":
        return state_dir(config, homes, node).rstrip("/") + "/ray"
    return ray_temp_dir(config)


def mounts(config: SparkConfig, homes: Mapping[str, str] | None, node: str) -> list[A.BindMount]:
    home = (homes or {}).get(node)
    out = [A.BindMount(A.expand_home(m.source, home), m.target, m.read_only) for m in config.engine.mounts]
    # vLLM's compile caches on the node's disk (engine.cache_mounts): they outlive `docker rm -f`. A target
    # that engine.mounts already gives is left to that mount (docker refuses a duplicate mount point).
    taken = {m.target.rstrip("/") for m in out}
    out += [A.BindMount(A.expand_home(m.source, home), m.target, m.read_only)
            for m in config.engine.cache_mounts if m.target.rstrip("/") not in taken]
    # The state dir at the same path inside the container: vllm.log and vllm.pid are written there by the
    # process inside and read by sparktui on the host.
    sd = state_dir(config, homes, node)
    out.append(A.BindMount(sd, sd, read_only=False))
    # Ray's temp dir on the host too, so each node's Ray worker logs can be followed from outside.
    out.append(A.BindMount(ray_log_root(config, homes, node), ray_temp_dir(config), read_only=False))
    return out


# ---- vllm -----------------------------------------------------------------------------------------
def serve_argv(config: SparkConfig, rank: int) -> list[str]:
    e = config.engine
    return A.vllm_serve(
        e.vllm_command, model=e.model, tensor_parallel_size=e.tensor_parallel_size,
        pipeline_parallel_size=e.pipeline_parallel_size, api_port=e.api_port,
        served_model_name=e.served_model_name, executor=e.executor, nnodes=len(config.nodes),
        node_rank=rank, master_addr=config.head.address, master_port=e.master_port, extra_args=e.extra_args,
    )


def vllm_nodes(config: SparkConfig) -> list[NodeConfig]:
    """Where a ``vllm serve`` runs: the head (Ray executor) or every node, head first (mp)."""
    if config.engine.executor == "mp":
        return [config.head, *config.workers]
    return [config.head]


def detach_step(config: SparkConfig, rt: NodeRuntime, homes: Mapping[str, str] | None, rank: int,
                ready_timeout: ReadyTimeout | None = None) -> Step:
    sd = state_dir(config, homes, rt.node.name)
    serve = serve_argv(config, rank)
    if ready_timeout is not None:
        serve = A.with_env(serve, ready_timeout.env())
    argv = rt.wrap(["sh", "-c", S.DETACH_SH, "sparktui-detach", sd, A.VLLM_LOG, A.VLLM_PID, *serve],
                   tagged=True)
    # On the node itself (the state dir is the same path inside a container): the earlier runs' logs kept,
    # this run's start stamped, then the detach script exec'd.
    keep = run_logs_argv(config, rt.node, sd, "keep")
    return Step("vllm serve", rt.node.name, (*keep, "--", *argv), 30.0, StepKind.DETACH)


def run_logs_argv(config: SparkConfig, node: NodeConfig, folder: str, action: str) -> list[str]:
    """RUN_LOGS_PY on ``node``: ``keep`` (bounded by ``engine.keep_logs``/``keep_logs_mb``) or ``list``."""
    argv = [node.python, "-c", S.RUN_LOGS_PY, action, folder, A.VLLM_LOG]
    if action == "keep":
        e = config.engine
        argv += [str(e.keep_logs), str(int(e.keep_logs_mb * 1024 * 1024))]
    return argv


def detached_state_argv(config: SparkConfig, rt: NodeRuntime, homes: Mapping[str, str] | None) -> list[str]:
    """DETACHED_STATE_SH for vLLM on ``rt``'s node: running / exited / none, and the log's size."""
    sd = state_dir(config, homes, rt.node.name)
    return rt.wrap(["sh", "-c", S.DETACHED_STATE_SH, "sparktui-state", sd, A.VLLM_PID, rt.tag, A.VLLM_LOG])


def probe_argv(config: SparkConfig, rt: NodeRuntime, seconds: float,
               interval: float = RAY_POLL_INTERVAL, *, count: int | None = None,
               until_stdin_closes: bool = True, timeout: float | None = None,
               gcs: bool = False, changes: bool = False) -> list[str]:
    """The Ray probe on the head: a reading every ``interval`` s for about ``seconds`` s (or ``count``
    readings). ``gcs``: read from the GCS without joining as a driver (``sparktui/node/ray_probe.py``).
    ``changes``: a reading printed only when it changed, or ten seconds on (the watch while serving).

    ``until_stdin_closes`` (a streaming probe, started with ``Transport.start``): it ends with its channel
    (``docker exec -i`` carries the EOF into the container). ``timeout``: a one-shot probe is bounded by
    ``timeout`` inside the runtime — outside ``docker exec`` it would only kill the docker client.
    """
    head = config.head.address
    if count is None:
        count = max(1, int(seconds / interval) + 5)
    argv = [*config.engine.ray_python, "-c", S.RAY_PROBE_PY, f"{head}:{config.engine.ray_port}", head,
            str(interval), str(count)]
    if gcs:
        argv.append("gcs")
    if changes:
        argv.append("changes")   # a reading only when it changed (or ten seconds on): a watch
    if until_stdin_closes:
        argv.append("stdin")
    if timeout is not None:
        argv = ["timeout", "-k", "3", str(math.ceil(timeout)), *argv]
    return rt.wrap(argv, interactive=until_stdin_closes)


# ---- start ----------------------------------------------------------------------------------------
def build_start_plan(
    config: SparkConfig,
    homes: Mapping[str, str] | None = None,
    rdma: Mapping[str, bool] | None = None,
    *,
    early_workers: bool = True,
    ready_timeout: ReadyTimeout | None = None,
) -> Plan:
    """Containers (docker) → Ray head → Ray workers → wait for every node and GPU → ``vllm serve``.

    ``homes``: each node's $HOME (docker needs absolute mount sources); ``rdma``: whether a node has
    /dev/infiniband (docker passes the device only where it exists). ``early_workers`` (the default):
    the workers start as soon as the head's GCS port answers, not when `ray start --head` returns
    (``False``: the previous, serial way, kept for the benchmark's same-run comparison).
    ``ready_timeout``: how long vLLM waits for its engine, from the run history (``ready_timeout.py``).
    """
    e = config.engine
    rts = runtimes(config)
    head_rt = rts[config.head.name]
    phases: list[Phase] = []
    notes = [f"runtime {e.runtime}, executor {e.executor}, {len(config.nodes)} node(s), "
             f"TP {e.tensor_parallel_size} × PP {e.pipeline_parallel_size}"]
    if e.executor == "ray":
        store = object_store_args(config)
        notes.append(f"Ray object store {int(store[1]) / 1024**3:.1f} GiB per node "
                     "(engine.ray_object_store_memory)" if store
                     else "Ray object store as ray_start_args / Ray's default says")
    if e.drop_caches:
        phases.append(Phase("free the page cache (engine.drop_caches)", tuple(
            Step("drop caches", node.name, ("sh", "-c", S.DROP_CACHES_SH, "sh", DROP_CACHES_PATH), 60.0,
                 tolerate_failure=True)
            for node in config.nodes)))
    if e.runtime == "docker":
        steps = []
        for node in config.nodes:
            rt = rts[node.name]
            run = A.docker_run(
                name=rt.container, image=e.image, shm_size=e.shm_size,
                mounts=mounts(config, homes, node.name), env=rt.env,
                rdma=(rdma or {}).get(node.name, True), labels={"sparktui.tag": rt.tag},
            )
            steps.append(Step("container", node.name, tuple(run), 120.0))
        phases.append(Phase("start the engine containers", tuple(steps)))
    if e.executor == "ray":
        head = config.head
        start_head = A.ray_start_head(e.ray_command, head.address, e.ray_port, _ray_args(config, True))
        head_steps = [Step("ray start (head)", head.name,
                           tuple(head_rt.wrap(_timeout(start_head, 90), tagged=True)), 100.0,
                           success_marker=RAY_STARTED)]
        # Early workers wait for the head's node in the GCS themselves, Ray's CLI imported meanwhile (a
        # worker that finds none sleeps 2 s): only the plain `ray` can be run that way (gcs_wait.py).
        joined = early_workers and is_plain_ray(e.ray_command)
        if early_workers and config.workers:
            # On the head's host (host network in both runtimes): its GCS port, as the workers will dial it;
            # for workers that cannot wait themselves, until it lists the head's node too.
            head_steps.append(Step(GCS_STEP, head.name,
                                   tuple(gcs_wait_argv(head.python, head.address, e.ray_port, 90,
                                                       head_node=not joined)), 95.0,
                                   success_marker="gcs answered"))
        phases.append(Phase("Ray head", tuple(head_steps),
                            done_when=GCS_STEP if len(head_steps) > 1 else None))
        steps = []
        for node in config.workers:
            rt = rts[node.name]
            cmd = A.ray_start_worker(e.ray_command, head.address, e.ray_port, node.address,
                                     _ray_args(config, False))
            if joined:
                cmd = ray_join_argv(e.ray_python, head.address, e.ray_port, e.ray_wait_timeout, cmd)
            # `ray start --address` to an unreachable head retries for ~14 min (Ray 2.60): bound it.
            steps.append(Step("ray start (worker)", node.name,
                              tuple(rt.wrap(_timeout(cmd, e.ray_wait_timeout), tagged=True)),
                              e.ray_wait_timeout + 10, success_marker=RAY_STARTED,
                              judged_later="Ray's node list on the head"))
        # The probe joins the cluster while the workers start (its Python and `import ray` take a second or
        # two), so it sees the last node register within one poll interval; a failed worker start cancels it.
        probe = tuple(probe_argv(config, head_rt, e.ray_wait_timeout))
        # `ray.init` against a head whose raylet is not up yet may wait or fail: the probe starts once
        # `ray start --head` has returned (the workers do not wait for that).
        probe_after = ("ray start (head)",) if early_workers and config.workers else ()
        steps.append(Step("Ray nodes and GPUs", head.name, probe, e.ray_wait_timeout, StepKind.WAIT_RAY,
                          after_lingering=probe_after,
                          fallback=tuple(head_rt.wrap(_timeout(A.ray_status(e.ray_command, head.address,
                                                                            e.ray_port), 25))),
                          expected=expected_nodes(config)))
        phases.append(Phase("Ray workers; wait for every node and GPU in Ray", tuple(steps),
                            done_when="Ray nodes and GPUs"))
    steps = [detach_step(config, rts[n.name], homes, rank, ready_timeout)
             for rank, n in enumerate(vllm_nodes(config))]
    notes.extend(_ready_timeout_notes(ready_timeout))
    # mp: the headless ranks first, so rank 0 finds them when it rendezvous.
    after = ("ray start (head)",) if e.executor == "ray" and early_workers and config.workers else ()
    phases.append(Phase("vllm serve (detached)", tuple(reversed(steps)), after=after))
    return Plan("start", tuple(phases), tuple(notes))


def _timeout(argv: Sequence[str], seconds: float) -> list[str]:
    return ["timeout", "-k", "5", str(math.ceil(seconds)), *argv]


# ---- stop -----------------------------------------------------------------------------------------
_GONE = ("No such container", "is not running")


def build_stop_plan(config: SparkConfig, homes: Mapping[str, str] | None = None) -> Plan:
    """vLLM (SIGINT → SIGTERM → SIGKILL) → Ray on every node → our containers → verify nothing remains.

    Every step is idempotent: stopping what is not running succeeds.
    """
    e = config.engine
    rts = runtimes(config)
    phases: list[Phase] = [stop_vllm_phase(config, homes)]
    if e.executor == "ray" or e.runtime == "host":
        steps = []
        for node in config.nodes:
            rt = rts[node.name]
            if e.runtime == "docker":
                steps.append(Step("ray stop", node.name, tuple(rt.wrap(A.ray_stop(e.ray_command))), 60.0,
                                  ok_if_output=_GONE,
                                  fallback=tuple(rt.wrap(A.ray_stop(e.ray_command, force=True)))))
            else:
                # Not `ray stop`: it kills every Ray process on the host, other users' too. Our processes
                # carry our tag; TERM them, KILL what is left after the grace.
                argv = [node.python, "-c", S.TAGGED_PY, "stop", rt.tag, str(e.stop_grace)]
                steps.append(Step("stop Ray", node.name, tuple(argv), 2 * e.stop_grace + 15,
                                  StepKind.STOP_TAGGED))
        phases.append(Phase("stop Ray on every node", tuple(steps)))
    if e.runtime == "docker":
        steps = [Step("remove container", n.name, tuple(A.docker_rm([rts[n.name].container])), 60.0,
                      ok_if_output=("No such container",)) for n in config.nodes]
        phases.append(Phase("remove our containers", tuple(steps)))
    phases.append(Phase("verify nothing of ours remains", tuple(verify_step(config, rts[n.name])
                                                                 for n in config.nodes)))
    return Plan("stop", tuple(phases))


def stop_vllm_phase(config: SparkConfig, homes: Mapping[str, str] | None = None) -> Phase:
    """vLLM's process group on every node that runs it: SIGINT → SIGTERM → SIGKILL, ``stop_grace`` apart."""
    e = config.engine
    rts = runtimes(config)
    ticks = str(max(1, round(e.stop_grace * 10)))
    steps = []
    for node in vllm_nodes(config):
        rt = rts[node.name]
        sd = state_dir(config, homes, node.name)
        argv = rt.wrap(["sh", "-c", S.STOP_DETACHED_SH, "sparktui-stop", sd, A.VLLM_PID, rt.tag, ticks])
        steps.append(Step("stop vLLM", node.name, tuple(argv), 3 * e.stop_grace + 15,
                          ok_if_output=_GONE if e.runtime == "docker" else ()))
    return Phase("stop vLLM", tuple(steps))


# ---- restart of vLLM alone (engine.restart = "vllm") -------------------------------------------------
def keep_ray_problem(config: SparkConfig, found: Discovery) -> str | None:
    """Why Ray and the containers cannot be kept for a vLLM-only restart (``None``: they can).

    Kept only when every node answers, every engine container runs (docker) and Ray shows every node at its
    IP with its GPU; anything else is a full restart, and this is the reason said for it.
    """
    e = config.engine
    if found.unreachable:
        return "cannot reach " + ", ".join(sorted(found.unreachable))
    if e.runtime == "docker":
        rts = runtimes(config)
        for node in config.nodes:
            mine = [c for c in found.containers.get(node.name, ()) if c.name == rts[node.name].container]
            if not mine:
                return f"no engine container on {node.name}"
            if mine[0].state != "running":
                return f"container {mine[0].name} on {node.name} is {mine[0].state}"
    if e.executor != "ray":
        return None
    if found.ray_readiness is None:
        return "Ray does not answer on the head"
    if not found.ray_readiness.ready:
        return f"Ray: {found.ray_readiness.diagnosis}"
    return None


def _ready_timeout_notes(ready_timeout: ReadyTimeout | None) -> list[str]:
    if ready_timeout is None:
        return []
    return [f"vLLM waits {ready_timeout.seconds} s for its engine ({ready_timeout.why})"]


def build_vllm_restart_plan(config: SparkConfig, homes: Mapping[str, str] | None = None,
                            ready_timeout: ReadyTimeout | None = None) -> Plan:
    """``restart = "vllm"``: stop vLLM → ``vllm serve`` again.

    Ray's daemons and the containers stay as they are: ``keep_ray_problem`` found them healthy (every node
    and GPU in Ray) just before, so the restart costs vLLM's own start-up, not Ray's. (No second Ray check:
    vLLM's placement group waits for the GPUs itself, and names what is missing.)
    """
    e = config.engine
    rts = runtimes(config)
    steps = [detach_step(config, rts[n.name], homes, rank, ready_timeout)
             for rank, n in enumerate(vllm_nodes(config))]
    phases = (stop_vllm_phase(config, homes), Phase("vllm serve (detached)", tuple(reversed(steps))))
    return Plan("restart", phases, (f"restart = \"vllm\": Ray and the {e.runtime} world are kept",
                                    *_ready_timeout_notes(ready_timeout)))


def verify_step(config: SparkConfig, rt: NodeRuntime) -> Step:
    argv = (rt.node.python, "-c", S.TAGGED_PY, "list", rt.tag)
    also = (tuple(A.docker_ps(config.engine.name_prefix)),) if config.engine.runtime == "docker" else ()
    return Step("nothing left", rt.node.name, argv, 30.0, StepKind.VERIFY, also=also)


def facts_argv(config: SparkConfig, node: NodeConfig, model_path: str | None) -> list[str]:
    e = config.engine
    ports: list[int] = []
    if node is config.head:
        ports = [e.api_port]
        if e.executor == "ray":
            ports.append(e.ray_port)
        else:
            ports.append(e.master_port)
    req = {"tag": A.node_tag(e.name_prefix, node.name), "ports": ports, "model_path": model_path}
    return [node.python, "-c", S.FACTS_PY, json.dumps(req)]


def port_roles(config: SparkConfig) -> dict[int, str]:
    e = config.engine
    out = {e.api_port: "vLLM API"}
    if e.executor == "ray":
        out[e.ray_port] = "Ray GCS"
    else:
        out[e.master_port] = "vLLM master"
    return out
