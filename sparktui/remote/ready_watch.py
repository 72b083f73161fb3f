"""After "Application startup complete": check that the engine generates, then watch it serve
(``/health`` and ``/metrics`` through the head's probe, the detached process) until it stops or crashes;
while it runs, Ray's node list and the head's reach of the other nodes are the session's evidence too."""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any

from sparktui.domain.engine_view import EngineFeed
from sparktui.domain.events import Notice
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle.discovery import DetachedState
from sparktui.domain.logs import nccl
from sparktui.domain.serving_pace import Evidence, ServingPace, baseline_for, settings_from
from sparktui.domain.telemetry import Sample
from sparktui.remote.backend_wiring import BackendWiring
from sparktui.remote.transport import TransportError

if TYPE_CHECKING:
    from sparktui.remote.probed_api import ProbedEngineApi

#: The readiness check's one completion gets this long: an engine that says it is up and cannot produce one
#: token in two minutes is not serving (a wedge right at start would otherwise hold "verifying" for ever).
VERIFY_COMPLETION_SECONDS = 120.0
#: Seconds between readings of Ray's node list while the engine runs (a lost node within 10 s).
RAY_INTERVAL = 1.0


async def _next_reading(_interval: float) -> None:
    """The serving watch's pause when the head's probe paces it: none (its ``health()`` waits for the
    next reading), only a turn of the loop."""
    await asyncio.sleep(0)


