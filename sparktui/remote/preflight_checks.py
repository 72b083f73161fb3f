"""Preflight's executor: the gathering steps of ``domain.lifecycle.preflight_plan`` (reachable, node facts,
the cable, docker and the image, vLLM's version and flags, the GPUs, the model for sizing) run by the plan
runner over the nodes' transports; what they gathered is then judged by ``domain.lifecycle.preflight``
into named checks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from sparktui.domain.events import StepStatus, StepView
from sparktui.domain.lifecycle import gpus as G
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle import preflight as F
from sparktui.domain.lifecycle import vllm_help
from sparktui.domain.lifecycle.audit import NodeAudit, audit_views
from sparktui.domain.lifecycle.docker_diag import docker_problem, image_problem
from sparktui.domain.lifecycle.fixes import IMAGE_SYNC
from sparktui.domain.lifecycle.links import LinkFacts, link_views
from sparktui.domain.lifecycle.memory_fit import check_memory_fit
from sparktui.domain.lifecycle.output import output_tail
from sparktui.domain.lifecycle.preflight_plan import build_preflight_plan
from sparktui.domain.lifecycle.vllm_facts_cache import VllmFactsCache
from sparktui.domain.lifecycle.vllm_facts_cache import cache_dir as vllm_facts_dir
from sparktui.domain.model_files import ModelDir, parse_model_info
from sparktui.remote.audit import gather_audit
from sparktui.remote.engine_nodes import EngineNodes, Outcome, failure_text
from sparktui.remote.host_facts import read_home
from sparktui.remote.plan_runner import PlanRunner, Tracker
from sparktui.remote.transport import TransportError


@dataclass
class Gathered:
    """What one preflight's steps found, node by node (the checks judge it afterwards)."""

    facts: dict[str, F.PreflightFacts] = field(default_factory=dict)
    image_ids: dict[str, str | None] = field(default_factory=dict)
    versions: dict[str, str | None] = field(default_factory=dict)
    containers: dict[str, tuple[F.DockerContainer, ...]] = field(default_factory=dict)
    help_text: str | None = None
    #: The cable's facts, or why they are unreadable.
    links: dict[str, LinkFacts | str] = field(default_factory=dict)
    #: The head's model directory, or why it is unreadable (sizing is then skipped, never the start).
    model: ModelDir | str | None = None
    #: GPUs counted on each node (None: the listing could not tell).
    gpus: dict[str, int | None] = field(default_factory=dict)
    #: Each node's audit facts (files, mounts, engine env, libnccl, addresses), or why they are unreadable.
    audits: dict[str, NodeAudit | str] = field(default_factory=dict)


_CACHED_NOTE = ("known for this image ID (cached on this machine; a new image is asked afresh)",)


