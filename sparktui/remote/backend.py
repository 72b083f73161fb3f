"""``SshBackend``: the real cluster behind the dashboard.

It puts the parts together and posts what happens as ``sparktui.domain.events``:
transports (one per node, reconnecting) → link states and host facts; the probe per node → samples;
the head's vLLM log (followed from its last byte after any drop) → records and the init-stage timeline;
the ``EngineController`` → operations (preflight, start, stop, restart) and re-attach on launch;
after "Application startup complete" → verify that it can generate, then watch ``/health`` and
``/metrics`` until it stops or crashes. Run history is written at every ready or failure.

The engine lives on the nodes, detached: cancelling ``run`` (quitting the dashboard) stops watching,
never the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Coroutine, Sequence
from dataclasses import replace
from typing import Any

from sparktui.config import SparkConfig
from sparktui.domain.events import (
    EngineChanged,
    EngineState,
    Event,
    EventSink,
    LogRecords,
    NodeFacts,
    NodeLinkChanged,
    NodeSampled,
    Notice,
    OperationChanged,
    OperationRefused,
    OperationView,
    StepStatus,
)
from sparktui.domain.history import HistoryStore, format_duration, record_from_timeline
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle.discovery import DetachedState
from sparktui.domain.logs import Timeline, TimelineSnapshot
from sparktui.domain.logs.ingest import LogIngest
from sparktui.domain.readiness import RestartBudget
from sparktui.remote.cluster import close_cluster, open_cluster
from sparktui.remote.engine import EngineController
from sparktui.remote.host_facts import read_host_facts
from sparktui.remote.log_follower import LogFollower
from sparktui.remote.transport import LinkPhase, LinkState, Transport, TransportError

log = logging.getLogger(__name__)

#: How often batched log records and timeline changes are posted (the UI redraws at about this rate).
FLUSH_INTERVAL = 0.1
#: Seconds between looks at the head's operation lock (another sparktui's start/stop/restart).
LOCK_POLL_INTERVAL = 3.0
#: Seconds before host facts are asked for again when a node did not answer.
FACTS_RETRY_SECONDS = 10.0


class SshBackend:
    """A ``ClusterBackend`` over SSH (or local) transports to the configured nodes."""

    def __init__(
        self,
        config: SparkConfig,
        *,
        readonly: bool = False,
        transports: dict[str, Transport] | None = None,
        history: HistoryStore | None = None,
    ) -> None:
        self.config = config
        self.readonly = readonly or config.ui.readonly
        self.node_names: Sequence[str] = [n.name for n in config.nodes]
        self._given_transports = transports
        self.transports: dict[str, Transport] = {}
        self.controller: EngineController | None = None
        self.history = history or HistoryStore()
        self.budget = RestartBudget(config.serving.auto_restart_limit)
        self._sink: EventSink | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        # The engine log and what it says; the log shown (the engine's, or a node's Ray worker log).
        self._engine_log = LogIngest(len(config.nodes), display_cap=config.ui.log_buffer_lines)
        self._shown_log = self._engine_log
        self._timeline_dirty = False
        self._run_started = time.time()
        # The engine's state as shown.
        self._state = EngineState.UNKNOWN
        self._detail = ""
        self._ttft: float | None = None
        self._vllm_version: str | None = None
        self._watch: asyncio.Task[Any] | None = None
        #: When the running engine was verified ready (monotonic), for "crashed after …".
        self._ready_since: float | None = None
        self._recorded_run = False
        self._log_source = "vllm"
        self._side_follower: asyncio.Task[Any] | None = None
        #: How commands run on the head (docker or host); the process check runs every serving poll.
        self._head_runtime = P.runtimes(config)[config.head.name]
        #: The stop plan's step names: while one of them runs, a restart is still stopping.
        self._stop_steps = frozenset(step.name for step in P.build_stop_plan(config, None).steps)
        #: Set on every (re)connection of a node: its host facts are read again.
        self._connected = {name: asyncio.Event() for name in self.node_names}

    # -- ClusterBackend ----------------------------------------------------------------------------
    async def run(self, sink: EventSink) -> None:
        self._sink = sink
        self.transports = self._given_transports or await open_cluster(self.config, connect=False)
        for transport in self.transports.values():
            transport.add_listener(self._on_link)
            self._on_link(transport.name, transport.state)
        if self._given_transports is None:
            await asyncio.gather(*(t.connect() for t in self.transports.values()))
        self.controller = EngineController(self.config, self.transports, on_progress=self._on_operation)
        try:
            async with asyncio.TaskGroup() as group:
                for node in self.config.nodes:
                    group.create_task(self._facts(node.name))
                    group.create_task(self._telemetry(node.name))
                group.create_task(self._discover())
                group.create_task(self._watch_lock())
                group.create_task(self._follow_engine_log())
                group.create_task(self._flush_loop())
        finally:
            for task in list(self._tasks):
                task.cancel()
            if self._given_transports is None:
                await close_cluster(self.transports)

    async def start(self) -> None:
        self.budget.manual_start()
        await self._operation("start")

    async def stop(self) -> None:
        await self._operation("stop")

    async def restart(self) -> None:
        self.budget.manual_start()
        await self._operation("restart")

    async def smoke_test(self) -> str:
        from sparktui.remote.api_client import EngineApi

        if self._state is not EngineState.READY:
            raise RuntimeError(f"the engine is {self._state.value}, not ready")
        serving = self.config.serving
        api = await EngineApi.connect(self._head_transport(), "127.0.0.1", self.config.engine.api_port)
        async with api:
            result = await api.smoke_test(self._served_model(), serving.smoke_prompt,
                                          serving.smoke_max_tokens)
        return result.summary()

    def select_log(self, source: str) -> None:
        """``vllm`` (the head's engine log, always followed) or ``ray:<node>`` (a node's Ray worker log)."""
        if source == self._log_source:
            return
        self._log_source = source
        if self._side_follower is not None:
            self._side_follower.cancel()
            self._side_follower = None
        if source.startswith("ray:"):
            self._shown_log = LogIngest(display_cap=self.config.ui.log_buffer_lines)
            self._side_follower = self._spawn(self._follow_ray_log(source.removeprefix("ray:")))
        else:
            self._shown_log = self._engine_log

    # -- plumbing ----------------------------------------------------------------------------------
    def _post(self, event: Event) -> None:
        if self._sink is not None:
            self._sink(event)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _head_transport(self) -> Transport:
        return self.transports[self.config.head.name]

    def _served_model(self) -> str:
        return self.config.engine.served_model_name or self.config.engine.model

    def _on_link(self, node: str, state: LinkState) -> None:
        if state.phase is LinkPhase.CONNECTED:
            self._connected[node].set()
        self._post(NodeLinkChanged(node, state.phase.value, state.describe(), state.retry_at))

    def _set_engine(self, state: EngineState, detail: str = "") -> None:
        self._state, self._detail = state, detail
        self._publish_engine()

    def _publish_engine(self) -> None:
        snapshot = self._timeline.snapshot(time.time())
        self._post(EngineChanged(self._state, self._detail, snapshot,
                                 self._vllm_version or snapshot.vllm_version, self._ttft))

    # -- nodes -------------------------------------------------------------------------------------
    async def _facts(self, name: str) -> None:
        """Hostname, kernel, uptime: once per connection (again after every reconnect)."""
        transport = self.transports[name]
        node = self.config.node(name)
        connected = self._connected[name]
        while True:
            await connected.wait()
            connected.clear()
            try:
                res, facts = await read_host_facts(transport, node, timeout=20)
                ok = res.ok and facts.complete
            except TransportError:
                ok = False
            if ok:
                self._post(NodeFacts(name, facts.hostname or "", facts.kernel or "", facts.uptime_seconds))
            else:
                # Not answered (the link dropped again, or the node is busy): ask again shortly.
                self._spawn(self._again_later(connected, FACTS_RETRY_SECONDS))

    @staticmethod
    async def _again_later(event: asyncio.Event, seconds: float) -> None:
        await asyncio.sleep(seconds)
        event.set()

    async def _telemetry(self, name: str) -> None:
        from sparktui.remote.probe_runner import engine_probe_args, stream_samples

        node = self.config.node(name)
        errors_told: set[str] = set()

        def on_error(message: str) -> None:
            if message not in errors_told:
                errors_told.add(message)
                self._post(Notice(message, "warning"))

        async for sample in stream_samples(self.transports[name], node, self.config.ui.refresh_interval,
                                           name_prefix=self.config.engine.name_prefix, on_error=on_error,
                                           extra_args=engine_probe_args(self.config.engine)):
            self._post(NodeSampled(name, sample))

    # -- engine: discovery and operations ---------------------------------------------------------
    async def _discover(self) -> None:
        """Re-attach: what runs of ours on the nodes decides the state until the log says more."""
        assert self.controller is not None
        delay = 1.0
        while True:
            try:
                await self._head_transport().wait_connected(timeout=30)
                found = await self.controller.discover()
            except TransportError as exc:
                # Shown, and tried again for as long as the dashboard runs: the head may come back.
                self._set_engine(EngineState.UNKNOWN, f"head unreachable: {exc}")
                await asyncio.sleep(delay)
                delay = min(delay * 2, 15.0)
                continue
            if self._state is EngineState.UNKNOWN or self.controller.busy is None:
                self._adopt(found.state, found.detail)
            if found.running:
                self._post(Notice(f"re-attached to the running engine ({found.detail})"))
            return

    async def _watch_lock(self) -> None:
        """Another sparktui's operation (its lock on the head) is shown as the running operation, which
        disables the lifecycle buttons; when it ends, what runs now is discovered again."""
        assert self.controller is not None
        shown: OperationView | None = None
        me = (socket.gethostname(), os.getpid())
        while True:
            await asyncio.sleep(LOCK_POLL_INTERVAL)
            if self.controller.busy is not None:
                continue
            holder = await self.controller.lock_holder()
            if holder is not None and (holder.host, holder.pid) == me:
                continue
            if holder is not None:
                view = OperationView(kind=holder.kind, running=True, started=holder.started,
                                     message=f"held by another sparktui: {holder.describe()}")
                if shown is None or view.message != shown.message:
                    shown = view
                    self._post(OperationChanged(view))
            elif shown is not None:
                self._post(OperationChanged(replace(shown, running=False, ok=True,
                                                    message=shown.message.replace("held by", "done by", 1))))
                shown = None
                with contextlib.suppress(TransportError):
                    found = await self.controller.discover()
                    if self.controller.busy is None:
                        self._adopt(found.state, found.detail)

    def _adopt(self, state: EngineState, detail: str) -> None:
        """The discovered state, refined by what the log already said (its timeline outranks it)."""
        snapshot = self._timeline.snapshot()
        if state is EngineState.STARTING and snapshot.outcome == "ready":
            self._begin_verify()
            return
        if state in (EngineState.STARTING, EngineState.FAILED) and snapshot.outcome == "failed" \
                and snapshot.failure is not None:
            self._set_engine(EngineState.FAILED, _failure_text(snapshot))
            return
        if state is EngineState.STARTING and snapshot.current is not None:
            detail = snapshot.current
        self._set_engine(state, detail)

    async def _operation(self, kind: str) -> None:
        if self.readonly:
            raise OperationRefused("read-only mode: start, stop and restart are disabled")
        if self.controller is None:
            raise OperationRefused("not connected yet")
        if self.controller.busy is not None:
            raise OperationRefused(f"{self.controller.busy} is already running; wait for it to finish")
        if kind in ("stop", "restart"):
            self._stop_watch()
            if not self._recorded_run and self._timeline.snapshot().outcome == "incomplete" \
                    and self._state is EngineState.STARTING:
                self._record_run("stopped")
        if kind in ("start", "restart"):
            self._ready_since = None
            self._run_started = time.time()
            self._recorded_run = False
            self._ttft = None
        view: OperationView = await getattr(self.controller, kind)()
        self._finish_operation(view)

    def _on_operation(self, view: OperationView) -> None:
        self._post(OperationChanged(view))
        if not view.running:
            return
        if view.kind == "stop":
            self._set_engine(EngineState.STOPPING, _running_step(view))
        elif view.kind in ("start", "restart", "preflight"):
            step = _running_step(view)
            stopping = view.kind == "restart" and any(
                s.name in self._stop_steps for s in view.steps if s.status is StepStatus.RUNNING)
            state = EngineState.STOPPING if stopping else (
                EngineState.PREFLIGHT if "preflight" in step or view.kind == "preflight"
                else EngineState.STARTING)
            if self._state is not state or self._detail != step:
                self._set_engine(state, step)

    def _finish_operation(self, view: OperationView) -> None:
        if view.kind == "stop" or view.kind == "clean":
            self._set_engine(EngineState.STOPPED if view.ok else EngineState.FAILED,
                             "" if view.ok else view.message)
        elif view.kind in ("start", "restart"):
            if view.ok:
                snapshot = self._timeline.snapshot()
                self._set_engine(EngineState.STARTING, snapshot.current or "vllm serve launched")
            else:
                self._set_engine(EngineState.FAILED, view.message)
        elif view.kind == "preflight":
            self._set_engine(self._state, view.message)
        level = "information" if view.ok else "error"
        self._post(Notice(f"{view.kind}: {view.message or ('done' if view.ok else 'failed')}", level))

    # -- engine: the log ---------------------------------------------------------------------------
    async def _follow_engine_log(self) -> None:
        assert self.controller is not None
        head = self.config.head
        follower = LogFollower(
            self._head_transport(), self.controller.log_path(), self._on_log_bytes,
            python=(head.python,), on_reset=self._on_log_reset,
        )
        await follower.run()

    def _on_log_reset(self) -> None:
        """A new log file (a new engine run): start a fresh timeline."""
        self._engine_log.reset()
        self._timeline_dirty = True
        self._recorded_run = False

    def _on_log_bytes(self, data: bytes) -> None:
        if self._engine_log.feed(data, time.time()):
            self._timeline_dirty = True

    @property
    def _timeline(self) -> Timeline:
        return self._engine_log.timeline

    async def _follow_ray_log(self, node: str) -> None:
        from sparktui.remote.ray_logs import ray_worker_log_path

        transport = self.transports.get(node)
        if transport is None:
            self._post(Notice(f"no node named {node}", "error"))
            return
        try:
            homes = self.controller.homes if self.controller else None
            path = await ray_worker_log_path(self.config, transport, node, homes or None)
        except TransportError as exc:
            self._post(Notice(f"{node}: Ray worker log not reachable: {exc}", "warning"))
            return
        if path is None:
            self._post(Notice(f"{node}: no Ray worker log found (is Ray running there?)", "warning"))
            return

        shown = self._shown_log

        def on_bytes(data: bytes) -> None:
            shown.feed(data)

        await LogFollower(transport, path, on_bytes, python=(self.config.node(node).python,)).run()

    async def _flush_loop(self) -> None:
        """Post log records in batches and the timeline when it changed, at a steady rate."""
        while True:
            await asyncio.sleep(FLUSH_INTERVAL)
            batch = self._shown_log.take_records(time.monotonic())
            if batch:
                self._post(LogRecords(self._log_source, batch))
            if self._timeline_dirty:
                self._timeline_dirty = False
                self._on_timeline()

    def _on_timeline(self) -> None:
        snapshot = self._timeline.snapshot()
        busy = self.controller.busy if self.controller else None
        if snapshot.outcome == "failed" and self._state not in (EngineState.STOPPING,):
            if not self._recorded_run:
                self._record_run("failed")
            if busy is None:
                if self._state is EngineState.READY and self._ready_since is not None:
                    # The log says why a serving engine died: say it as the crash it is.
                    failure = snapshot.failure
                    cause = failure.message if failure is not None else "see the log"
                    uptime = format_duration(time.monotonic() - self._ready_since)
                    self._set_engine(EngineState.FAILED, f"crashed after {uptime}: {cause}")
                elif self._state is not EngineState.FAILED:
                    self._set_engine(EngineState.FAILED, _failure_text(snapshot))
                return
        elif snapshot.outcome == "ready" and self._state in (EngineState.STARTING, EngineState.UNKNOWN):
            if busy is None:
                self._begin_verify()
                return
        elif self._state is EngineState.STARTING and snapshot.current:
            self._detail = snapshot.current
        self._publish_engine()

    # -- engine: after ready -----------------------------------------------------------------------
    def _begin_verify(self) -> None:
        if self._watch is not None and not self._watch.done():
            return
        self._set_engine(EngineState.VERIFYING, "health, models, one completion")
        self._watch = self._spawn(self._verify_and_watch())

    def _stop_watch(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    async def _verify_and_watch(self) -> None:
        from sparktui.remote.api_client import EngineApi
        from sparktui.remote.serving_watch import ServingWatch, verify_ready

        serving = self.config.serving
        try:
            api = await EngineApi.connect(self._head_transport(), "127.0.0.1", self.config.engine.api_port)
        except (TransportError, OSError) as exc:
            self._set_engine(EngineState.FAILED, f"API port not reachable through SSH: {exc}")
            return
        async with api:
            check = await verify_ready(api, model=self._served_model())
            if not check.ok:
                self._set_engine(EngineState.FAILED, f"not serving: {check.summary()}")
                return
            self._ttft = check.ttft_seconds
            self._vllm_version = check.vllm_version or self._vllm_version
            ready_at = self._ready_since = time.monotonic()
            ttft_ms = 1000 * (self._ttft or 0)
            self._set_engine(EngineState.READY, f"can generate (first token {ttft_ms:.0f} ms)")
            if not self._recorded_run:
                self._record_run("ready", ready_seconds=time.time() - self._run_started)
            watch = ServingWatch(api, ready_at=ready_at, health_fail_seconds=serving.health_fail_seconds,
                                 interval=max(1.0, self.config.ui.refresh_interval),
                                 model_name=self._served_model(), process_alive=self._vllm_alive)
            crash = await watch.run(self._post)
        root = self._timeline.snapshot().failure
        self._set_engine(EngineState.FAILED, crash.describe(root.message if root else None))
        decision = self.budget.decide(serving.auto_restart)
        self._post(Notice(decision.message, "warning" if decision.restart else "error"))
        if decision.restart:
            self.budget.restarted()
            with contextlib.suppress(OperationRefused):
                await self._operation("restart")

    async def _vllm_alive(self) -> bool:
        """Is the detached vLLM process on the head still there? Unknown (head unreachable) counts as
        alive: then ``/health`` alone decides, after ``health_fail_seconds``."""
        assert self.controller is not None
        argv = P.detached_state_argv(self.config, self._head_runtime, self.controller.homes or None)
        try:
            res = await self._head_transport().run(argv, timeout=20)
        except TransportError:
            return True
        return not res.ok or DetachedState.parse(res.stdout).status == "running"

    def _record_run(self, outcome: str, ready_seconds: float | None = None) -> None:
        self._recorded_run = True
        engine = self.config.engine
        try:
            record = record_from_timeline(
                self._timeline.snapshot(), started_at=self._run_started, model=engine.model,
                image=engine.image if engine.runtime == "docker" else "host", ready_seconds=ready_seconds,
                outcome=outcome, cluster=self.config.cluster.name)
            self.history.append(record)
        except OSError as exc:
            log.warning("run history not written: %s", exc)


def _running_step(view: OperationView) -> str:
    for step in view.steps:
        if step.status is StepStatus.RUNNING:
            return step.name + (f" on {step.node}" if step.node else "")
    return view.kind


def _failure_text(snapshot: TimelineSnapshot) -> str:
    failure = snapshot.failure
    if failure is None:
        return "failed"
    return f"{failure.kind} during {failure.stage}: {failure.message}"


