"""Preflight: every node's facts gathered over its transport (reachable, node facts, the cable, docker and
the image, vLLM's version and flags, the GPUs, the model for sizing), then judged by
``domain.lifecycle.preflight`` into named checks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from sparktui.domain.events import StepStatus, StepView
from sparktui.domain.lifecycle import argv as A
from sparktui.domain.lifecycle import gpus as G
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle import preflight as F
from sparktui.domain.lifecycle import vllm_help
from sparktui.domain.lifecycle.docker_diag import docker_problem, image_problem
from sparktui.domain.lifecycle.links import LinkFacts, link_argv, link_views
from sparktui.domain.lifecycle.memory_fit import check_memory_fit
from sparktui.domain.lifecycle.output import output_tail
from sparktui.domain.model_files import ModelDir, model_info_argv, parse_model_info
from sparktui.domain.recipes import check_recipe_vllm
from sparktui.remote.engine_nodes import EngineNodes, Outcome, failure_text
from sparktui.remote.host_facts import read_home
from sparktui.remote.plan_runner import Tracker
from sparktui.remote.transport import TransportError


class PreflightChecks:
    """Runs preflight into a tracker; keeps what the start needs of it (``rdma``, ``vllm_version``)."""

    def __init__(self, nodes: EngineNodes) -> None:
        self.nodes = nodes
        #: vLLM's version as preflight found it (the log parser's dialect).
        self.vllm_version: str | None = None
        #: Whether each node has /dev/infiniband (docker passes the device only there).
        self.rdma: dict[str, bool] = {}

    async def run(self, tracker: Tracker) -> F.PreflightSummary:
        cfg = self.nodes.config
        e = cfg.engine
        summary = F.PreflightSummary()
        model_path = F.model_host_path(cfg)
        facts: dict[str, F.NodeFacts] = {}
        image_ids: dict[str, str | None] = {}
        versions: dict[str, str | None] = {}
        containers: dict[str, tuple[F.Container, ...]] = {}
        help_text: list[str] = []
        links: dict[str, LinkFacts | str] = {}
        gpus_needed = {x.name: x.gpus for x in P.expected_nodes(cfg)}
        model_read: list[ModelDir | str] = []
        self.rdma = {}

        def add(view: StepView) -> None:
            summary.views.append(view)
            tracker.add(replace(view, name=f"preflight: {view.name}"))

        async def timed(name: str, node: str | None, work: Callable[[], Awaitable[Outcome]]) -> Outcome:
            idx = tracker.add(StepView(name=f"preflight: {name}", node=node, status=StepStatus.RUNNING))
            t0 = time.monotonic()
            try:
                out = await work()
            except TransportError as exc:
                out = Outcome(StepStatus.FAILED, str(exc))  # names the node, its address and why
            tracker.update(idx, status=out.status, message=out.message, output_tail=out.tail,
                           seconds=round(time.monotonic() - t0, 3))
            summary.views.append(StepView(name, node, out.status, round(time.monotonic() - t0, 3),
                                          out.message, out.tail))
            return out

        async def node_checks(name: str) -> None:
            node = cfg.node(name)
            transport = self.nodes.transports[name]

            async def reach() -> Outcome:
                await transport.wait_connected(timeout=20)
                res = await read_home(transport)
                if not res.ok:
                    return Outcome(StepStatus.FAILED, failure_text(res))
                self.nodes.homes[name] = res.stdout.strip()
                return Outcome(StepStatus.OK, f"connected; home {self.nodes.homes[name]}")

            if (await timed("reachable", name, reach)).status is StepStatus.FAILED:
                return

            async def gather_facts() -> Outcome:
                res = await self.nodes.run(name, P.facts_argv(cfg, node, model_path), 120)
                if not res.ok:
                    return Outcome(StepStatus.FAILED, failure_text(res), output_tail(res.stderr))
                try:
                    facts[name] = F.NodeFacts.parse(res.stdout)
                except ValueError as exc:
                    return Outcome(StepStatus.FAILED, f"unreadable node facts: {exc}",
                                    output_tail(res.stdout, res.stderr))
                self.rdma[name] = facts[name].dev_infiniband
                return Outcome(StepStatus.OK, f"host {facts[name].hostname}")

            jobs = [timed("node facts", name, gather_facts), self._link_facts(name, links)]
            rt = self.nodes.runtimes[name]

            # The image's vLLM is asked only once docker and the image are there (`docker run` of a missing
            # image would try a registry, and its error would hide the cause).
            docker_usable: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            if e.runtime != "docker":
                docker_usable.set_result(True)
            else:
                async def docker() -> Outcome:
                    out = Outcome(StepStatus.FAILED, "the docker check did not finish")
                    try:
                        out = await docker_checks()
                        return out
                    finally:
                        docker_usable.set_result(out.status is StepStatus.OK)

                async def docker_checks() -> Outcome:
                    ver = await self.nodes.run(name, A.docker_version(), 30)
                    if not ver.ok:
                        why = docker_problem(ver.returncode, ver.stdout, ver.stderr)
                        return Outcome(StepStatus.FAILED, why, output_tail(ver.stdout, ver.stderr))
                    img = await self.nodes.run(name, A.docker_image_id(e.image), 30)
                    image_ids[name] = img.stdout.strip() if img.ok else None
                    ps = await self.nodes.run(name, A.docker_ps(e.name_prefix), 30)
                    containers[name] = F.parse_docker_ps(ps.stdout, e.name_prefix) if ps.ok else ()
                    if not img.ok:
                        return Outcome(StepStatus.FAILED,
                                        image_problem(e.image, name, cfg.head.name, img.stdout, img.stderr))
                    return Outcome(StepStatus.OK, f"docker {ver.stdout.strip()}, image present")
                jobs.append(timed("docker", name, docker))

            def before_start(argv: list[str]) -> list[str]:
                # No engine container exists yet: docker asks a throw-away one of the image.
                return A.docker_run_once(e.image, argv) if e.runtime == "docker" else rt.wrap(argv)

            skipped = Outcome(StepStatus.SKIPPED, "not run: docker or the image is not usable on this node")

            async def version() -> Outcome:
                if not await docker_usable:
                    return skipped
                res = await self.nodes.run(name, before_start(A.vllm_version(e.vllm_command)), 180)
                versions[name] = vllm_help.parse_version(res.stdout) if res.ok else None
                if versions[name] is None:
                    return Outcome(StepStatus.FAILED, "`vllm --version` failed: " + failure_text(res))
                return Outcome(StepStatus.OK, f"vLLM {versions[name]}")

            async def flags() -> Outcome:
                if not await docker_usable:
                    return skipped
                every_flag = A.vllm_serve_help(e.vllm_command, "--help=all")
                res = await self.nodes.run(name, before_start(every_flag), 180)
                if not res.ok or len(vllm_help.flags_in_help(res.stdout)) < 5:
                    # Older vLLM has no grouped help and rejects "--help=all".
                    res = await self.nodes.run(name, before_start(A.vllm_serve_help(e.vllm_command)), 180)
                if not res.ok:
                    return Outcome(StepStatus.FAILED, "`vllm serve --help` failed: " + failure_text(res))
                help_text.append(res.stdout)
                return Outcome(StepStatus.OK, f"{len(vllm_help.flags_in_help(res.stdout))} flags known")

            async def gpus() -> Outcome:
                cmd = list(e.gpu_list_command)
                argv = G.gpu_list_docker_argv(e.image, cmd) if e.runtime == "docker" else rt.wrap(cmd)
                res = await self.nodes.run(name, argv, 120)
                view = G.check_gpus(name, res.returncode, res.stdout, res.stderr, gpus_needed[name],
                                    e.runtime == "docker")
                return Outcome(view.status, view.message, view.output_tail)

            jobs.append(timed("vLLM version", name, version))
            jobs.append(timed("GPUs", name, gpus))
            if node is cfg.head:
                jobs.append(timed("vLLM help", name, flags))
            # The model's config.json and safetensors headers, read once on the head (memory sizing).
            sizing = [self._model_for_sizing(name, model_path, model_read)] if node is cfg.head else []
            await asyncio.gather(*jobs, *sizing)

        await asyncio.gather(*(node_checks(n.name) for n in cfg.nodes))

        head = cfg.head.name
        fraction = F.needed_memory_fraction(e.extra_args)
        for name, nf in facts.items():
            add(F.check_memory(name, nf, fraction))
            add(F.check_rdma(name, nf, cfg.node(name).rdma_devices))
            if name == head:
                add(F.check_ports(name, nf, P.port_roles(cfg)))
            add(F.check_leftovers(name, nf, containers.get(name, ())))
        for view in link_views(cfg, links):
            add(view)
        if facts:
            for view in F.check_model(cfg, facts):
                add(view)
            found = model_read[0] if model_read else None
            for view in check_memory_fit(cfg, facts, found if isinstance(found, ModelDir) else None,
                                         found if isinstance(found, str) else None):
                add(view)
        if e.runtime == "docker" and len(image_ids) > 1:
            for view in F.check_same("same image", image_ids, "image", head):
                add(view)
        if len(versions) > 1:
            for view in F.check_same("same vLLM", versions, "vLLM", head):
                add(view)
        self.vllm_version = versions.get(head)
        summary.vllm_version = self.vllm_version
        recipe_view = check_recipe_vllm(cfg, self.vllm_version) if versions else None
        if recipe_view is not None:
            add(recipe_view)
        if help_text:
            check = vllm_help.check_flags(e.extra_args, vllm_help.flags_in_help(help_text[0]))
            add(StepView("vLLM flags", head, StepStatus.OK if check.ok else StepStatus.FAILED,
                         message=check.message(self.vllm_version)))
        return summary

    async def _link_facts(self, name: str, into: dict[str, LinkFacts | str]) -> None:
        """The cable's facts for preflight's link checks (``LINK_PY``); a reason string when unreadable."""
        try:
            res = await self.nodes.run(name, link_argv(self.nodes.config, self.nodes.config.node(name)), 60)
            into[name] = LinkFacts.parse(res.stdout) if res.ok else failure_text(res)
        except (TransportError, ValueError) as exc:
            into[name] = str(exc)

    async def _model_for_sizing(self, node: str, model_path: str | None, out: list[ModelDir | str]) -> None:
        """The head's view of the model directory (or the HF cache's snapshot of a model id) into ``out``;
        a failure is kept as its reason (sizing is then skipped, never the start)."""
        e = self.nodes.config.engine
        python = self.nodes.config.node(node).python
        # docker: the container's HF cache is whatever the mounts put at /root/.cache/huggingface.
        hf_home = next((m.source for m in e.mounts if m.target.rstrip("/") == "/root/.cache/huggingface"),
                       None) if e.runtime == "docker" else None
        argv = (model_info_argv(python, path=model_path) if model_path
                else model_info_argv(python, hf_id=e.model, hf_home=hf_home))
        try:
            res = await self.nodes.run(node, argv, 60)
            out.append(parse_model_info(res.stdout) if res.ok else "reading the model: " + failure_text(res))
        except (TransportError, ValueError) as exc:
            out.append(f"reading the model: {exc}")
