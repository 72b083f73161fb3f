"""The supervisor's presence, kept on the head beside the desired state (pure; where it is kept and the
commands that write and read it: ``domain/lifecycle/presence_file.py``).

``sparktui supervise`` writes a small record, ``supervisor.json`` in ``engine.state_dir`` on the head: who
it is (host, pid), since when, a heartbeat, its last decision and its latest incident, and each node's boot
id as it last saw it (so a node's reboot is noticed even across the supervisor's own restart). It writes it
at its start, at each decision and incident, and every ``HEARTBEAT_EVERY`` seconds; at a clean end it says
so (``ended``). Whoever reads it (the dashboard, ``sparktui status``) tells from the heartbeat whether the
supervisor is there now: silent for ``STALE_AFTER`` seconds (about three missed heartbeats), it is "not
seen"; a live one decides restarts, and the dashboard defers to it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from sparktui.domain.durations import format_duration
from sparktui.domain.json_report import last_json_object
from sparktui.domain.wall_time import iso

#: Seconds between the supervisor's heartbeats (one short command on the head's link each).
HEARTBEAT_EVERY = 15.0
#: Silent this long (three heartbeats missed), the supervisor is taken as gone.
STALE_AFTER = 3 * HEARTBEAT_EVERY

#: A decision's action and an incident's cause as a person reads them in one short line.
_ACTION_WORDS = {"restart": "restart", "full_restart": "full restart", "start": "start", "wait": "waiting",
                 "hold": "left stopped", "needs_person": "needs a person", "give_up": "given up"}
_CAUSE_WORDS = {"crashed": "crash", "wedged": "wedge", "worker_lost": "lost worker", "nccl": "NCCL error",
                "oom": "out of memory", "start_failed": "failed start", "not_running": "not running",
                "rebooted": "reboot"}


def _clock_time(at: float) -> str:
    return time.strftime("%H:%M", time.localtime(at))


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class LastDecision:
    action: str                 # ``domain.supervise.Action``'s value
    cause: str | None
    why: str
    at: float                   # epoch seconds

    def describe(self) -> str:
        cause = f" after {_CAUSE_WORDS.get(self.cause, self.cause)}" if self.cause else ""
        return f"{_ACTION_WORDS.get(self.action, self.action)}{cause} {_clock_time(self.at)}"


@dataclass(frozen=True)
class LastIncident:
    id: str
    cause: str
    node: str | None
    at: float
    action: str = ""
    #: Seconds from the incident until the engine served again (``None``: not yet, or never).
    serving_again_s: float | None = None

    def describe(self) -> str:
        where = f" on {self.node}" if self.node else ""
        text = f"incident {self.id} ({_CAUSE_WORDS.get(self.cause, self.cause)}{where})"
        if self.serving_again_s is not None:
            text += f", serving again after {format_duration(self.serving_again_s, tenths=False)}"
        return text


@dataclass(frozen=True)
class SupervisorPresence:
    host: str
    pid: int
    started: float              # epoch seconds
    heartbeat: float            # epoch seconds: the last time it wrote this record
    ended: float | None = None  # a clean end (SIGTERM, Ctrl-C): it is not coming back by itself
    decision: LastDecision | None = None
    incident: LastIncident | None = None
    #: Each node's boot id as the supervisor last read it (``/proc/sys/kernel/random/boot_id``).
    boot_ids: Mapping[str, str] = field(default_factory=dict)

    # -- the record ---------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "boot_ids": dict(self.boot_ids)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def parse(cls, text: str) -> SupervisorPresence | None:
        """What the head's file holds; ``None`` when there was never a supervisor (or it is not ours)."""
        # The script prints the record last (``{}``: never written); noise lines around it are passed over.
        data = last_json_object(text)
        if data is None:
            return None
        pid, started, heartbeat = data.get("pid"), _float(data.get("started")), _float(data.get("heartbeat"))
        if not isinstance(pid, int) or started is None or heartbeat is None:
            return None
        boot_ids = data.get("boot_ids")
        return cls(str(data.get("host", "")), pid, started, heartbeat, _float(data.get("ended")),
                   _decision(data.get("decision")), _incident(data.get("incident")),
                   {str(k): str(v) for k, v in boot_ids.items()} if isinstance(boot_ids, Mapping) else {})

    # -- what it means now --------------------------------------------------------------------------
    def silent_for(self, now: float) -> float:
        return max(0.0, now - self.heartbeat)

    def live(self, now: float) -> bool:
        """There now: not ended, and heard from within ``STALE_AFTER`` seconds."""
        return self.ended is None and self.silent_for(now) < STALE_AFTER

    @property
    def who(self) -> str:
        return f"{self.host or '?'} (pid {self.pid})"

    def describe(self, now: float) -> str:
        """One line: ``supervised by spark1 (pid 4242) · last: restart after crash 14:02 · incident …``."""
        if self.ended is not None:
            head = f"supervisor on {self.who} ended {_clock_time(self.ended)}"
        elif self.live(now):
            head = f"supervised by {self.who}"
        else:
            silent = format_duration(self.silent_for(now), tenths=False)
            head = f"supervisor on {self.who}: not seen for {silent}"
        parts = [head]
        if self.decision is not None:
            parts.append(f"last: {self.decision.describe()}")
        if self.incident is not None:
            parts.append(self.incident.describe())
        return " · ".join(parts)

    def report(self, now: float) -> dict[str, Any]:
        """``sparktui status --json``'s ``supervisor`` object: the record with its times as ISO, and what it
        means now (``live``, ``silent_s``, ``text``)."""
        decision = None if self.decision is None else {**asdict(self.decision), "at": iso(self.decision.at)}
        incident = None if self.incident is None else {**asdict(self.incident), "at": iso(self.incident.at)}
        return {"host": self.host, "pid": self.pid, "started": iso(self.started),
                "heartbeat": iso(self.heartbeat), "ended": None if self.ended is None else iso(self.ended),
                "live": self.live(now), "silent_s": round(self.silent_for(now), 1),
                "decision": decision, "incident": incident, "text": self.describe(now)}

    # -- the supervisor's updates -------------------------------------------------------------------
    def beat(self, now: float) -> SupervisorPresence:
        return replace(self, heartbeat=now)

    def with_boot_id(self, node: str, boot_id: str) -> SupervisorPresence:
        return replace(self, boot_ids={**self.boot_ids, node: boot_id})


def _decision(data: Any) -> LastDecision | None:
    if not isinstance(data, Mapping) or _float(data.get("at")) is None:
        return None
    cause = data.get("cause")
    return LastDecision(str(data.get("action", "")), None if cause is None else str(cause),
                        str(data.get("why", "")), float(data["at"]))


def _incident(data: Any) -> LastIncident | None:
    if not isinstance(data, Mapping) or _float(data.get("at")) is None or not data.get("id"):
        return None
    node = data.get("node")
    return LastIncident(str(data["id"]), str(data.get("cause", "")), None if node is None else str(node),
                        float(data["at"]), str(data.get("action", "")), _float(data.get("serving_again_s")))
