"""EngineController: runs the lifecycle plans of ``sparktui.domain.lifecycle`` over the nodes' transports.

One operation at a time (preflight, start, stop, restart, clean); a second request while one runs raises
``OperationRefused``. Progress goes to one callback as ``OperationView`` snapshots (every step with its
status, seconds, message and output tail), which the dashboard and the headless verbs render alike.
The engine it starts is detached on the nodes: ``discover()`` finds it again from a new process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sparktui.config import SparkConfig
from sparktui.domain.events import EngineState, OperationRefused, OperationView, StepStatus, StepView
from sparktui.domain.lifecycle import argv as A
from sparktui.domain.lifecycle import gpus as G
from sparktui.domain.lifecycle import oplock as L
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle import preflight as F
from sparktui.domain.lifecycle import vllm_help
from sparktui.domain.lifecycle.discovery import DetachedState, Discovery, classify
from sparktui.domain.lifecycle.docker_diag import docker_problem, image_problem
from sparktui.domain.lifecycle.gcs_wait import gcs_wait_argv
from sparktui.domain.lifecycle.links import LinkFacts, link_argv, link_views
from sparktui.domain.lifecycle.memory_fit import check_memory_fit
from sparktui.domain.lifecycle.output import TAIL_LINES, last_json_object, output_tail
from sparktui.domain.lifecycle.ray_state import (
    ProbeError,
    RayState,
    Readiness,
    evaluate,
    last_probe_state,
    parse_probe_line,
    parse_ray_status,
)
from sparktui.domain.lifecycle.vllm_facts_cache import VllmFactsCache
from sparktui.domain.lifecycle.vllm_facts_cache import cache_dir as vllm_facts_dir
from sparktui.domain.model_files import ModelDir, model_info_argv, parse_model_info
from sparktui.domain.recipes import check_recipe_vllm
from sparktui.remote.host_facts import read_home
from sparktui.remote.transport import CommandResult, RemoteProcess, Transport, TransportError

ProgressCallback = Callable[[OperationView], None]


class _Tracker:
    """The operation's step list; every change is published as a fresh ``OperationView``."""

    def __init__(self, kind: str, publish: Callable[[OperationView], None]) -> None:
        self.view = OperationView(kind=kind)
        self._publish = publish
        self._publish(self.view)

    def add(self, step: StepView) -> int:
        self.view = replace(self.view, steps=(*self.view.steps, step))
        self._publish(self.view)
        return len(self.view.steps) - 1

    def update(self, index: int, **changes: Any) -> None:
        steps = list(self.view.steps)
        steps[index] = replace(steps[index], **changes)
        self.view = replace(self.view, steps=tuple(steps))
        self._publish(self.view)

    def finish(self, ok: bool, message: str) -> OperationView:
        self.view = replace(self.view, running=False, ok=ok, message=message)
        self._publish(self.view)
        return self.view


@dataclass
class _Outcome:
    status: StepStatus
    message: str
    tail: tuple[str, ...] = ()


