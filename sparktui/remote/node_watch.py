"""The nodes, one by one: each link's state (and the host facts read again after every reconnection),
and each node's probe stream → its panel's readings (``NodeFeed``) and the samples the backend weighs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from sparktui.domain.events import NodeIdentified, NodeLinkChanged, Notice
from sparktui.domain.node_reading import NodeFeed
from sparktui.domain.telemetry import Sample
from sparktui.remote.backend_wiring import BackendWiring
from sparktui.remote.host_facts import read_host_facts
from sparktui.remote.transport import LinkPhase, LinkState, TransportError

#: Seconds before host facts are asked for again when a node did not answer.
FACTS_RETRY_SECONDS = 10.0

#: Where each node's samples go once its panel has them: (node name, sample).
SampleSink = Callable[[str, Sample], None]


class NodeWatch:
    """Link states, host facts and telemetry of every configured node."""

    def __init__(self, wiring: BackendWiring) -> None:
        self._wiring = wiring
        #: Set on every (re)connection of a node: its host facts are read again.
        self._connected = {n.name: asyncio.Event() for n in wiring.config.nodes}
        #: Each node's samples → what its panel shows (``NodeSampled``), posted by the probe runner's loop.
        self._feed = NodeFeed(wiring.post)

    def on_link(self, node: str, state: LinkState) -> None:
        """A transport's listener: the link's state to the dashboard and to the session."""
        if state.phase is LinkPhase.CONNECTED:
            self._connected[node].set()
        transports = self._wiring.transports
        endpoint = transports[node].endpoint if transports else None
        reason = "" if state.phase is LinkPhase.CONNECTED or not state.last_error else (
            f"{endpoint}: {state.last_error}" if endpoint else state.last_error)
        self._wiring.post(NodeLinkChanged(node, state.phase.value, state.last_error or "", state.retry_at,
                                          reason))
        self._wiring.session.link(node, state.phase.value)

    async def facts(self, name: str) -> None:
        """Hostname, kernel, uptime: once per connection (again after every reconnect)."""
        transport = self._wiring.transports[name]
        node = self._wiring.config.node(name)
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
                self._wiring.post(NodeIdentified(name, facts.hostname or "", facts.kernel or "",
                                                 facts.uptime_seconds))
            else:
                # Not answered (the link dropped again, or the node is busy): ask again shortly.
                self._wiring.spawn(_again_later(connected, FACTS_RETRY_SECONDS))

    async def telemetry(self, name: str, on_sample: SampleSink) -> None:
        """The node's probe stream, for as long as the dashboard runs: each sample to its panel, then to
        ``on_sample``."""
        from sparktui.remote.probe_runner import engine_api_probe_args, engine_probe_args, stream_samples

        config = self._wiring.config
        node = config.node(name)
        extra_args = engine_probe_args(config.engine)
        if name == config.head.name:
            extra_args += engine_api_probe_args(config.engine)
        errors_told: set[str] = set()

        def on_error(message: str) -> None:
            if message not in errors_told:
                errors_told.add(message)
                self._wiring.post(Notice(message, "warning"))

        # The feed posts each sample's reading; what comes back here is the evidence the backend weighs.
        async for sample in stream_samples(self._wiring.transports[name], node, config.ui.refresh_interval,
                                           name_prefix=config.engine.name_prefix, on_error=on_error,
                                           extra_args=extra_args, feed=self._feed):
            on_sample(name, sample)


async def _again_later(event: asyncio.Event, seconds: float) -> None:
    await asyncio.sleep(seconds)
    event.set()
