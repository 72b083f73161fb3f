"""The engine part of ``sparktui status --json``: what of ours runs (re-attach discovery) and the stage the
head's vLLM log has reached."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from sparktui.config import SparkConfig
from sparktui.domain.engine_session import EngineSession
from sparktui.domain.events import EngineState
from sparktui.domain.logs import spec_decode
from sparktui.remote.engine import EngineController
from sparktui.remote.file_read import read_file
from sparktui.remote.transport import Transport, TransportError

if TYPE_CHECKING:
    from sparktui.domain.lifecycle.discovery import Discovery
    from sparktui.domain.logs import TimelineSnapshot

#: The log is read from its end when longer (days of serving stats lines); the start-up is at its head.
MAX_LOG_BYTES = 32 * 1024 * 1024
#: ``status`` watches a ready engine's token counter this long at most while requests run (the wedge
#: rule's window, when ``serving.wedge_seconds`` is longer): a status cannot wait a minute. Tokens moving,
#: or no request in, ends the watch at once, so a healthy engine costs one or two scrapes.
STATUS_WEDGE_SECONDS = 5.0
#: Seconds between two scrapes of that watch.
STATUS_SCRAPE_GAP = 0.5


async def read_log(config: SparkConfig, transport: Transport, path: str,
                   python: str | None = None) -> bytes | None:
    """The file (its last MAX_LOG_BYTES) on the node; ``None`` when it does not exist."""
    try:
        return await read_file(transport, python or config.head.python, path, limit=MAX_LOG_BYTES, timeout=60)
    except TimeoutError:
        raise TransportError(f"reading {path}: no answer within 60 s") from None


def log_stage(data: bytes, expected_nodes: int) -> dict[str, Any]:
    """The timeline of a whole log (``sparktui.domain.logs.Timeline``): current stage, outcome, failure."""
    return _stage_json(snapshot_of(data, expected_nodes))


def snapshot_of(data: bytes, expected_nodes: int) -> TimelineSnapshot:
    """The timeline of a whole log (``EngineJudge`` takes it, so a caller may parse it early)."""
    # The one whole-log path (the byte splitter, then the stage machine), as ``sparktui timeline`` reads.
    from sparktui.domain.logs.timeline import timeline_from_bytes

    return timeline_from_bytes(data, expected_nodes)


def _stage_json(snap: TimelineSnapshot) -> dict[str, Any]:
    failure = snap.failure
    out = {
        "stage": snap.current,
        "outcome": snap.outcome,
        "vllm_version": snap.vllm_version,
        "model": snap.model,
        "failure": None if failure is None else {"kind": failure.kind, "stage": failure.stage,
                                                 "message": failure.message, "hint": failure.hint},
        "stages": {s.name: s.status for s in snap.stages},
    }
    speculative = _speculative_json(snap.facts)
    if speculative is not None:
        out["speculative"] = speculative
    return out


def _speculative_json(facts: Mapping[str, Any]) -> dict[str, Any] | None:
    """Speculative decoding's acceptance as the log's last stats line gave it (``domain.logs.spec_decode``);
    ``None`` when the log shows no speculative decoding."""
    if facts.get("spec_acceptance_rate") is None and facts.get("spec_mean_acceptance_length") is None:
        return None
    return {"acceptance_rate": facts.get("spec_acceptance_rate"),
            "first_acceptance_rate": facts.get("spec_first_acceptance_rate"),
            "mean_acceptance_length": facts.get("spec_mean_acceptance_length"),
            "per_position": list(facts.get("spec_per_position") or ()),
            "detail": spec_decode.describe(facts)}


async def engine_status(config: SparkConfig, transports: Mapping[str, Transport],
                        links: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Discovery, the log and Ray's node list, judged by the engine state machine as one reading.
    ``links``: each node's SSH link phase as seen before (default: the transports' phase now).

    Several commands per node (discovery's listing, Ray, the log, the head's reach); ``sparktui status``
    asks all of it in one round trip per node (``status_round``) and judges it with ``EngineJudge``."""
    controller = EngineController(config, transports)
    found = await controller.discover()
    head = config.head.name
    vllm = found.vllm.get(head)
    log_path = vllm.log_path if vllm and vllm.log_path else controller.log_path()
    data = await read_log(config, transports[head], log_path) if vllm is not None and vllm.log_size else None
    phases = {name: (links or {}).get(name) or t.state.phase.value for name, t in transports.items()}
    snap = snapshot_of(data, len(config.nodes)) if data else None
    judge = EngineJudge(config, found, phases, log_path, snap)
    if judge.wants_reach:
        from sparktui.remote.peer_watch import reach_once

        with contextlib.suppress(TransportError):
            judge.reach(await reach_once(config, transports[head]))
    return judge.report()


