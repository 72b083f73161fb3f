"""EngineController: runs the lifecycle plans of ``sparktui.domain.lifecycle`` over the nodes' transports.

One operation at a time (preflight, start, stop, restart, clean); a second request while one runs raises
``OperationRefused``. Progress goes to one callback as ``OperationView`` snapshots (every step with its
status, seconds, message and output tail), which the dashboard and the headless verbs render alike.
The engine it starts is detached on the nodes: ``discover()`` finds it again from a new process.

The jobs live beside it: ``engine_nodes`` (transports, homes, one command), ``plan_runner`` (a plan's
phases and steps), ``preflight_checks``, ``ray_queries`` (Ray's node list) and ``operation_gate`` (one
operation at a time, here and across machines).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence

from sparktui.config import SparkConfig
from sparktui.domain.events import EngineState, OperationView, StepStatus, StepView
from sparktui.domain.history import HistoryStore, RunRecord, setup_of
from sparktui.domain.lifecycle import oplock as L
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle.desired import Desired, DesiredState
from sparktui.domain.lifecycle.discovery import Discovery
from sparktui.domain.lifecycle.output import output_tail
from sparktui.domain.lifecycle.ray_state import RayState
from sparktui.domain.lifecycle.ready_timeout import ReadyTimeout, engine_ready_timeout
from sparktui.domain.perf.load_args import load_args_step
from sparktui.domain.presence import SupervisorPresence
from sparktui.domain.upgrade.images import ImageInUse
from sparktui.remote.desired_store import read_desired, stopped_by_person, write_desired
from sparktui.remote.engine_discovery import discover_engine
from sparktui.remote.engine_nodes import EngineNodes
from sparktui.remote.image_store import config_for_start, read_image_in_use
from sparktui.remote.operation_gate import OperationGate
from sparktui.remote.plan_runner import PlanRunner, Tracker
from sparktui.remote.preflight_checks import PreflightChecks
from sparktui.remote.presence_store import read_presence, write_presence
from sparktui.remote.ray_queries import RayQueries
from sparktui.remote.transport import Transport

ProgressCallback = Callable[[OperationView], None]

#: The runner's step tracker under its old name (tests build one to drive ``_run_plan``).
_Tracker = Tracker


class EngineController:
    """Start, stop, restart and discover the engine across ``transports`` (node name → transport)."""

    def __init__(
        self,
        config: SparkConfig,
        transports: Mapping[str, Transport],
        on_progress: ProgressCallback | None = None,
        *,
        origin: str = "the dashboard",
        on_busy: Callable[[str | None], None] | None = None,
    ) -> None:
        self.config = config
        #: The config as given (``config`` is it with the image a start chose: ``remote/image_store``).
        self.given_config = config
        #: The image to try instead of the one in use (``sparktui upgrade``'s trial; never kept).
        self.trial_image: str | None = None
        self.on_progress = on_progress
        #: The operation running now, or the last one.
        self.operation: OperationView | None = None
        self._nodes = EngineNodes(config, transports)
        self._ray = RayQueries(self._nodes)
        self._runner = PlanRunner(self._nodes, self._ray)
        self._preflight_checks = PreflightChecks(self._nodes, self._runner)
        self._gate = OperationGate(self._nodes, origin, on_busy)
        self._runtimes = self._nodes.runtimes
        #: Workers start when the head's GCS answers (``False``: after `ray start --head`, the benchmark's
        #: same-run comparison).
        self.early_workers = True
        #: Earlier runs of this model and image (oldest first): how long vLLM may take to be ready.
        self.history: Callable[[], Sequence[RunRecord]] = (
            lambda: HistoryStore().runs_for(*setup_of(config.engine)))

    # -- what the jobs know, read here -------------------------------------------------------------
    @property
    def transports(self) -> dict[str, Transport]:
        return self._nodes.transports

    @property
    def nodes(self) -> EngineNodes:
        return self._nodes

    @property
    def homes(self) -> dict[str, str]:
        """Each node's $HOME (resolved once: docker mounts and the state dir need absolute paths)."""
        return self._nodes.homes

    @property
    def origin(self) -> str:
        """Who asks, as the operation lock on the head names it to others ("`sparktui restart`")."""
        return self._gate.origin

    @property
    def marks(self) -> dict[str, float]:
        """Wall-clock marks of the last start (benchmarks): "ray_ready_seen", "serve_launch", …"""
        return self._runner.marks

    @property
    def vllm_version(self) -> str | None:
        """vLLM's version as preflight found it (the log parser's dialect)."""
        return self._preflight_checks.vllm_version

    @property
    def help_text(self) -> str | None:
        """The image's ``vllm serve --help`` as the last preflight read it (None: not read)."""
        return self._preflight_checks.help_text

    @property
    def last_ray_state(self) -> RayState | None:
        return self._ray.last_state

    # -- public API --------------------------------------------------------------------------------
    @property
    def busy(self) -> str | None:
        """The kind of operation running now, if any."""
        return self._gate.busy

    async def preflight(self) -> OperationView:
        async with self._exclusive("preflight"):
            tracker = self._tracker("preflight")
            summary = await self._preflight_checks.run(tracker)
            return tracker.finish(summary.ok, summary.message())

    async def start(self, *, preflight: bool = True, unless_stopped: bool = False) -> OperationView:
        """``unless_stopped`` (the supervisor's): not if a person's stop is the desired state — read under
        the lock, so a stop that finished a moment ago is never undone."""
        async with self._exclusive("start"):
            tracker = self._tracker("start")
            if unless_stopped and (held := await stopped_by_person(self._nodes)) is not None:
                return tracker.finish(False, held)
            await self.set_desired(Desired.SERVING)
            attached = await self._attach_running(tracker)
            if attached is not None:
                return attached
            return await self._start(tracker, preflight=preflight)

    async def stop(self, *, by_person: bool = True) -> OperationView:
        """``by_person``: a person asked for it, so the engine's desired state becomes ``stopped`` (the
        supervisor leaves it so); the memory guard's stop leaves the desired state as it is."""
        async with self._exclusive("stop"):
            if by_person:
                await self.set_desired(Desired.STOPPED)
            return await self._stop_finished(self._tracker("stop"))

    async def clean(self) -> OperationView:
        """Remove leftovers of an earlier run (the stop plan: it only touches what carries our tag)."""
        async with self._exclusive("clean"):
            return await self._stop_finished(self._tracker("clean"))

    async def restart(self, *, preflight: bool = True, full: bool = False,
                      unless_stopped: bool = False) -> OperationView:
        """``full``: every rank and Ray again, even with ``engine.restart = "vllm"`` (after an NCCL error
        or a lost worker, vLLM alone would meet the same broken communicator). ``unless_stopped``: as
        ``start``'s."""
        async with self._exclusive("restart"):
            tracker = self._tracker("restart")
            if unless_stopped and (held := await stopped_by_person(self._nodes)) is not None:
                return tracker.finish(False, held)
            await self.set_desired(Desired.SERVING)
            if self.config.engine.restart == "vllm" and not full:
                kept = await self._restart_vllm(tracker)
                if kept is not None:
                    return kept
            stopped = await self._stop(tracker, finish=False)
            if stopped is not None:
                return stopped
            return await self._start(tracker, preflight=preflight)

    async def discover(self, *, ray: bool = True) -> Discovery:
        """What of ours runs on the nodes now: vLLM (pid file + process), containers, processes, Ray."""
        return await discover_engine(self._nodes, self._ray, ray=ray)

    async def ray_state_once(self, timeout: float = 20.0) -> RayState | None:
        """One reading of Ray's node list from the head (``None`` if Ray does not answer)."""
        return await self._ray.state_once(timeout)

    async def watch_ray(self, on_state: Callable[[RayState], None], *, interval: float = 1.0) -> None:
        """Ray readings from the head every ``interval`` s until cancelled."""
        await self._ray.watch(on_state, interval=interval)

    async def set_desired(self, state: Desired) -> None:
        """Keep what was asked for on the head (``remote/desired_store.py``)."""
        await write_desired(self._nodes, state, self.origin)

    async def desired(self) -> DesiredState | None:
        """The desired state kept on the head (``None``: never set, or not readable now)."""
        return await read_desired(self._nodes)

    async def write_presence(self, presence: SupervisorPresence) -> bool:
        """The supervisor's record on the head (``remote/presence_store``); ``False``: not written now."""
        return await write_presence(self._nodes, presence)

    async def presence(self) -> SupervisorPresence | None:
        """The supervisor's record on the head (``None``: never one); ``TransportError``: not read now."""
        return await read_presence(self._nodes)

    async def image_in_use(self) -> ImageInUse | None:
        """The image ``sparktui upgrade`` promoted, kept on the head (``None``: none, or not read now)."""
        return await read_image_in_use(self._nodes)

    async def lock_holder(self) -> L.LockHolder | None:
        """Who holds the operation lock now (another sparktui's start/stop/restart), if anyone."""
        return await self._gate.holder()

    async def resolve_homes(self, quiet: bool = False) -> None:
        """Fill ``homes`` for the nodes not resolved yet; ``quiet``: an unreachable node stays unresolved
        (its paths keep their ``~``) instead of raising ``TransportError``."""
        await self._nodes.resolve_homes(quiet)

    def log_path(self, node: str | None = None) -> str:
        """The vLLM log on ``node`` (default: the head), ``~`` expanded when the home is known."""
        return P.vllm_log_path(self.config, self.homes or None, node or self.config.head.name)

    def hold(self, kind: str) -> contextlib.AbstractAsyncContextManager[None]:
        """The operation lock for a compound operation's length (``OperationGate.held``)."""
        return self._gate.held(kind)

    # -- operations --------------------------------------------------------------------------------
    def _exclusive(self, kind: str) -> contextlib.AbstractAsyncContextManager[None]:
        return self._gate.exclusive(kind)

    def _tracker(self, kind: str) -> Tracker:
        tracker = Tracker(kind, self._publish)
        if self._gate.note:
            tracker.add(StepView(name="operation lock", node=self.config.head.name, status=StepStatus.WARNING,
                                 message=self._gate.note))
        return tracker

    def _publish(self, view: OperationView) -> None:
        self.operation = view
        if self.on_progress is not None:
            self.on_progress(view)

    def ready_timeout(self) -> ReadyTimeout | None:
        """vLLM's engine-ready timeout for this start, from the run history (unreadable: none known)."""
        return engine_ready_timeout(_runs(self.history), self.config.engine.env)

    async def _run_plan(self, tracker: Tracker, plan: P.Plan, *, stop_on_failure: bool) -> StepView | None:
        return await self._runner.run_plan(tracker, plan, stop_on_failure=stop_on_failure)

    async def _start(self, tracker: Tracker, *, preflight: bool) -> OperationView:
        self._runner.marks = {"start": time.time()}
        self.config = self._nodes.config = await config_for_start(self._nodes, self.given_config,
                                                                  self.trial_image)
        rdma: dict[str, bool] | None = None
        if preflight:
            summary = await self._preflight_checks.run(tracker)
            if not summary.ok:
                return tracker.finish(False, summary.message())
            rdma = self._preflight_checks.rdma
            # The recipe's fast-load flags, where this image's vLLM accepts them (its help, just read).
            self.config, step = load_args_step(self.config, self._preflight_checks.help_text)
            if step is not None:
                tracker.add(step)
        else:
            await self.resolve_homes()
        plan = P.build_start_plan(self.config, self.homes or None, rdma, early_workers=self.early_workers,
                                  ready_timeout=self.ready_timeout())
        failed = await self._run_plan(tracker, plan, stop_on_failure=True)
        if failed is not None:
            undone = await self._undo(tracker)
            return tracker.finish(False, f"start failed at {failed.name}"
                                  + (f" on {failed.node}" if failed.node else "") + f": {failed.message}; "
                                  + undone)
        where = self.log_path()
        return tracker.finish(True, f"vLLM launched; log: {self.config.head.name}:{where}")

    async def _restart_vllm(self, tracker: Tracker) -> OperationView | None:
        """``engine.restart = "vllm"``: restart vLLM alone while Ray and the containers are healthy.
        ``None``: they are not (the step says why) and the caller does the full restart."""
        head = self.config.head.name
        idx = tracker.add(StepView(name="keep Ray and containers", node=head, status=StepStatus.RUNNING))
        t0 = time.monotonic()
        found = await self.discover()
        why = P.keep_ray_problem(self.config, found)
        seconds = round(time.monotonic() - t0, 3)
        if why is not None:
            tracker.update(idx, status=StepStatus.WARNING, seconds=seconds,
                           message=f"full restart instead: {why}")
            return None
        ray = found.ray_readiness.diagnosis if found.ray_readiness else "no Ray (executor mp)"
        tracker.update(idx, status=StepStatus.OK, seconds=seconds, message=f"kept: {ray}")
        self._runner.marks = {"start": time.time()}
        await self.resolve_homes()
        plan = P.build_vllm_restart_plan(self.config, self.homes or None, self.ready_timeout())
        failed = await self._run_plan(tracker, plan, stop_on_failure=True)
        if failed is not None:
            return tracker.finish(False, f"restart of vLLM failed at {failed.name}"
                                  + (f" on {failed.node}" if failed.node else "") + f": {failed.message}")
        return tracker.finish(True, f"vLLM restarted, Ray and containers kept; log: {head}:{self.log_path()}")

    async def _attach_running(self, tracker: Tracker) -> OperationView | None:
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

    async def _stop_finished(self, tracker: Tracker) -> OperationView:
        view = await self._stop(tracker)
        assert view is not None
        return view

    async def _undo(self, tracker: Tracker) -> str:
        """A failed start undoes what it started (the stop plan, its rows prefixed "undo: "), so no Ray head
        or worker-join helper is left behind for the next start to trip on; what it says for the message."""
        plan = dataclasses.replace(P.build_stop_plan(self.config, self.homes or None), row_prefix="undo: ")
        first = len(tracker.view.steps)
        await self._run_plan(tracker, plan, stop_on_failure=False)
        bad = [s for s in tracker.view.steps[first:]
               if s.name == "undo: nothing left" and s.status is not StepStatus.OK]
        if not bad:
            return "undone: nothing of ours remains on any node"
        remains = "; ".join(f"{s.node}: {s.message}" for s in bad)
        return f"not fully undone ({remains}): run `sparktui stop` once every node answers"

    async def _stop(self, tracker: Tracker, *, finish: bool = True) -> OperationView | None:
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


def _runs(history: Callable[[], Sequence[RunRecord]]) -> Sequence[RunRecord]:
    """The run history, or none when it cannot be read."""
    try:
        return history()
    except (OSError, ValueError):
        return ()


__all__ = ["EngineController", "EngineState", "ProgressCallback", "output_tail"]
