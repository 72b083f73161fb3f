"""``SshBackend``: the real cluster behind the dashboard.

It puts the parts together and posts what happens as ``sparktui.domain.events``, each part one job:

- ``NodeWatch`` (``node_watch``): transports (one per node, reconnecting) → link states and host facts;
  the probe per node → samples;
- ``LogFeed`` (``log_feed``): the head's vLLM log (followed from its last byte after any drop) → records,
  and the init-stage timeline through ``EngineFeed``, which posts the engine's state with it; a node's Ray
  worker log when picked;
- ``Operations`` (``operations``): the ``EngineController`` → operations (start, stop, restart), re-attach
  on launch, another sparktui's operation, the automatic restart and the memory guard's stop;
- ``ReadyWatch`` (``ready_watch``): after "Application startup complete" → verify that it can generate,
  then watch ``/health`` and ``/metrics`` until it stops or crashes; Ray's view while it runs.

Run history is written at every ready or failure. All the engine evidence goes to one ``EngineSession``
(``sparktui.domain.engine_session``), which decides the state and asks, through the ports plugged here,
for the readiness check, the history record, the Ray watch and an automatic restart (its budget is the
session's restart policy). The parts share a ``BackendWiring``: config, session, transports, controller.

The engine lives on the nodes, detached: cancelling ``run`` (quitting the dashboard) stops watching,
never the engine.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from sparktui.config import SparkConfig
from sparktui.domain.engine_session import EnginePorts, EngineSession
from sparktui.domain.engine_state import Record
from sparktui.domain.events import EngineState, EventSink, EventStream
from sparktui.domain.history import HistoryStore
from sparktui.domain.run_record import history_entry
from sparktui.domain.telemetry import Sample
from sparktui.remote.backend_wiring import BackendWiring
from sparktui.remote.cluster import close_cluster, open_cluster
from sparktui.remote.engine import EngineController
from sparktui.remote.log_feed import FLUSH_INTERVAL, QUIET_TICK, STREAM_BATCH_SECONDS, LogFeed
from sparktui.remote.node_watch import NodeWatch
from sparktui.remote.operations import Operations
from sparktui.remote.ready_watch import ReadyWatch
from sparktui.remote.transport import Transport

__all__ = ["FLUSH_INTERVAL", "QUIET_TICK", "STREAM_BATCH_SECONDS", "SshBackend"]

log = logging.getLogger(__name__)


class SshBackend:
    """A ``ClusterBackend`` over SSH (or local) transports to the configured nodes."""

    #: The engine runs detached on the nodes: quitting the dashboard leaves it running.
    detached = True

    def __init__(
        self,
        config: SparkConfig,
        *,
        readonly: bool = False,
        transports: dict[str, Transport] | None = None,
        history: HistoryStore | None = None,
        origin: str = "the dashboard",
        restarts_by: str | None = None,
    ) -> None:
        self.config = config
        self.node_names: Sequence[str] = [n.name for n in config.nodes]
        self._given_transports = transports
        self.history = history or HistoryStore()
        #: Where events go: to ``run``'s sink (nothing is posted before), then to the observers of their kind.
        self.events = EventStream()
        #: The engine's state from all the evidence, and what follows from it (its restart policy among it):
        #: the evidence the parts collect goes in; what it asks for comes back through these ports.
        self.session = EngineSession.for_config(config, ports=EnginePorts(
            verify=lambda: self.ready.begin(), unwatch=lambda: self.ready.stop(), record=self._record_run,
            restart=lambda decision: self.operations.auto_restart(decision), publish=self.events.post,
            show=lambda: self.logs.engine.publish_moved(),
            watch_ray=lambda evidence: self.ready.ray_follows(evidence)), restarts_by=restarts_by)
        #: Who asks for its operations, as the operation lock and the desired state name it.
        self.origin = origin
        self.wiring = BackendWiring(config, self.session, self.events.post)
        self.nodes = NodeWatch(self.wiring)
        self.logs = LogFeed(self.wiring)
        self.operations = Operations(self.wiring, lambda: self.logs.timeline,
                                     readonly=readonly or config.ui.readonly,
                                     follow_supervisor=restarts_by is None)
        self.ready = ReadyWatch(self.wiring, self.logs.engine)

    @property
    def readonly(self) -> bool:
        return self.operations.readonly

    @property
    def transports(self) -> dict[str, Transport]:
        return self.wiring.transports

    @property
    def controller(self) -> EngineController | None:
        return self.wiring.controller

    @controller.setter
    def controller(self, controller: EngineController | None) -> None:
        self.wiring.controller = controller

    # -- ClusterBackend ----------------------------------------------------------------------------
    async def run(self, sink: EventSink) -> None:
        self.events.sink = sink
        wiring = self.wiring
        wiring.transports = self._given_transports or await open_cluster(self.config, connect=False)
        for transport in wiring.transports.values():
            transport.add_listener(self.nodes.on_link)
            self.nodes.on_link(transport.name, transport.state)
        if self._given_transports is None:
            await asyncio.gather(*(t.connect() for t in wiring.transports.values()))
        wiring.controller = EngineController(self.config, wiring.transports,
                                             on_progress=self.operations.on_progress,
                                             on_busy=self.operations.on_busy, origin=self.origin)
        try:
            async with asyncio.TaskGroup() as group:
                for node in self.config.nodes:
                    group.create_task(self.nodes.facts(node.name))
                    group.create_task(self.nodes.telemetry(node.name, self._on_sample))
                group.create_task(self.operations.discover())
                group.create_task(self.operations.watch_lock())
                group.create_task(self.logs.follow_engine_log())
                group.create_task(self.logs.flush_loop())
        finally:
            wiring.cancel_tasks()
            if self._given_transports is None:
                await close_cluster(wiring.transports)

    async def start(self) -> None:
        await self.operations.start()

    async def stop(self) -> None:
        await self.operations.stop()

    async def restart(self) -> None:
        await self.operations.restart()

    async def smoke_test(self) -> str:
        from sparktui.remote.api_client import EngineApi

        if self.session.state is not EngineState.READY:
            raise RuntimeError(f"the engine is {self.session.state.value}, not ready")
        serving = self.config.serving
        api = await EngineApi.connect(self.wiring.head_transport(), "127.0.0.1", self.config.engine.api_port)
        async with api:
            result = await api.smoke_test(self.wiring.served_model(), serving.smoke_prompt,
                                          serving.smoke_max_tokens)
        return result.summary()

    def select_log(self, source: str) -> None:
        """``vllm`` (the head's engine log, always followed) or ``ray:<node>`` (a node's Ray worker log)."""
        self.logs.select(source)

    @property
    def log_source(self) -> str:
        return self.logs.source

    # -- between the parts -------------------------------------------------------------------------
    def _on_sample(self, name: str, sample: Sample) -> None:
        """A node's sample, after its panel: the evidence each part weighs."""
        self.ready.observe(name, sample)
        self.session.gpu(name, sample)
        # The node's own process list says its raylet died 15 s before Ray's health check does.
        self.session.raylet(name, any(p.kind == "raylet" for p in sample.processes))
        self.operations.guard_memory(name, sample)
        self.ready.count_roce(name, sample)

    def _record_run(self, record: Record) -> None:
        """The session's ``record`` port: the run (ready or failed) into the history, with its timeline."""
        try:
            self.history.append(history_entry(record, self.logs.timeline.snapshot(), self.config))
        except OSError as exc:
            log.warning("run history not written: %s", exc)