class EngineJudge:
    """One reading of the engine judged by an ``EngineSession`` (no port plugged: it only reads): what
    discovery found, each SSH link's phase, the head's log as its timeline (``None``: no log, or an empty
    one), then — only when that says *ready* — the head's reach of the other nodes (Ray takes 30-40 s to
    declare a cut node dead: the head's own reach says it sooner)."""

    def __init__(self, config: SparkConfig, found: Discovery, links: Mapping[str, str], log_path: str,
                 snap: TimelineSnapshot | None) -> None:
        session = EngineSession.for_config(config)
        for name, phase in links.items():
            session.link(name, phase)
        out: dict[str, Any] = found.to_json()
        out["log_path"] = log_path
        out["stage"] = None
        if snap is not None:
            timeline = _stage_json(snap)
            out["timeline"] = timeline
            out["stage"] = timeline["stage"] or (timeline["outcome"] if timeline["outcome"] != "incomplete"
                                                 else None)
            session.timeline(snap)
        session.discovered(found.state, found.detail)
        # status sends no completion: the log's "Application startup complete" is taken as ready.
        session.verified(None)
        session.ray(found.ray, settled=True)
        self._session, self._out = session, out
        #: Whether the head's reach is asked for: the engine is ready by the rest, the head answered.
        self.wants_reach = session.state is EngineState.READY and config.head.name not in found.unreachable

    def reach(self, peers: Mapping[str, bool]) -> None:
        for name, ok in peers.items():
            self._session.peer(name, ok)

    def raylets(self, running: Mapping[str, bool]) -> None:
        """Each answering node's raylet, running or not by its own process list: one killed is seen
        before Ray's health check (15 s) declares the node dead."""
        for name, ok in running.items():
            self._session.raylet(name, ok, settled=True)

    @property
    def ready(self) -> bool:
        return self._session.state is EngineState.READY

    async def watch_tokens(self, scrape: Callable[[], Awaitable[str]], model: str | None,
                           window: float = STATUS_WEDGE_SECONDS, gap: float = STATUS_SCRAPE_GAP) -> None:
        """The wedge rule (``EngineTruth``'s, over ``window`` instead of ``serving.wedge_seconds`` when
        shorter) on ``/metrics`` scrapes of a ready engine: until tokens move, no request is in, the state
        leaves ready, or the window has passed. A scrape that fails ends the watch (no evidence)."""
        from sparktui.domain.serving import MetricsParseError, SampleReader, ServingTracker
        from sparktui.remote.api_client import EngineApiError

        truth = self._session.truth
        truth.wedge_seconds = min(truth.wedge_seconds, window)
        reader, tracker = SampleReader(model), ServingTracker()
        first: float | None = None
        t0 = time.monotonic()
        while self.ready:
            try:
                sample = reader.read(await scrape())
            except (EngineApiError, MetricsParseError, TransportError, OSError):
                return
            snap = tracker.update(sample, time.monotonic())
            self._session.serving(snap)
            tokens = snap.generation_tokens_total
            first = tokens if first is None else first
            idle = (snap.requests_running or 0.0) + (snap.requests_waiting or 0.0) <= 0
            if idle or tokens is None or tokens != first or time.monotonic() - t0 > window + gap:
                return
            await asyncio.sleep(gap)
            self._session.tick()

    def report(self) -> dict[str, Any]:
        if self.wants_reach:
            self._session.tick()
        return {**self._out, "state": self._session.state.value, "detail": self._session.detail}
