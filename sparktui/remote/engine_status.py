"""The engine part of ``sparktui status --json``: what of ours runs (re-attach discovery) and the stage the
head's vLLM log has reached."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparktui.config import SparkConfig
from sparktui.domain.events import EngineState
from sparktui.remote.engine import EngineController
from sparktui.remote.file_read import read_file
from sparktui.remote.transport import Transport, TransportError

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
    from sparktui.domain.logs import Timeline

    timeline = Timeline(expected_nodes=expected_nodes)
    timeline.feed_text(data.decode("utf-8", "replace"))
    snap = timeline.snapshot()
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


async def engine_status(config: SparkConfig, transports: Mapping[str, Transport]) -> dict[str, Any]:
    controller = EngineController(config, transports)
    found = await controller.discover()
    out: dict[str, Any] = found.to_json()
    head = config.head.name
    vllm = found.vllm.get(head)
    out["log_path"] = vllm.log_path if vllm and vllm.log_path else controller.log_path()
    out["stage"] = None
    if vllm is not None and vllm.log_size:
        data = await read_log(config, transports[head], out["log_path"])
        if data:
            timeline = log_stage(data, len(config.nodes))
            out["timeline"] = timeline
            out["stage"] = timeline["stage"] or (timeline["outcome"] if timeline["outcome"] != "incomplete"
                                                 else None)
            # The log outranks the process table: "starting" becomes what the log says.
            if found.state is EngineState.STARTING and timeline["outcome"] == "ready":
                out["state"] = "ready"
            elif found.state in (EngineState.STARTING, EngineState.FAILED) \
                    and timeline["outcome"] == "failed":
                out["state"] = "failed"
                fail = timeline["failure"] or {}
                out["detail"] = f"{fail.get('kind')}: {fail.get('message')}"
    return out
