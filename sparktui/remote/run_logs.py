"""The head's kept vLLM logs and the running engine's start stamp (``sparktui/node/run_logs.py list``).

The stamp is written on the head by the start itself just before ``vllm serve`` is launched; the listing
carries the head's clock beside it, so the start is placed on this process's clock by the elapsed time on
the head (a laptop whose clock is off by minutes still measures a start right, to within one round trip).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparktui.domain.lifecycle import plan as P
from sparktui.remote.transport import TransportError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sparktui.config import SparkConfig
    from sparktui.domain.engine_session import EngineSession
    from sparktui.remote.transport import Transport


@dataclass(frozen=True)
class KeptLog:
    file: str
    started: float          # the head's clock
    size: int


@dataclass(frozen=True)
class RunLogs:
    """The head's vLLM logs: the current run's (``vllm.log``) and the earlier ones kept, newest first."""

    folder: str
    head_now: float
    started: float | None                 # the current run's stamp (the head's clock)
    current_size: int | None
    kept: tuple[KeptLog, ...] = field(default_factory=tuple)
    local_now: float = 0.0

    @property
    def local_started(self) -> float | None:
        """The current run's start on this process's clock."""
        if self.started is None:
            return None
        return self.local_now - max(0.0, self.head_now - self.started)

    @classmethod
    def parse(cls, folder: str, text: str, local_now: float) -> RunLogs:
        data: Any = json.loads(text)
        kept = tuple(KeptLog(str(r["file"]), float(r["started"]), int(r["size"]))
                     for r in data.get("runs", []))
        started = data.get("started")
        size = data.get("current")
        return cls(folder, float(data["now"]), None if started is None else float(started),
                   None if size is None else int(size), kept, local_now)


async def read_run_logs(config: SparkConfig, transport: Transport,
                        homes: Mapping[str, str] | None = None) -> RunLogs | None:
    """The head's listing, or ``None`` when it cannot be read now (the caller goes on without it)."""
    head = config.head
    folder = P.state_dir(config, homes, head.name)
    try:
        res = await transport.run(P.run_logs_argv(config, head, folder, "list"), timeout=20)
        if not res.ok:
            return None
        return RunLogs.parse(folder, res.stdout, time.time())
    except (TransportError, ValueError, KeyError, TypeError):
        return None


async def feed_start(session: EngineSession, config: SparkConfig, transport: Transport,
                     homes: Mapping[str, str] | None = None) -> RunLogs | None:
    """Give the session the running engine's real start (the head's stamp), when the head has one."""
    logs = await read_run_logs(config, transport, homes)
    if logs is not None and logs.started is not None and logs.local_started is not None:
        session.engine_started(logs.started, logs.local_started)
    return logs
