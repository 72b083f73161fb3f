"""``SshBackend``: the real cluster behind the dashboard.

It puts the parts together and posts what happens as ``sparktui.domain.events``:
transports (one per node, reconnecting) → link states and host facts; the probe per node → samples;
the head's vLLM log (followed from its last byte after any drop) → records, and the init-stage timeline
through ``EngineFeed``, which posts the engine's state with it;
the ``EngineController`` → operations (preflight, start, stop, restart) and re-attach on launch;
after "Application startup complete" → verify that it can generate, then watch ``/health`` and
``/metrics`` until it stops or crashes. Run history is written at every ready or failure.

All the engine evidence goes to one ``EngineSession`` (``sparktui.domain.engine_session``), which decides
the state and asks, through the ports plugged here, for the readiness check, the history record, the Ray
watch and an automatic restart (its budget is the session's restart policy).

The engine lives on the nodes, detached: cancelling ``run`` (quitting the dashboard) stops watching,
never the engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sparktui.config import SparkConfig
from sparktui.domain.deadline import within
from sparktui.domain.engine_session import EnginePorts, EngineSession
from sparktui.domain.engine_state import RUNNING, Record
from sparktui.domain.engine_view import EngineFeed
from sparktui.domain.events import (
    EngineState,
    Event,
    EventSink,
    LogRecords,
    NodeIdentified,
    NodeLinkChanged,
    Notice,
    OperationChanged,
    OperationRefused,
    OperationView,
)
from sparktui.domain.history import HistoryStore, record_from_timeline
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle.discovery import DetachedState
from sparktui.domain.logs import LogIngest, Timeline, nccl
from sparktui.domain.memory_guard import MemoryGuard, MemoryTrip
from sparktui.domain.node_reading import NodeFeed
from sparktui.domain.readiness import RestartDecision
from sparktui.domain.telemetry import Sample
from sparktui.remote.cluster import close_cluster, open_cluster
from sparktui.remote.engine import EngineController
from sparktui.remote.host_facts import read_host_facts
from sparktui.remote.log_follower import LogFollower
from sparktui.remote.transport import LinkPhase, LinkState, Transport, TransportError

if TYPE_CHECKING:
    from sparktui.remote.probed_api import ProbedEngineApi

log = logging.getLogger(__name__)

#: How long the first line after a quiet spell waits for the ones that come with it before it is posted.
FLUSH_INTERVAL = 0.1
#: While lines keep arriving, batches (log records and the timeline's changes) are posted this far apart:
#: a streaming start is drawn twice a second. Each batch is a frame that repaints the whole log pane and
#: its scrollbar (it scrolls), the most costly frame the dashboard draws; at the rate lines came (3-4
#: batches a second) they were most of what a start cost. A line after a quiet spell still shows in 0.1 s.
STREAM_BATCH_SECONDS = 0.5
#: With no log line arriving, how often time is let pass for the state machine's "for N seconds" rules (its
#: clocks count seconds: a quiet engine wakes the backend once a second, not ten times).
QUIET_TICK = 1.0
#: Seconds between looks at the head's operation lock (another sparktui's start/stop/restart).
LOCK_POLL_INTERVAL = 3.0
#: Seconds before host facts are asked for again when a node did not answer.
FACTS_RETRY_SECONDS = 10.0
#: Seconds between readings of Ray's node list while the engine runs (a lost node within 10 s).
RAY_INTERVAL = 1.0
#: Engine states in which the memory guard may stop vLLM (starting and serving): the engine runs.
MEMORY_GUARDED = RUNNING


#: One of the controller's operations, passed as itself (no name looked up at run time).
Operation = Callable[[EngineController], Awaitable[OperationView]]


async def _next_reading(_interval: float) -> None:
    """The serving watch's pause when the head's probe paces it: none (its ``health()`` waits for the
    next reading), only a turn of the loop."""
    await asyncio.sleep(0)


def _start(controller: EngineController) -> Awaitable[OperationView]:
    return controller.start()


def _stop(controller: EngineController) -> Awaitable[OperationView]:
    return controller.stop()


def _restart(controller: EngineController) -> Awaitable[OperationView]:
    return controller.restart()


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
        #: The engine's state from all the evidence, and what follows from it (its restart policy among it):
        #: the evidence collected here goes in; what it asks for comes back through these ports.
        self.session = EngineSession.for_config(config, ports=EnginePorts(
            verify=self._begin_verify, unwatch=self._stop_watch, record=self._record_run,
            restart=self._auto_restart, publish=self._post, show=self._show_engine,
            watch_ray=self._ray_watch_follows))
        self._sink: EventSink | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        #: The engine log and what it says, posted with the state (``EngineChanged``); the log shown (the
        #: engine's, or a node's Ray worker log).
        engine_log = LogIngest(len(config.nodes), display_cap=config.ui.log_buffer_lines)
        self._engine = EngineFeed(self.session, engine_log, self._post)
        self._shown_log = self._engine.log
        #: Set when log bytes arrive (the engine's or the shown one): the flush loop's wake-up.
        self._log_arrived = asyncio.Event()
        self._watch: asyncio.Task[Any] | None = None
        #: The serving watch's source while it runs: the head's samples feed it.
        self._probed_api: ProbedEngineApi | None = None
        #: Ray's node list and the head's reach of the other nodes, watched while the engine runs.
        self._evidence: list[asyncio.Task[Any]] = []
        self._log_source = "vllm"
        self._side_follower: asyncio.Task[Any] | None = None
        #: How commands run on the head (docker or host): the serving watch's process check.
        self._head_runtime = P.runtimes(config)[config.head.name]
        #: Set on every (re)connection of a node: its host facts are read again.
        self._connected = {name: asyncio.Event() for name in self.node_names}
        self._memory_guard = MemoryGuard(config.engine.memory_floor, config.engine.memory_psi_full)
        #: RoCE traffic during the start, to weigh the log's NCCL verdict (sparktui.domain.logs.nccl).
        self._roce = nccl.RoceActivity()
        #: Each node's samples → what its panel shows (``NodeSampled``), posted by the probe runner's loop.
        self._node_feed = NodeFeed(self._post)

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
        self.session.manual_start()
        await self._operation(_start, rearm=True)

    async def stop(self) -> None:
        await self._operation(_stop)

    async def restart(self) -> None:
        self.session.manual_start()
        await self._operation(_restart, rearm=True)

    async def smoke_test(self) -> str:
        from sparktui.remote.api_client import EngineApi

        if self.session.state is not EngineState.READY:
            raise RuntimeError(f"the engine is {self.session.state.value}, not ready")
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
            self._shown_log = self._engine.log

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
        endpoint = self.transports[node].endpoint if self.transports else None
        reason = "" if state.phase is LinkPhase.CONNECTED or not state.last_error else (
            f"{endpoint}: {state.last_error}" if endpoint else state.last_error)
        self._post(NodeLinkChanged(node, state.phase.value, state.describe(), state.retry_at, reason))
        self.session.link(node, state.phase.value)

    def _show_engine(self) -> None:
        """The session's ``show`` port: the engine state is posted when it moved."""
        self._engine.publish_moved()

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
                self._post(NodeIdentified(name, facts.hostname or "", facts.kernel or "",
                                          facts.uptime_seconds))
            else:
                # Not answered (the link dropped again, or the node is busy): ask again shortly.
                self._spawn(self._again_later(connected, FACTS_RETRY_SECONDS))

    @staticmethod
    async def _again_later(event: asyncio.Event, seconds: float) -> None:
        await asyncio.sleep(seconds)
        event.set()

    async def _telemetry(self, name: str) -> None:
        from sparktui.remote.probe_runner import engine_api_probe_args, engine_probe_args, stream_samples

        node = self.config.node(name)
        head = name == self.config.head.name
        extra_args = engine_probe_args(self.config.engine)
        if head:
            extra_args += engine_api_probe_args(self.config.engine)
        errors_told: set[str] = set()

        def on_error(message: str) -> None:
            if message not in errors_told:
                errors_told.add(message)
                self._post(Notice(message, "warning"))

        # The feed posts each sample's reading; what comes back here is the evidence the backend weighs.
        async for sample in stream_samples(self.transports[name], node, self.config.ui.refresh_interval,
                                           name_prefix=self.config.engine.name_prefix, on_error=on_error,
                                           extra_args=extra_args, feed=self._node_feed):
            if head and self._probed_api is not None:
                self._probed_api.offer(sample)
            self.session.gpu(name, sample)
            self._guard_memory(name, sample)
            self._roce.observe(name, {p.device: (p.rx_bytes_total or 0) + (p.tx_bytes_total or 0)
                                      for p in sample.rdma if p.active}, self._timeline.snapshot().current)

    def _guard_memory(self, name: str, sample: Sample) -> None:
        """The memory guard (sparktui.domain.memory_guard) sees every sample; a trip stops vLLM."""
        if self._memory_guard.observe(name, sample, armed=self.session.state in MEMORY_GUARDED):
            self._spawn(self._memory_stop(self._memory_guard.tripped))

    async def _memory_stop(self, trip: MemoryTrip | None) -> None:
        """The memory guard tripped: stop vLLM (after a running start step, if one is), then say why."""
        if trip is None:
            return
        self._post(Notice(trip.message, "error"))
        while True:
            try:
                await self._operation(_stop)
            except OperationRefused as exc:
                if self.readonly or self.controller is None:
                    self._post(Notice(f"memory guard: not stopped ({exc})", "error"))
                    return
                await asyncio.sleep(0.5)    # a start step is running: stop right after it
                continue
            break
        self.session.memory_stopped(trip.message)

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
                self.session.unreachable(f"head unreachable: {exc}")
                await asyncio.sleep(delay)
                delay = min(delay * 2, 15.0)
                continue
            # The log read so far refines a running engine (and only a running one): one reading.
            with self.session.held() as session:
                session.timeline(self._timeline.snapshot())
                session.discovered(found.state, found.detail)
                session.ray(found.ray)
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
                        self.session.discovered(found.state, found.detail, again=True)

    async def _operation(self, operation: Operation, *, rearm: bool = False) -> None:
        """Run one of the controller's operations once nothing refuses it; ``rearm``: a start (or restart)
        arms the memory guard again."""
        if self.readonly:
            raise OperationRefused("read-only mode: start, stop and restart are disabled")
        if self.controller is None:
            raise OperationRefused("not connected yet")
        if self.controller.busy is not None:
            raise OperationRefused(f"{self.controller.busy} is already running; wait for it to finish")
        if rearm:
            self._memory_guard.rearm()
        view = await operation(self.controller)
        self._finish_operation(view)

    def _on_operation(self, view: OperationView) -> None:
        self._post(OperationChanged(view))
        self.session.operation(view)

    def _finish_operation(self, view: OperationView) -> None:
        # The state machine saw the finished view as the operation's last progress.
        level = "information" if view.ok else "error"
        self._post(Notice(f"{view.kind}: {view.message or ('done' if view.ok else 'failed')}", level))

    # -- engine: the log ---------------------------------------------------------------------------
    async def _follow_engine_log(self) -> None:
        assert self.controller is not None
        head = self.config.head
        # Bytes straight into the engine feed: no hop through the backend.
        feed, arrived = self._engine.log_bytes, self._log_arrived

        def on_bytes(data: bytes) -> None:
            feed(data)
            arrived.set()

        def on_reset() -> None:
            self._engine.log_reset()
            arrived.set()

        follower = LogFollower(
            self._head_transport(), self.controller.log_path(), on_bytes,
            python=(head.python,), on_reset=on_reset,
        )
        await follower.run()

    @property
    def _timeline(self) -> Timeline:
        return self._engine.timeline

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

        shown, arrived = self._shown_log, self._log_arrived

        def on_bytes(data: bytes) -> None:
            shown.feed(data)
            arrived.set()

        await LogFollower(transport, path, on_bytes, python=(self.config.node(node).python,)).run()

    async def _flush_loop(self) -> None:
        """Post log records in batches and the timeline when it changed: ``FLUSH_INTERVAL`` after the first
        line of a quiet spell, ``STREAM_BATCH_SECONDS`` apart while lines keep coming; let time pass for the
        state machine's "for N seconds" rules, at least every ``QUIET_TICK``."""
        arrived = self._log_arrived
        posted_at = -math.inf
        while True:
            with contextlib.suppress(TimeoutError):
                await within(arrived.wait(), QUIET_TICK)
            arrived.clear()
            await asyncio.sleep(max(FLUSH_INTERVAL, posted_at + STREAM_BATCH_SECONDS - time.monotonic()))
            batch = self._shown_log.take_records(time.monotonic())
            if batch:
                self._post(LogRecords(self._log_source, batch))
                posted_at = time.monotonic()
            with self.session.held():    # the log's news and the time passed: one settle
                self._engine.flush()
                self.session.tick()

    # -- engine: after ready -----------------------------------------------------------------------
    def _begin_verify(self) -> None:
        if self._watch is not None and not self._watch.done():
            return
        self._nccl_cross_check()
        self._watch = self._spawn(self._verify_and_watch())

    def _nccl_cross_check(self) -> None:
        """At ready: the log's NCCL verdict against the RoCE counters; a disagreement is said once."""
        said = nccl.verdict(self._timeline.snapshot().facts)
        checked = nccl.cross_check(said, self._roce.moved())
        if checked is not None and checked.level == "warning" and (said is None or said.level == "ok"):
            self._post(Notice(checked.text, "warning"))
        self._roce.reset()

    def _stop_watch(self) -> None:
        # Never the task that asks (a crash it reported ends it anyway).
        if self._watch is not None and self._watch is not asyncio.current_task():
            self._watch.cancel()
        self._watch = None

    async def _verify_and_watch(self) -> None:
        from sparktui.remote.api_client import EngineApi
        from sparktui.remote.probed_api import ProbedEngineApi, reading_wait_seconds
        from sparktui.remote.serving_watch import ServingWatch, verify_ready

        serving = self.config.serving
        session = self.session
        try:
            api = await EngineApi.connect(self._head_transport(), "127.0.0.1", self.config.engine.api_port)
        except (TransportError, OSError) as exc:
            session.verify_failed(f"API port not reachable through SSH: {exc}")
            return
        async with api:
            check = await verify_ready(api, model=self._served_model())
            if not check.ok:
                session.verify_failed(f"not serving: {check.summary()}")
                return
            session.verified(check.ttft_seconds, check.vllm_version)
            if session.ready_at is None:
                return    # a later state came first
            # From here the head's probe reads the API: its readings pace the watch (no sleep between).
            probed = ProbedEngineApi(reading_wait_seconds(self.config.ui.refresh_interval))
            watch = ServingWatch(probed, ready_at=session.ready_at,
                                 health_fail_seconds=serving.health_fail_seconds,
                                 interval=self.config.ui.refresh_interval,
                                 model_name=self._served_model(), process_alive=self._vllm_alive,
                                 stall_notice_seconds=math.inf,   # the state machine says "wedged"
                                 sleep=_next_reading)

            self._probed_api = probed
            try:
                crash = await watch.run(self._post, on_snapshot=session.serving)
            finally:
                if self._probed_api is probed:
                    self._probed_api = None
        # The log's lines read so far go into the state machine first (a stream's next batch can be
        # STREAM_BATCH_SECONDS away): a traceback already here names the crash's cause.
        with session.held():
            self._engine.flush()
            session.crashed(crash)

    def _auto_restart(self, _decision: RestartDecision) -> None:
        """The session's ``restart`` port: its budget allowed an automatic restart (it told the person which
        attempt). Refused (another operation runs): that one decides what runs next."""
        self._spawn(self._restart_refusable())

    async def _restart_refusable(self) -> None:
        with contextlib.suppress(OperationRefused):
            await self._operation(_restart, rearm=True)

    def _ray_watch_follows(self, evidence: bool) -> None:
        """The session's ``watch_ray`` port: Ray's node list and the head's reach are watched while they are
        evidence (a running engine, no operation)."""
        wanted = evidence and self.controller is not None
        if wanted and not self._evidence:
            self._evidence = self._start_evidence_watches()
        elif not wanted and self._evidence:
            for task in self._evidence:
                task.cancel()
            self._evidence = []

    def _start_evidence_watches(self) -> list[asyncio.Task[Any]]:
        """Ray's node list and the head's reach of each other node, as the state machine's evidence."""
        from sparktui.remote.peer_watch import peers_of, reach_argv, watch_peers

        assert self.controller is not None
        head = self.config.head
        peers = peers_of(self.config)
        tasks = [self._spawn(self.controller.watch_ray(self.session.ray, interval=RAY_INTERVAL))]
        if peers:
            argv = reach_argv(head.python, peers, RAY_INTERVAL, changes=True)
            tasks.append(self._spawn(watch_peers(self._head_transport(), argv, self.session.peer)))
        return tasks

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

    def _record_run(self, record: Record) -> None:
        engine = self.config.engine
        try:
            entry = record_from_timeline(
                self._timeline.snapshot(), started_at=record.started_at, model=engine.model,
                image=engine.image if engine.runtime == "docker" else "host",
                ready_seconds=record.ready_seconds, outcome=record.outcome, cluster=self.config.cluster.name)
            self.history.append(entry)
        except OSError as exc:
            log.warning("run history not written: %s", exc)