class PreflightChecks:
    """Runs preflight into a tracker; keeps what the start needs of it (``rdma``, ``vllm_version``)."""

    def __init__(self, nodes: EngineNodes, runner: PlanRunner) -> None:
        self.nodes = nodes
        self.runner = runner
        #: vLLM's version as preflight found it (the log parser's dialect).
        self.vllm_version: str | None = None
        #: The image's ``vllm serve --help`` as preflight read it (the start's explanation names only the
        #: options it accepts).
        self.help_text: str | None = None
        #: Whether each node has /dev/infiniband (docker passes the device only there).
        self.rdma: dict[str, bool] = {}
        self._got = Gathered()
        #: `vllm --version` and `serve --help` answers per image ID (docker: asked once per image).
        self.facts_cache = VllmFactsCache(vllm_facts_dir())
        K = P.StepKind
        runner.executors.update({
            K.REACH: self._reach, K.FACTS: self._facts, K.LINK: self._link, K.DOCKER: self._docker,
            K.VLLM_VERSION: self._version, K.VLLM_HELP: self._help, K.GPUS: self._gpus,
            K.MODEL_INFO: self._model, K.AUDIT: self._audit,
        })

    async def run(self, tracker: Tracker) -> F.PreflightSummary:
        self._got = Gathered()
        self.rdma = {}
        summary = F.PreflightSummary()
        plan = build_preflight_plan(self.nodes.config)
        await self.runner.run_plan(tracker, plan, stop_on_failure=False, on_done=summary.views.append)
        for view in self._judge():
            summary.views.append(view)
            tracker.add(replace(view, name=plan.row_prefix + view.name))
        summary.vllm_version = self.vllm_version
        self.help_text = self._got.help_text
        return summary

    # -- the gathering steps -----------------------------------------------------------------------
    async def _reach(self, step: P.Step, live: Callable[[str], None]) -> Outcome:
        assert step.node is not None
        transport = self.nodes.transports[step.node]
        await transport.wait_connected(timeout=step.timeout)
        res = await read_home(transport)
        if not res.ok:
            return Outcome(StepStatus.FAILED, failure_text(res))
        self.nodes.homes[step.node] = res.stdout.strip()
        return Outcome(StepStatus.OK, f"connected; home {self.nodes.homes[step.node]}")

    async def _facts(self, step: P.Step, live: Callable[[str], None]) -> Outcome:
        assert step.node is not None
        res = await self.nodes.run(step.node, step.argv, step.timeout)
        if not res.ok:
            return Outcome(StepStatus.FAILED, failure_text(res), output_tail(res.stderr))
        try:
            facts = self._got.facts[step.node] = F.PreflightFacts.parse(res.stdout)
        except ValueError as exc:
            return Outcome(StepStatus.FAILED, f"unreadable node facts: {exc}",
                           output_tail(res.stdout, res.stderr))
        self.rdma[step.node] = facts.dev_infiniband
        return Outcome(StepStatus.OK, f"host {facts.hostname}")

    async def _link(self, step: P.Step, live: Callable[[str], None]) -> Outcome:
        """The cable's facts for the link checks; a reason string when unreadable (judged afterwards)."""
        assert step.node is not None
        try:
            res = await self.nodes.run(step.node, step.argv, step.timeout)
            self._got.links[step.node] = LinkFacts.parse(res.stdout) if res.ok else failure_text(res)
        except (TransportError, ValueError) as exc:
            self._got.links[step.node] = str(exc)
        return Outcome(StepStatus.OK, "read")

    async def _docker(self, step: P.Step, live: Callable[[str], None]) -> Outcome:
        assert step.node is not None
        e = self.nodes.config.engine
        ver = await self.nodes.run(step.node, step.argv, step.timeout)
        if not ver.ok:
            why = docker_problem(ver.returncode, ver.stdout, ver.stderr)
            return Outcome(StepStatus.FAILED, why, output_tail(ver.stdout, ver.stderr))
        image_argv, ps_argv = step.also
        img = await self.nodes.run(step.node, image_argv, step.timeout)
        self._got.image_ids[step.node] = img.stdout.strip() if img.ok else None
        ps = await self.nodes.run(step.node, ps_argv, step.timeout)
        self._got.containers[step.node] = F.parse_docker_ps(ps.stdout, e.name_prefix) if ps.ok else ()
        if not img.ok:
            return Outcome(StepStatus.FAILED, image_problem(e.image, step.node, self.nodes.config.head.name,
                                                            img.stdout, img.stderr))
        return Outcome(StepStatus.OK, f"docker {ver.stdout.strip()}, image present")

    def _cache_key(self, node: str, what: str) -> tuple[str | None, str]:
        """The facts cache's key: the node's image ID (docker only: a host install has none) and the
        question, naming the command (another `engine.vllm_command` may be another vLLM)."""
        e = self.nodes.config.engine
        image = self._got.image_ids.get(node) if e.runtime == "docker" else None
        return image, f"{what} {' '.join(e.vllm_command)}"

    async def _version(self, step: P.Step, live: Callable[[str], None]) -> Outcome:
        assert step.node is not None
        image, key = self._cache_key(step.node, "version")
        known = self.facts_cache.get(image, key)
        if known:
            self._got.versions[step.node] = known
            return Outcome(StepStatus.OK, f"vLLM {known}", _CACHED_NOTE)
        res = await self.nodes.run(step.node, step.argv, step.timeout)
        version = self._got.versions[step.node] = vllm_help.parse_version(res.stdout) if res.ok else None
        if version is None:
            return Outcome(StepStatus.FAILED, "`vllm --version` failed: " + failure_text(res))
        self.facts_cache.put(image, key, version)
        return Outcome(StepStatus.OK, f"vLLM {version}")

    async def _help(self, step: P.Step, live: Callable[[str], None]) -> Outcome:
        assert step.node is not None
        image, key = self._cache_key(step.node, "help")
        known = self.facts_cache.get(image, key)
        if known:
            self._got.help_text = known
            return Outcome(StepStatus.OK, f"{len(vllm_help.flags_in_help(known))} flags known", _CACHED_NOTE)
        res = await self.nodes.run(step.node, step.argv, step.timeout)
        if not res.ok or len(vllm_help.flags_in_help(res.stdout)) < 5:
            # Older vLLM has no grouped help and rejects "--help=all".
            res = await self.nodes.run(step.node, step.fallback, step.timeout)
        if not res.ok:
            return Outcome(StepStatus.FAILED, "`vllm serve --help` failed: " + failure_text(res))
        self._got.help_text = res.stdout
        self.facts_cache.put(image, key, res.stdout)
        return Outcome(StepStatus.OK, f"{len(vllm_help.flags_in_help(res.stdout))} flags known")

    async def _gpus(self, step: P.Step, live: Callable[[str], None]) -> Outcome:
        assert step.node is not None
        cfg = self.nodes.config
        # What the config says this node has (TP × PP against all of them is judged with the others).
        needed = cfg.node(step.node).gpus
        res = await self.nodes.run(step.node, step.argv, step.timeout)
        self._got.gpus[step.node] = G.counted_gpus(res.returncode, res.stdout, res.stderr)
        view = G.check_gpus(step.node, res.returncode, res.stdout, res.stderr, needed,
                            cfg.engine.runtime == "docker")
        return Outcome(view.status, view.message, view.output_tail)

    async def _model(self, step: P.Step, live: Callable[[str], None]) -> Outcome:
        """The head's view of the model directory (or the HF cache's snapshot of a model id); a failure is
        kept as its reason."""
        assert step.node is not None
        try:
            res = await self.nodes.run(step.node, step.argv, step.timeout)
            self._got.model = (parse_model_info(res.stdout) if res.ok
                               else "reading the model: " + failure_text(res))
        except (TransportError, ValueError) as exc:
            self._got.model = f"reading the model: {exc}"
        return Outcome(StepStatus.OK, "read")

    async def _audit(self, step: P.Step, live: Callable[[str], None]) -> Outcome:
        """The node's facts for the comparison of the nodes; a failure is kept as its reason (a warning)."""
        assert step.node is not None
        self._got.audits[step.node] = await gather_audit(
            lambda argv: self.nodes.run(step.node or "", argv, step.timeout), step.argv,
            step.also[0] if step.also else None, self.facts_cache)
        return Outcome(StepStatus.OK, "read")

    # -- the checks --------------------------------------------------------------------------------
    def _judge(self) -> list[StepView]:
        """The checks of what was gathered, in the order they are listed."""
        cfg = self.nodes.config
        e = cfg.engine
        got = self._got
        head = cfg.head.name
        views: list[StepView] = []
        fraction = F.needed_memory_fraction(e.extra_args)
        for name, nf in got.facts.items():
            views.append(F.check_memory(name, nf, fraction))
            views.append(F.check_rdma(name, nf, cfg.node(name).rdma_devices))
            if name == head:
                views.append(F.check_ports(name, nf, P.port_roles(cfg)))
            views.append(F.check_leftovers(name, nf, got.containers.get(name, ())))
        views += link_views(cfg, got.links)
        world = G.check_world(e.tensor_parallel_size, e.pipeline_parallel_size, got.gpus)
        if world is not None and len(got.gpus) == len(cfg.nodes):
            views.append(world)
        if got.facts:
            views += F.check_model(cfg, got.facts)
            found = got.model
            views += check_memory_fit(cfg, got.facts, found if isinstance(found, ModelDir) else None,
                                      found if isinstance(found, str) else None)
        if e.runtime == "docker" and len(got.image_ids) > 1:
            views += F.check_same("same image", got.image_ids, "image", head, fix=IMAGE_SYNC)
        if len(got.versions) > 1:
            views += F.check_same("same vLLM", got.versions, "vLLM", head)
        if len(got.audits) > 1:
            views += audit_views(cfg, got.audits)
        self.vllm_version = got.versions.get(head)
        recipe_view = F.check_recipe_vllm(cfg, self.vllm_version) if got.versions else None
        if recipe_view is not None:
            views.append(recipe_view)
        if got.help_text is not None:
            check = vllm_help.check_flags(e.extra_args, vllm_help.flags_in_help(got.help_text))
            views.append(StepView("vLLM flags", head, StepStatus.OK if check.ok else StepStatus.FAILED,
                                  message=check.message(self.vllm_version)))
        return views