class EngineController:
    """Start, stop, restart and discover the engine across ``transports`` (node name → transport)."""

    def __init__(
        self,
        config: SparkConfig,
        transports: Mapping[str, Transport],
        on_progress: ProgressCallback | None = None,
        *,
        origin: str = "the dashboard",
    ) -> None:
        self.config = config
        #: Who asks, as the operation lock on the head names it to others ("`sparktui restart`").
        self.origin = origin
        #: The takeover of a lock whose holder died, said in the next operation's steps.
        self._lock_note: str | None = None
        self.transports = dict(transports)
        self.on_progress = on_progress
        #: The operation running now, or the last one.
        self.operation: OperationView | None = None
        #: vLLM's version as preflight found it (the log parser's dialect).
        self.vllm_version: str | None = None
        #: Each node's $HOME (resolved once: docker mounts and the state dir need absolute paths).
        self.homes: dict[str, str] = {}
        #: Wall-clock marks of the last start (benchmarks): "ray_ready_seen", "serve_launch", …
        self.marks: dict[str, float] = {}
        self.last_ray_state: RayState | None = None
        #: Whether each node has /dev/infiniband (from preflight; docker passes the device only there).
        self._rdma: dict[str, bool] = {}
        self._busy: str | None = None
        self._runtimes = P.runtimes(config)
        #: Workers start when the head's GCS answers (``False``: after `ray start --head`, the benchmark's
        #: same-run comparison).
        self.early_workers = True
        #: `vllm --version` and `serve --help` answers per image ID (docker: asked once per image).
        self.facts_cache = VllmFactsCache(vllm_facts_dir())
        self._background: set[asyncio.Task[None]] = set()

    # -- public API --------------------------------------------------------------------------------
    @property
    def busy(self) -> str | None:
        """The kind of operation running now, if any."""
        return self._busy

    async def preflight(self) -> OperationView:
        async with self._exclusive("preflight"):
            tracker = self._tracker("preflight")
            summary = await self._preflight(tracker)
            return tracker.finish(summary.ok, summary.message())

    async def start(self, *, preflight: bool = True) -> OperationView:
        async with self._exclusive("start"):
            tracker = self._tracker("start")
            attached = await self._attach_running(tracker)
            if attached is not None:
                return attached
            return await self._start(tracker, preflight=preflight)

    async def stop(self) -> OperationView:
        async with self._exclusive("stop"):
            return await self._stop_finished(self._tracker("stop"))

    async def clean(self) -> OperationView:
        """Remove leftovers of an earlier run (the stop plan: it only touches what carries our tag)."""
        async with self._exclusive("clean"):
            return await self._stop_finished(self._tracker("clean"))

    async def restart(self, *, preflight: bool = True) -> OperationView:
        async with self._exclusive("restart"):
            tracker = self._tracker("restart")
            stopped = await self._stop(tracker, finish=False)
            if stopped is not None:
                return stopped
            return await self._start(tracker, preflight=preflight)

    async def discover(self, *, ray: bool = True) -> Discovery:
        """What of ours runs on the nodes now: vLLM (pid file + process), containers, processes, Ray."""
        cfg = self.config
        # The state dir's absolute path (docker mounts it at the host's path, not the container's $HOME).
        await self.resolve_homes(quiet=True)
        vllm: dict[str, DetachedState] = {}
        containers: dict[str, list[F.Container]] = {}
        processes: dict[str, list[Mapping[str, object]]] = {}
        unreachable: dict[str, str] = {}

        async def one(name: str) -> None:
            rt = self._runtimes[name]
            try:
                listed = await self._run(name, P.verify_step(cfg, rt).argv, 30)
                report = last_json_object(listed.stdout) if listed.ok else None
                processes[name] = (report or {}).get("processes", [])
                if cfg.engine.runtime == "docker":
                    ps = await self._run(name, A.docker_ps(cfg.engine.name_prefix), 30)
                    containers[name] = list(F.parse_docker_ps(ps.stdout, cfg.engine.name_prefix))
                if name in {n.name for n in P.vllm_nodes(cfg)}:
                    res = await self._run(name, P.detached_state_argv(cfg, rt, self.homes or None), 30)
                    vllm[name] = DetachedState.parse(res.stdout)
            except TransportError as exc:
                unreachable[name] = str(exc)

        # Ray's view (the slowest part: `import ray` on the head) is asked at once, beside the listing,
        # when the head's GCS port answers; it is used only if the listing finds our Ray running.
        early_ray = (asyncio.ensure_future(self._ray_if_gcs()) if ray and cfg.engine.executor == "ray"
                     else None)
        await asyncio.gather(*(one(n.name) for n in cfg.nodes))
        ray_state: RayState | None = None
        readiness: Readiness | None = None
        head = cfg.head.name
        ray_up = bool(processes.get(head)) or bool(containers.get(head))
        if early_ray is not None and not (ray_up and head not in unreachable):
            early_ray.cancel()
        elif early_ray is not None:
            ray_state = await early_ray
            readiness = evaluate(ray_state, P.expected_nodes(cfg)) if ray_state else None
        state, detail = classify(vllm, containers, processes, unreachable, readiness)
        return Discovery(state, detail, vllm, containers, processes, unreachable, ray_state, readiness)

    async def _ray_if_gcs(self) -> RayState | None:
        """``ray_state_once`` when the head's GCS port answers now (one connect attempt), else ``None``."""
        head = self.config.head
        try:
            res = await self._run(head.name, gcs_wait_argv(head.python, head.address,
                                                           self.config.engine.ray_port, 0), 10)
        except TransportError:
            return None
        return await self.ray_state_once() if res.ok else None

    async def ray_state_once(self, timeout: float = 20.0) -> RayState | None:
        """One reading of Ray's node list from the head (``None`` if Ray does not answer)."""
        rt = self._runtimes[self.config.head.name]
        argv = P.probe_argv(self.config, rt, 0.0, count=1, until_stdin_closes=False, timeout=timeout)
        try:
            res = await self._run(self.config.head.name, argv, timeout + 5)
            return last_probe_state(res.stdout)
        except (TransportError, ProbeError):
            return None

    async def watch_ray(self, on_state: Callable[[RayState], None], *, interval: float = 1.0) -> None:
        """Ray readings from the head every ``interval`` s until cancelled (one connected probe, restarted
        when it ends, e.g. after the connection dropped)."""
        head = self.config.head.name
        argv = P.probe_argv(self.config, self._runtimes[head], 3600.0, interval)
        transport = self.transports[head]
        while True:
            try:
                await transport.wait_connected()
                proc = await transport.start(argv)
            except TransportError:
                await asyncio.sleep(1.0)
                continue
            buf = b""
            try:
                async for chunk in proc.chunks():
                    *lines, buf = (buf + chunk).split(b"\n")
                    for raw in lines:
                        with contextlib.suppress(ProbeError):
                            state = parse_probe_line(raw.decode("utf-8", "replace"))
                            if state is not None:
                                self.last_ray_state = state
                                on_state(state)
            finally:
                proc.terminate()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(proc.wait(), 2.0)
            await asyncio.sleep(1.0)

    def log_path(self, node: str | None = None) -> str:
        """The vLLM log on ``node`` (default: the head), ``~`` expanded when the home is known."""
        return P.vllm_log_path(self.config, self.homes or None, node or self.config.head.name)

    # -- operations --------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def _exclusive(self, kind: str) -> AsyncIterator[None]:
        if self._busy is not None:
            raise OperationRefused(f"cannot {kind}: {self._busy} is running; wait for it to finish")
        self._busy = kind
        lock: RemoteProcess | None = None
        try:
            if kind != "preflight":  # preflight changes nothing: it runs beside anyone's operation
                lock = await self._take_lock(kind)
            yield
        finally:
            self._busy = None
            self._lock_note = None
            if lock is not None:
                await self._release_lock(lock)

    async def _take_lock(self, kind: str) -> RemoteProcess | None:
        """The operation lock on the head (across processes and machines); ``OperationRefused`` when
        another sparktui holds it. An unreachable head is no reason to refuse a stop: the lock is then
        skipped (the operation's own steps say the head is unreachable)."""
        holder = L.LockHolder(kind, self.origin, socket.gethostname(), os.getpid(), time.time())
        transport = self.transports[self.config.head.name]
        try:
            await self.resolve_homes(quiet=True)
            proc = await transport.start(L.take_argv(self.config, self.homes or None, holder))
        except TransportError:
            return None
        answer: L.LockAnswer | None = None
        buf = b""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(30):
                async for chunk in proc.chunks():
                    buf += chunk
                    if b"\n" in buf:
                        answer = L.LockAnswer.parse(buf.split(b"\n", 1)[0].decode("utf-8", "replace"))
                        break
        if answer is not None and answer.status == "taken":
            if answer.holder is not None:
                self._lock_note = f"took the operation lock over from {answer.holder.describe()}: it is gone"
            return proc
        await self._release_lock(proc)
        if answer is not None and answer.status == "held":
            raise OperationRefused(L.refusal(kind, answer.holder))
        return None  # no answer (an old python, a read-only state dir): go on without the lock

    async def _release_lock(self, proc: RemoteProcess) -> None:
        """``release`` + EOF (the script empties the file: a clean release), then make sure it ends."""
        try:
            await proc.write(b"release\n")
            await proc.close_stdin()
            await asyncio.wait_for(proc.wait(), 5.0)
        except Exception:  # a dead channel frees the lock anyway
            pass
        finally:
            proc.terminate()
            self._reap(proc)

    async def lock_holder(self) -> L.LockHolder | None:
        """Who holds the operation lock now (another sparktui's start/stop/restart), if anyone."""
        try:
            res = await self._run(self.config.head.name, L.show_argv(self.config, self.homes or None), 20)
        except TransportError:
            return None
        answer = L.LockAnswer.parse(res.stdout.strip().splitlines()[-1]) if res.ok and res.stdout.strip() \
            else None
        return answer.holder if answer is not None and answer.status == "held" else None

    def _tracker(self, kind: str) -> _Tracker:
        tracker = _Tracker(kind, self._publish)
        if self._lock_note:
            tracker.add(StepView(name="operation lock", node=self.config.head.name, status=StepStatus.WARNING,
                                 message=self._lock_note))
        return tracker

    def _publish(self, view: OperationView) -> None:
        self.operation = view
        if self.on_progress is not None:
            self.on_progress(view)

    async def _start(self, tracker: _Tracker, *, preflight: bool) -> OperationView:
        self.marks = {"start": time.time()}
        rdma: dict[str, bool] | None = None
        if preflight:
            summary = await self._preflight(tracker)
            if not summary.ok:
                return tracker.finish(False, summary.message())
            rdma = self._rdma
        else:
            await self.resolve_homes()
        plan = P.build_start_plan(self.config, self.homes or None, rdma, early_workers=self.early_workers)
        failed = await self._run_plan(tracker, plan, stop_on_failure=True)
        if failed is not None:
            return tracker.finish(False, f"start failed at {failed.name}"
                                  + (f" on {failed.node}" if failed.node else "") + f": {failed.message}")
        where = self.log_path()
        return tracker.finish(True, f"vLLM launched; log: {self.config.head.name}:{where}")

    async def _attach_running(self, tracker: _Tracker) -> OperationView | None:
        """``start`` on an engine that runs already (e.g. left by a killed ``start --wait``): it is the
        current run, not leftovers — say so and leave it running (``--wait`` then follows it)."""
        idx = tracker.add(StepView(name="running engine", node=self.config.head.name,
                                   status=StepStatus.RUNNING))
        t0 = time.monotonic()
        found = await self.discover(ray=False)
        seconds = round(time.monotonic() - t0, 3)
        if not found.running:
            tracker.update(idx, status=StepStatus.OK, message="none: starting", seconds=seconds)
            return None
        tracker.update(idx, status=StepStatus.OK, message=found.detail, seconds=seconds)
        return tracker.finish(True, f"already running ({found.detail}): attached, nothing started; "
                              "`sparktui restart` starts it afresh")

    async def _stop_finished(self, tracker: _Tracker) -> OperationView:
        view = await self._stop(tracker)
        assert view is not None
        return view

    async def _stop(self, tracker: _Tracker, *, finish: bool = True) -> OperationView | None:
        await self.resolve_homes(quiet=True)
        plan = P.build_stop_plan(self.config, self.homes or None)
        await self._run_plan(tracker, plan, stop_on_failure=False)
        verify = [s for s in tracker.view.steps if s.name == "nothing left"]
        bad = [s for s in verify if s.status is not StepStatus.OK]
        if bad:
            remains = "; ".join(f"{s.node}: {s.message}" for s in bad)
            return tracker.finish(False, f"stop incomplete: {remains}")
        if finish:
            return tracker.finish(True, "stopped: nothing of ours remains on any node")
        return None

    async def _run_plan(self, tracker: _Tracker, plan: P.Plan, *, stop_on_failure: bool) -> StepView | None:
        """Run the phases in order (steps of a phase concurrently); the first failed step, if any."""
        indices = {id(s): tracker.add(StepView(name=s.name, node=s.node)) for s in plan.steps}
        first_failure: StepView | None = None
        lingering: dict[asyncio.Task[StepView], P.Step] = {}
        for phase in plan.phases:
            needed = [t for t, s in lingering.items() if s.name in phase.after]
            for view in await asyncio.gather(*needed):
                if view.status is StepStatus.FAILED and first_failure is None:
                    first_failure = view
            if first_failure is not None and stop_on_failure:
                break
            tasks = {asyncio.create_task(self._run_step(
                tracker, indices[id(s)], s, [t for t, ls in lingering.items() if ls.name in s.after])): s
                for s in phase.steps}
            pending = set(tasks)
            while pending:
                # Steps left running by an earlier phase are watched too: a failed `ray start --head`
                # ends the workers' phase at once instead of after the Ray wait's timeout.
                watch = pending | {t for t in lingering if not t.done()}
                done, _ = await asyncio.wait(watch, return_when=asyncio.FIRST_COMPLETED)
                pending -= done
                finished_early = False
                for task in done:
                    view = task.result()
                    if view.status is StepStatus.FAILED and first_failure is None:
                        first_failure = view
                    elif view.status is StepStatus.OK and tasks.get(task) is not None \
                            and tasks[task].name == phase.done_when:
                        finished_early = True
                if first_failure is not None and stop_on_failure and pending:
                    # The rest of the phase is moot (a Ray wait whose worker failed to start).
                    await self._cancel(tracker, pending, tasks, indices, first_failure)
                    pending = set()
                elif finished_early and first_failure is None:
                    lingering.update({t: tasks[t] for t in pending})
                    pending = set()
            if first_failure is not None and stop_on_failure:
                break
        if lingering:
            for view in await asyncio.gather(*lingering):
                if view.status is StepStatus.FAILED and first_failure is None:
                    first_failure = view
        if first_failure is not None and stop_on_failure:
            for s in plan.steps:
                idx = indices[id(s)]
                if tracker.view.steps[idx].status is StepStatus.PENDING:
                    tracker.update(idx, status=StepStatus.SKIPPED, message="not run: an earlier step failed")
        return first_failure

    @staticmethod
    async def _cancel(tracker: _Tracker, pending: set[asyncio.Task[StepView]],
                      tasks: Mapping[asyncio.Task[StepView], P.Step], indices: Mapping[int, int],
                      failure: StepView) -> None:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for task in pending:
            tracker.update(indices[id(tasks[task])], status=StepStatus.SKIPPED,
                           message=f"cancelled: {failure.name} failed")

    async def _run_step(self, tracker: _Tracker, idx: int, step: P.Step,
                        wait_for: Sequence[asyncio.Task[StepView]] = ()) -> StepView:
        for view in await asyncio.gather(*wait_for):  # Step.after
            if view.status is StepStatus.FAILED:
                tracker.update(idx, status=StepStatus.SKIPPED, message=f"not run: {view.name} failed")
                return tracker.view.steps[idx]
        t0 = time.monotonic()
        self.marks[f"begin:{step.name}:{step.node}"] = time.time()
        tracker.update(idx, status=StepStatus.RUNNING)
        try:
            outcome = await self._execute(step, lambda msg: tracker.update(idx, message=msg))
        except TransportError as exc:
            outcome = _Outcome(StepStatus.FAILED, str(exc))  # names the node, its address and why
        if outcome.status is StepStatus.FAILED and step.tolerate_failure:
            outcome.status = StepStatus.WARNING
        self.marks[f"done:{step.name}:{step.node}"] = time.time()
        tracker.update(idx, status=outcome.status, message=outcome.message, output_tail=outcome.tail,
                       seconds=round(time.monotonic() - t0, 3))
        return tracker.view.steps[idx]

    async def _execute(self, step: P.Step, live: Callable[[str], None]) -> _Outcome:
        assert step.node is not None
        if step.kind is P.StepKind.WAIT_RAY:
            return await self._wait_ray(step, live)
        if step.kind is P.StepKind.DETACH:
            self.marks["serve_launch"] = time.time()
        res = await self._run(step.node, step.argv, step.timeout)
        if step.kind is P.StepKind.DETACH:
            m = re.search(r"^pid (\d+)$", res.stdout, re.M)
            if res.ok and m:
                return _Outcome(StepStatus.OK, f"vLLM started detached, pid {m.group(1)}",
                                output_tail(res.stdout, res.stderr))
            return _Outcome(StepStatus.FAILED, _failure_text(res), output_tail(res.stdout, res.stderr))
        if step.kind in (P.StepKind.STOP_TAGGED, P.StepKind.VERIFY):
            return await self._judge_tagged(step, res)
        ok = _step_ok(step, res)
        if not ok and step.fallback:
            live("retrying: " + " ".join(step.fallback[-2:]))
            res = await self._run(step.node, step.fallback, step.timeout)
            ok = _step_ok(step, res)
        tail = output_tail(res.stdout, res.stderr)
        if ok:
            if step.success_marker and step.success_marker in res.stdout + res.stderr:
                return _Outcome(StepStatus.OK, step.success_marker, tail)
            return _Outcome(StepStatus.OK, tail[-1] if tail else "done", tail)
        return _Outcome(StepStatus.FAILED, _failure_text(res), tail)

    async def _judge_tagged(self, step: P.Step, res: CommandResult) -> _Outcome:
        assert step.node is not None
        if not res.ok:
            return _Outcome(StepStatus.FAILED, _failure_text(res), output_tail(res.stdout, res.stderr))
        data = last_json_object(res.stdout) or {}
        procs = data.get("processes", [])
        containers: list[F.Container] = []
        for extra in step.also:
            more = await self._run(step.node, extra, step.timeout)
            if more.ok:
                containers += F.parse_docker_ps(more.stdout, self.config.engine.name_prefix)
            elif "command not found" not in more.stderr:
                return _Outcome(StepStatus.FAILED, _failure_text(more))
        remains = F.leftover_lines(step.node, procs, containers)
        if remains:
            return _Outcome(StepStatus.FAILED, f"{len(remains)} remain: " + "; ".join(remains[:5]),
                            tuple(remains[-TAIL_LINES:]))
        sent = data.get("signalled", [])
        if step.kind is P.StepKind.STOP_TAGGED:
            kills = sum(1 for _, sig in sent if sig == "SIGKILL")
            msg = (f"stopped {len({p for p, _ in sent})} process(es)" + (f" ({kills} needed SIGKILL)"
                                                                          if kills else "")
                   if sent else "nothing of ours was running")
            return _Outcome(StepStatus.OK, msg)
        return _Outcome(StepStatus.OK, "no process or container of ours")

    async def _wait_ray(self, step: P.Step, live: Callable[[str], None]) -> _Outcome:
        """Stream the Ray probe (a reading every 0.2 s) until every expected node and GPU is there."""
        assert step.node is not None
        transport = self.transports[step.node]
        t0 = time.monotonic()
        deadline = t0 + step.timeout
        last = Readiness(False, "Ray has not answered yet")
        use_status_text = False
        probe_error = ""
        while time.monotonic() < deadline:
            if use_status_text:
                res = await self._run(step.node, step.fallback, min(30.0, deadline - time.monotonic() + 1))
                state = parse_ray_status(res.stdout)
                if state is not None:
                    last = evaluate(state, step.expected)
                    live(last.diagnosis)
                    if last.ready:
                        self.marks["ray_ready_seen"] = time.time()
                        return _Outcome(StepStatus.OK, last.diagnosis + " (from `ray status`)")
                await asyncio.sleep(max(0.0, 1.0 - res.seconds))
                continue
            proc = await transport.start(step.argv)
            buf = b""
            try:
                async with asyncio.timeout(max(0.1, deadline - time.monotonic())):
                    async for chunk in proc.chunks():
                        buf += chunk
                        *lines, rest = buf.split(b"\n")
                        buf = rest
                        for raw in lines:
                            try:
                                state = parse_probe_line(raw.decode("utf-8", "replace"))
                            except ProbeError as exc:
                                probe_error = str(exc)
                                continue
                            if state is None:
                                continue
                            self.last_ray_state = state
                            last = evaluate(state, step.expected)
                            if last.ready:
                                self.marks["ray_ready_seen"] = time.time()
                                return _Outcome(StepStatus.OK, f"{last.diagnosis} after "
                                                f"{time.monotonic() - t0:.1f} s")
                            live(last.diagnosis)
            except TimeoutError:
                break
            finally:
                # Reaped in the background: `vllm serve` should not wait for the probe's channel to close.
                proc.terminate()
                self._reap(proc)
            if "cannot import ray" in probe_error:
                use_status_text = True
                live(f"{probe_error}; reading `ray status` instead")
                continue
            await asyncio.sleep(0.3)
        why = last.diagnosis
        if probe_error and not last.problems:
            why = f"{why} (probe: {probe_error})"
        return _Outcome(StepStatus.FAILED, f"after {step.timeout:.0f} s: {why}", last.problems[-TAIL_LINES:])

    # -- preflight ---------------------------------------------------------------------------------
    async def _preflight(self, tracker: _Tracker) -> F.PreflightSummary:
        cfg = self.config
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
        self._rdma = {}

        def add(view: StepView) -> None:
            summary.views.append(view)
            tracker.add(replace(view, name=f"preflight: {view.name}"))

        async def timed(name: str, node: str | None, work: Callable[[], Awaitable[_Outcome]]) -> _Outcome:
            idx = tracker.add(StepView(name=f"preflight: {name}", node=node, status=StepStatus.RUNNING))
            t0 = time.monotonic()
            try:
                out = await work()
            except TransportError as exc:
                out = _Outcome(StepStatus.FAILED, str(exc))  # names the node, its address and why
            tracker.update(idx, status=out.status, message=out.message, output_tail=out.tail,
                           seconds=round(time.monotonic() - t0, 3))
            summary.views.append(StepView(name, node, out.status, round(time.monotonic() - t0, 3),
                                          out.message, out.tail))
            return out

        async def node_checks(name: str) -> None:
            node = cfg.node(name)
            transport = self.transports[name]

            async def reach() -> _Outcome:
                await transport.wait_connected(timeout=20)
                res = await read_home(transport)
                if not res.ok:
                    return _Outcome(StepStatus.FAILED, _failure_text(res))
                self.homes[name] = res.stdout.strip()
                return _Outcome(StepStatus.OK, f"connected; home {self.homes[name]}")

            if (await timed("reachable", name, reach)).status is StepStatus.FAILED:
                return

            async def gather_facts() -> _Outcome:
                res = await self._run(name, P.facts_argv(cfg, node, model_path), 120)
                if not res.ok:
                    return _Outcome(StepStatus.FAILED, _failure_text(res), output_tail(res.stderr))
                try:
                    facts[name] = F.NodeFacts.parse(res.stdout)
                except ValueError as exc:
                    return _Outcome(StepStatus.FAILED, f"unreadable node facts: {exc}",
                                    output_tail(res.stdout, res.stderr))
                self._rdma[name] = facts[name].dev_infiniband
                return _Outcome(StepStatus.OK, f"host {facts[name].hostname}")

            jobs = [timed("node facts", name, gather_facts), self._link_facts(name, links)]
            rt = self._runtimes[name]

            # The image's vLLM is asked only once docker and the image are there (`docker run` of a missing
            # image would try a registry, and its error would hide the cause).
            docker_usable: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            if e.runtime != "docker":
                docker_usable.set_result(True)
            else:
                async def docker() -> _Outcome:
                    out = _Outcome(StepStatus.FAILED, "the docker check did not finish")
                    try:
                        out = await docker_checks()
                        return out
                    finally:
                        docker_usable.set_result(out.status is StepStatus.OK)

                async def docker_checks() -> _Outcome:
                    ver = await self._run(name, A.docker_version(), 30)
                    if not ver.ok:
                        why = docker_problem(ver.returncode, ver.stdout, ver.stderr)
                        return _Outcome(StepStatus.FAILED, why, output_tail(ver.stdout, ver.stderr))
                    img = await self._run(name, A.docker_image_id(e.image), 30)
                    image_ids[name] = img.stdout.strip() if img.ok else None
                    ps = await self._run(name, A.docker_ps(e.name_prefix), 30)
                    containers[name] = F.parse_docker_ps(ps.stdout, e.name_prefix) if ps.ok else ()
                    if not img.ok:
                        return _Outcome(StepStatus.FAILED,
                                        image_problem(e.image, name, cfg.head.name, img.stdout, img.stderr))
                    return _Outcome(StepStatus.OK, f"docker {ver.stdout.strip()}, image present")
                jobs.append(timed("docker", name, docker))

            def before_start(argv: list[str]) -> list[str]:
                # No engine container exists yet: docker asks a throw-away one of the image.
                return A.docker_run_once(e.image, argv) if e.runtime == "docker" else rt.wrap(argv)

            skipped = _Outcome(StepStatus.SKIPPED, "not run: docker or the image is not usable on this node")

            def image_id() -> str | None:  # the cache's key (docker only: a host install has none)
                return image_ids.get(name) if e.runtime == "docker" else None

            # The key's field names the command too: another `engine.vllm_command` may be another vLLM.
            cmd_key = " ".join(e.vllm_command)
            cached_note = ("known for this image ID (cached on this machine; a new image is asked afresh)",)

            async def version() -> _Outcome:
                if not await docker_usable:
                    return skipped
                known = self.facts_cache.get(image_id(), f"version {cmd_key}")
                if known:
                    versions[name] = known
                    return _Outcome(StepStatus.OK, f"vLLM {known}", cached_note)
                res = await self._run(name, before_start(A.vllm_version(e.vllm_command)), 180)
                versions[name] = found = vllm_help.parse_version(res.stdout) if res.ok else None
                if found is None:
                    return _Outcome(StepStatus.FAILED, "`vllm --version` failed: " + _failure_text(res))
                self.facts_cache.put(image_id(), f"version {cmd_key}", found)
                return _Outcome(StepStatus.OK, f"vLLM {found}")

            async def flags() -> _Outcome:
                if not await docker_usable:
                    return skipped
                known = self.facts_cache.get(image_id(), f"help {cmd_key}")
                if known:
                    help_text.append(known)
                    return _Outcome(StepStatus.OK, f"{len(vllm_help.flags_in_help(known))} flags known",
                                    cached_note)
                every_flag = A.vllm_serve_help(e.vllm_command, "--help=all")
                res = await self._run(name, before_start(every_flag), 180)
                if not res.ok or len(vllm_help.flags_in_help(res.stdout)) < 5:
                    # Older vLLM has no grouped help and rejects "--help=all".
                    res = await self._run(name, before_start(A.vllm_serve_help(e.vllm_command)), 180)
                if not res.ok:
                    return _Outcome(StepStatus.FAILED, "`vllm serve --help` failed: " + _failure_text(res))
                help_text.append(res.stdout)
                self.facts_cache.put(image_id(), f"help {cmd_key}", res.stdout)
                return _Outcome(StepStatus.OK, f"{len(vllm_help.flags_in_help(res.stdout))} flags known")

            async def gpus() -> _Outcome:
                cmd = list(e.gpu_list_command)
                argv = G.gpu_list_docker_argv(e.image, cmd) if e.runtime == "docker" else rt.wrap(cmd)
                res = await self._run(name, argv, 120)
                view = G.check_gpus(name, res.returncode, res.stdout, res.stderr, gpus_needed[name],
                                    e.runtime == "docker")
                return _Outcome(view.status, view.message, view.output_tail)

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
            res = await self._run(name, link_argv(self.config, self.config.node(name)), 60)
            into[name] = LinkFacts.parse(res.stdout) if res.ok else _failure_text(res)
        except (TransportError, ValueError) as exc:
            into[name] = str(exc)
    async def _model_for_sizing(self, node: str, model_path: str | None, out: list[ModelDir | str]) -> None:
        """The head's view of the model directory (or the HF cache's snapshot of a model id) into ``out``;
        a failure is kept as its reason (sizing is then skipped, never the start)."""
        e = self.config.engine
        python = self.config.node(node).python
        # docker: the container's HF cache is whatever the mounts put at /root/.cache/huggingface.
        hf_home = next((m.source for m in e.mounts if m.target.rstrip("/") == "/root/.cache/huggingface"),
                       None) if e.runtime == "docker" else None
        argv = (model_info_argv(python, path=model_path) if model_path
                else model_info_argv(python, hf_id=e.model, hf_home=hf_home))
        try:
            res = await self._run(node, argv, 60)
            out.append(parse_model_info(res.stdout) if res.ok else "reading the model: " + _failure_text(res))
        except (TransportError, ValueError) as exc:
            out.append(f"reading the model: {exc}")

    # -- helpers -----------------------------------------------------------------------------------
    def _reap(self, proc: RemoteProcess) -> None:
        async def reap() -> None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait(), 5.0)

        task = asyncio.create_task(reap())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def resolve_homes(self, quiet: bool = False) -> None:
        """Fill ``homes`` for the nodes not resolved yet; ``quiet``: an unreachable node stays unresolved
        (its paths keep their ``~``) instead of raising ``TransportError``."""
        async def one(name: str) -> None:
            if name in self.homes:
                return
            try:
                res = await read_home(self.transports[name])
            except TransportError:
                if quiet:
                    return
                raise
            if res.ok and res.stdout.strip():
                self.homes[name] = res.stdout.strip()

        await asyncio.gather(*(one(n.name) for n in self.config.nodes))

    async def _run(self, node: str, argv: Sequence[str], timeout: float) -> CommandResult:
        return await self.transports[node].run(list(argv), timeout=timeout)


def _step_ok(step: P.Step, res: CommandResult) -> bool:
    return res.returncode in step.ok_codes or any(s in res.stdout + res.stderr for s in step.ok_if_output)


def _failure_text(res: CommandResult) -> str:
    tail = output_tail(res.stderr) or output_tail(res.stdout)
    what = "timed out" if res.returncode == 124 else f"exit {res.returncode}"
    return f"{what}: {tail[-1]}" if tail else what


__all__ = ["EngineController", "EngineState", "ProgressCallback", "output_tail"]