class ReadyWatch:
    """The session's ``verify``, ``unwatch`` and ``watch_ray`` ports, and the samples they read."""

    def __init__(self, wiring: BackendWiring, engine: EngineFeed) -> None:
        self._wiring = wiring
        #: The engine log's feed: its lines go into the session before a crash is told.
        self._engine = engine
        self._watch: asyncio.Task[Any] | None = None
        #: The serving watch's source while it runs: the head's samples feed it.
        self._probed_api: ProbedEngineApi | None = None
        #: Ray's node list and the head's reach of the other nodes, watched while the engine runs.
        self._evidence: list[asyncio.Task[Any]] = []
        #: How commands run on the head (docker or host): the serving watch's process check.
        self._head_runtime = P.runtimes(wiring.config)[wiring.config.head.name]
        #: RoCE traffic during the start, to weigh the log's NCCL verdict (sparktui.domain.logs.nccl).
        self._roce = nccl.RoceActivity()
        #: Each node's GPU clock events now (thermal, power cap …): evidence for a slowdown's cause.
        self._clock_events: dict[str, tuple[str, ...]] = {}

    def observe(self, name: str, sample: Sample) -> None:
        """A node's sample: the head's feeds the serving watch while it runs."""
        self._clock_events[name] = tuple(dict.fromkeys(e for g in sample.gpu.devices for e in g.clock_events))
        if name == self._wiring.config.head.name and self._probed_api is not None:
            self._probed_api.offer(sample)

    def count_roce(self, name: str, sample: Sample) -> None:
        """A node's RoCE traffic, counted against the stage the log is in (for the NCCL cross-check)."""
        self._roce.observe(name, {p.device: (p.rx_bytes_total or 0) + (p.tx_bytes_total or 0)
                                  for p in sample.rdma if p.active}, self._engine.timeline.snapshot().current)

    def begin(self) -> None:
        """The session's ``verify`` port: the engine said it is up."""
        if self._watch is not None and not self._watch.done():
            return
        self._nccl_cross_check()
        self._watch = self._wiring.spawn(self._verify_and_watch())

    def _nccl_cross_check(self) -> None:
        """At ready: the log's NCCL verdict against the RoCE counters; a disagreement is said once."""
        said = nccl.verdict(self._engine.timeline.snapshot().facts)
        checked = nccl.cross_check(said, self._roce.moved())
        if checked is not None and checked.level == "warning" and (said is None or said.level == "ok"):
            self._wiring.post(Notice(checked.text, "warning"))
        self._roce.reset()

    def stop(self) -> None:
        """The session's ``unwatch`` port."""
        # Never the task that asks (a crash it reported ends it anyway).
        if self._watch is not None and self._watch is not asyncio.current_task():
            self._watch.cancel()
        self._watch = None

    async def _verify_and_watch(self) -> None:
        from sparktui.remote.api_client import EngineApi
        from sparktui.remote.probed_api import ProbedEngineApi, reading_wait_seconds
        from sparktui.remote.serving_watch import ServingWatch, verify_ready

        wiring = self._wiring
        config, session = wiring.config, wiring.session
        try:
            api = await EngineApi.connect(wiring.head_transport(), "127.0.0.1", config.engine.api_port,
                                          completion_timeout=VERIFY_COMPLETION_SECONDS)
        except (TransportError, OSError) as exc:
            session.verify_failed(f"API port not reachable through SSH: {exc}")
            return
        async with api:
            check = await verify_ready(api, model=wiring.served_model())
            if not check.ok:
                session.verify_failed(f"not serving: {check.summary()}")
                return
            session.verified(check.ttft_seconds, check.vllm_version)
            if session.ready_at is None:
                return    # a later state came first
            # From here the head's probe reads the API: its readings pace the watch (no sleep between).
            probed = ProbedEngineApi(reading_wait_seconds(config.ui.refresh_interval))
            watch = ServingWatch(probed, ready_at=session.ready_at,
                                 health_fail_seconds=config.serving.health_fail_seconds,
                                 interval=config.ui.refresh_interval,
                                 model_name=wiring.served_model(), process_alive=self._vllm_alive,
                                 stall_notice_seconds=math.inf,   # the state machine says "wedged"
                                 pace=self._pace(), evidence=self._slow_evidence,
                                 sleep=_next_reading)

            self._probed_api = probed
            try:
                crash = await watch.run(wiring.post, on_snapshot=session.serving)
            finally:
                if self._probed_api is probed:
                    self._probed_api = None
        # The log's lines read so far go into the state machine first (a stream's next batch can be
        # STREAM_BATCH_SECONDS away): a traceback already here names the crash's cause.
        with session.held():
            self._engine.flush()
            session.crashed(crash)

    def _pace(self) -> ServingPace:
        """The slowdown rule, against the last benchmark of this engine (none: acceptance only)."""
        from sparktui.domain.bench_history import BenchStore

        config = self._wiring.config
        try:
            history = BenchStore().load()
        except OSError:
            history = []
        return ServingPace(settings_from(config.serving), baseline_for(config, history))

    def _slow_evidence(self) -> Evidence:
        """What else points at a slowdown's cause: the log's NCCL verdict, GPU clock events, time served."""
        said = nccl.verdict(self._engine.timeline.snapshot().facts)
        return Evidence(
            nccl_warning=said.text if said is not None and said.level == "warning" else None,
            clock_events={node: events for node, events in self._clock_events.items() if events},
            served_seconds=self._wiring.session.truth.ready_for,
        )

    async def _vllm_alive(self) -> bool:
        """Is the detached vLLM process on the head still there? Unknown (head unreachable) counts as
        alive: then ``/health`` alone decides, after ``health_fail_seconds``."""
        controller = self._wiring.controller
        assert controller is not None
        argv = P.detached_state_argv(self._wiring.config, self._head_runtime, controller.homes or None)
        try:
            res = await self._wiring.head_transport().run(argv, timeout=20)
        except TransportError:
            return True
        return not res.ok or DetachedState.parse(res.stdout).status == "running"

    # -- Ray's view ----------------------------------------------------------------------------------
    def ray_follows(self, evidence: bool) -> None:
        """The session's ``watch_ray`` port: Ray's node list and the head's reach are watched while they are
        evidence (a running engine, no operation)."""
        wanted = evidence and self._wiring.controller is not None
        if wanted and not self._evidence:
            self._evidence = self._start_evidence_watches()
        elif not wanted and self._evidence:
            for task in self._evidence:
                task.cancel()
            self._evidence = []

    def _start_evidence_watches(self) -> list[asyncio.Task[Any]]:
        """Ray's node list and the head's reach of each other node, as the state machine's evidence."""
        from sparktui.remote.peer_watch import peers_of, reach_argv, watch_peers

        wiring = self._wiring
        assert wiring.controller is not None
        peers = peers_of(wiring.config)
        tasks = [wiring.spawn(wiring.controller.watch_ray(wiring.session.ray, interval=RAY_INTERVAL))]
        if peers:
            argv = reach_argv(wiring.config.head.python, peers, RAY_INTERVAL, changes=True)
            tasks.append(wiring.spawn(watch_peers(wiring.head_transport(), argv, wiring.session.peer)))
        return tasks
