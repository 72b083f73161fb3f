"""The engine part of ``sparktui status --json``: what of ours runs (re-attach discovery) and the stage the
head's vLLM log has reached."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sparktui.config import SparkConfig
from sparktui.domain.engine_state import EngineTruth
from sparktui.domain.events import EngineState
from sparktui.remote.engine import EngineController
from sparktui.remote.file_read import read_file
from sparktui.remote.transport import Transport, TransportError

if TYPE_CHECKING:
    from sparktui.domain.logs import TimelineSnapshot

#: The log is read from its end when longer (days of serving stats lines); the start-up is at its head.
MAX_LOG_BYTES = 32 * 1024 * 1024


async def read_log(config: SparkConfig, transport: Transport, path: str,
                   python: str | None = None) -> bytes | None:
    """The file (its last MAX_LOG_BYTES) on the node; ``None`` when it does not exist."""
    try:
        return await read_file(transport, python or config.head.python, path, limit=MAX_LOG_BYTES, timeout=60)
    except TimeoutError:
        raise TransportError(f"reading {path}: no answer within 60 s") from None


def log_stage(data: bytes, expected_nodes: int) -> dict[str, Any]:
    """The timeline of a whole log (``sparktui.domain.logs.Timeline``): current stage, outcome, failure."""
    return _stage_json(_snapshot_of(data, expected_nodes))


def _snapshot_of(data: bytes, expected_nodes: int) -> TimelineSnapshot:
    # The one whole-log path (the byte splitter, then the stage machine), as ``sparktui timeline`` reads.
    from sparktui.domain.logs.timeline import timeline_from_bytes

    return timeline_from_bytes(data, expected_nodes)


def _stage_json(snap: TimelineSnapshot) -> dict[str, Any]:
    failure = snap.failure
    return {
        "stage": snap.current,
        "outcome": snap.outcome,
        "vllm_version": snap.vllm_version,
        "model": snap.model,
        "failure": None if failure is None else {"kind": failure.kind, "stage": failure.stage,
                                                 "message": failure.message, "hint": failure.hint},
        "stages": {s.name: s.status for s in snap.stages},
    }


async def engine_status(config: SparkConfig, transports: Mapping[str, Transport],
                        links: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Discovery, the log and Ray's node list, judged by the engine state machine as one reading.
    ``links``: each node's SSH link phase as seen before (default: the transports' phase now)."""
    controller = EngineController(config, transports)
    found = await controller.discover()
    truth = EngineTruth.from_config(config)
    for name, transport in transports.items():
        truth.link(name, (links or {}).get(name) or transport.state.phase.value)
    out: dict[str, Any] = found.to_json()
    head = config.head.name
    vllm = found.vllm.get(head)
    out["log_path"] = vllm.log_path if vllm and vllm.log_path else controller.log_path()
    out["stage"] = None
    if vllm is not None and vllm.log_size:
        data = await read_log(config, transports[head], out["log_path"])
        if data:
            snap = _snapshot_of(data, len(config.nodes))
            timeline = _stage_json(snap)
            out["timeline"] = timeline
            out["stage"] = timeline["stage"] or (timeline["outcome"] if timeline["outcome"] != "incomplete"
                                                 else None)
            truth.timeline(snap)
    truth.discovered(found.state, found.detail)
    # status sends no completion: the log's "Application startup complete" is taken as ready.
    truth.verified(None)
    truth.ray(found.ray, settled=True)
    if truth.state is EngineState.READY and head not in found.unreachable:
        from sparktui.remote.peer_watch import reach_once

        # Ray takes 30-40 s to declare a cut node dead: the head's own reach says it sooner.
        with contextlib.suppress(TransportError):
            for name, ok in (await reach_once(config, transports[head])).items():
                truth.peer(name, ok)
        truth.tick()
    out["state"] = truth.state.value
    out["detail"] = truth.detail
    return out
