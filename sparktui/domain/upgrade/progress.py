"""An upgrade in progress, and its last outcome, as ``sparktui upgrade`` keeps them on the head (pure; the
write and the reads: ``remote/upgrade_record.py``).

``upgrade.json`` in ``engine.state_dir`` on the head, beside ``desired.json``, ``supervisor.json`` and
``image.json`` (written by the same node script, ``node/json_file.py``): the candidate and the previous image
(ref, image ID), who upgrades (host, pid), when it began, a heartbeat, and the upgrade's stages in order,
each with its status, seconds and a one-line message; at the end its outcome, the reason and the downtime.
Whoever reads it (the dashboard, ``sparktui status``) tells from the heartbeat whether the upgrade is still
going: a record with no outcome and no heartbeat for ``STALE_AFTER`` seconds is an upgrade that stopped
mid-way (its process was killed, its link lost). A record that cannot be read as one reads as "unknown",
never as an error.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from sparktui.config import SparkConfig
from sparktui.domain.durations import format_duration
from sparktui.domain.json_report import last_json_object
from sparktui.domain.lifecycle import head_files
from sparktui.domain.presence import STALE_AFTER
from sparktui.domain.upgrade.images import short_id
from sparktui.domain.wall_time import iso

#: The record's name in ``engine.state_dir`` on the head.
UPGRADE_FILE = "upgrade.json"
SCHEMA_VERSION = 1
#: ``sparktui upgrade``'s stages in the order it runs them (``remote/upgrade.py`` names them so).
STAGES = ("image", "way back", "check", "distribute", "baseline", "switch", "verify", "promote", "roll back")
#: An ended upgrade's one line stays on the dashboard this long after its end.
OUTCOME_SHOWN_FOR = 15 * 60.0


class Phase(StrEnum):
    RUNNING = "running"     # no outcome yet, heard from within STALE_AFTER
    ENDED = "ended"         # an outcome is recorded
    STALE = "stale"         # no outcome, and silent: it stopped mid-way
    UNKNOWN = "unknown"     # the record is not one we can read


_STATUSES = frozenset({"pending", "running", "ok", "failed", "skipped"})
#: The outcomes ``UpgradeReport`` has (and "interrupted": the upgrade's process ended by an exception).
_OUTCOME_WORDS = {"promoted": "promoted", "rolled_back": "rolled back", "refused": "refused",
                  "failed": "failed, and the previous image did not serve again: a person is needed",
                  "checked": "checked", "same": "nothing to do",
                  "interrupted": "interrupted"}
#: Outcomes after which the engine serves as it should (the upgrade did its job, whichever way it went).
_SERVING_AFTER = frozenset({"promoted", "rolled_back", "refused", "checked", "same"})


@dataclass(frozen=True)
class UpgradeStage:
    name: str
    status: str = "pending"        # pending / running / ok / failed / skipped
    message: str = ""
    #: Seconds it ran (set when it ends); a running stage counts from ``since``.
    seconds: float | None = None
    since: float | None = None     # epoch seconds it began running


def _pending_stages() -> tuple[UpgradeStage, ...]:
    return tuple(UpgradeStage(name) for name in STAGES)


@dataclass(frozen=True)
class UpgradeRecord:
    image: str                     # the candidate, as the person named it
    previous: str                  # the image in use when it began (the way back)
    host: str
    pid: int
    started: float                 # epoch seconds
    heartbeat: float               # epoch seconds: its last write
    image_id: str | None = None
    previous_id: str | None = None
    dry_run: bool = False
    stages: tuple[UpgradeStage, ...] = field(default_factory=_pending_stages)
    outcome: str | None = None     # None while it runs; else one of ``_OUTCOME_WORDS``
    reason: str = ""
    downtime_s: float | None = None
    ended: float | None = None
    #: False: the head's file is not a record we can read (garbled, cut short, another schema).
    known: bool = True

    # -- the upgrade's updates -----------------------------------------------------------------------
    def stage(self, name: str, status: str, message: str, now: float) -> UpgradeRecord:
        """``name`` now ``status`` (a stage not in ``STAGES`` is added at the end)."""
        stages = list(self.stages)
        index = next((i for i, s in enumerate(stages) if s.name == name), None)
        if index is None:
            stages.append(UpgradeStage(name))
            index = len(stages) - 1
        old = stages[index]
        since = old.since if old.status == "running" and old.since is not None else now
        seconds = None if status == "running" else (now - since if old.status == "running" else old.seconds)
        stages[index] = UpgradeStage(name, status, message, seconds, since)
        return replace(self, stages=tuple(stages), heartbeat=now)

    def beat(self, now: float) -> UpgradeRecord:
        return replace(self, heartbeat=now)

    def finish(self, outcome: str, reason: str, downtime_s: float | None, now: float) -> UpgradeRecord:
        """The end: a stage still running failed with it; one never reached was skipped."""
        stages = tuple(
            replace(s, status="failed", seconds=now - (s.since or now)) if s.status == "running"
            else replace(s, status="skipped") if s.status == "pending" else s
            for s in self.stages)
        return replace(self, stages=stages, outcome=outcome, reason=reason, downtime_s=downtime_s,
                       ended=now, heartbeat=now)

    # -- the record ---------------------------------------------------------------------------------
    def to_json(self) -> str:
        data = {k: v for k, v in self.__dict__.items() if k not in ("known", "stages")}
        return json.dumps({"v": SCHEMA_VERSION, **data,
                           "stages": [s.__dict__ for s in self.stages]}, sort_keys=True)

    @classmethod
    def parse(cls, text: str) -> UpgradeRecord | None:
        """What the node script's ``read`` printed: ``None`` when no upgrade ever wrote one (``{}``); a
        record that is not one we can read is ``UNKNOWN`` (never an exception)."""
        data = last_json_object(text)
        if data is None:
            return UNKNOWN if text.strip() else None
        if not data:
            return None
        try:
            stages = data.get("stages")
            if not isinstance(stages, list):
                raise TypeError("stages is not a list")
            return cls(image=_text(data["image"]), previous=_text(data["previous"]), host=str(data["host"]),
                       pid=_int(data["pid"]), started=_number(data["started"]),
                       heartbeat=_number(data["heartbeat"]), image_id=_optional(data.get("image_id")),
                       previous_id=_optional(data.get("previous_id")), dry_run=data.get("dry_run") is True,
                       stages=tuple(_stage(s) for s in stages), outcome=_optional(data.get("outcome")),
                       reason=str(data.get("reason") or ""),
                       downtime_s=_optional_number(data.get("downtime_s")),
                       ended=_optional_number(data.get("ended")))
        except (KeyError, TypeError, ValueError):
            return UNKNOWN

    # -- what it means now --------------------------------------------------------------------------
    def phase(self, now: float) -> Phase:
        if not self.known:
            return Phase.UNKNOWN
        if self.outcome is not None:
            return Phase.ENDED
        return Phase.RUNNING if now - self.heartbeat < STALE_AFTER else Phase.STALE

    def running(self, now: float) -> bool:
        return self.phase(now) is Phase.RUNNING

    def level(self, now: float) -> str:
        """How its one line reads: ``ok`` (promoted, or nothing to do), ``warning`` (tried and rolled back,
        refused before any downtime, still running), ``error`` (a person is needed, or it is not known)."""
        phase = self.phase(now)
        if phase is Phase.RUNNING:
            return "warning"
        if phase is not Phase.ENDED:
            return "error"
        if self.outcome in ("promoted", "checked", "same"):
            return "ok"
        return "warning" if self.serving_after else "error"

    @property
    def current(self) -> UpgradeStage | None:
        """The stage running now, else the last one that ran."""
        ran = [s for s in self.stages if s.status not in ("pending", "skipped")]
        return next((s for s in ran if s.status == "running"), ran[-1] if ran else None)

    def headline(self) -> str:
        """``upgrading to vllm/vllm-openai:v0.22.0 (4f1c2a9b0d1e) from vllm/vllm-openai:v0.21.0``."""
        new = f" ({short_id(self.image_id)})" if self.image_id else ""
        trial = " (--dry-run)" if self.dry_run else ""
        return f"upgrading to {self.image}{new} from {self.previous}{trial}"

    def outcome_line(self, now: float) -> str:
        """One line: ``upgrade to X: promoted, downtime 32.9 s``, ``upgrade to X: rolled back: <why>``, or,
        for one that stopped mid-way, since when it is silent and at which stage."""
        if not self.known:
            return "upgrade: unknown (its record on the head cannot be read)"
        head = f"upgrade to {self.image}"
        phase = self.phase(now)
        if phase is Phase.RUNNING:
            stage = self.current
            return f"{self.headline()}: {stage.name if stage else 'starting'}"
        if phase is Phase.STALE:
            stage = self.current
            at = f" at {stage.name}" if stage else ""
            return (f"{head}: not heard from for {format_duration(now - self.heartbeat, tenths=False)}{at} "
                    f"({self.host} pid {self.pid}): it stopped mid-way")
        words = _OUTCOME_WORDS.get(self.outcome or "", self.outcome or "")
        down = f", downtime {self.downtime_s:.1f} s" if self.downtime_s is not None else ""
        if self.outcome == "promoted":
            return f"{head}: promoted{down}"
        why = f": {self.reason}" if self.reason else ""
        return f"{head}: {words}{why}{down}"

    @property
    def serving_after(self) -> bool:
        """The engine serves after this end as it should (a rollback is the upgrade working)."""
        return self.outcome in _SERVING_AFTER

    def shown_at(self, now: float) -> bool:
        """Whether the dashboard still shows its one line at ``now``: while it runs, and for
        ``OUTCOME_SHOWN_FOR`` after its end (or its last word, for one that stopped mid-way)."""
        if not self.known:
            return True
        if self.phase(now) is Phase.RUNNING:
            return True
        return now - (self.ended if self.ended is not None else self.heartbeat) < OUTCOME_SHOWN_FOR

    def shown_line(self, now: float) -> tuple[str, str] | None:
        """``(text, level)`` of the dashboard's one line: for ``OUTCOME_SHOWN_FOR`` after the end; ``None``
        while it runs (its stages say more) or long after."""
        if self.running(now) or not self.shown_at(now):
            return None
        return self.outcome_line(now), self.level(now)

    def report(self, now: float) -> dict[str, Any]:
        """``sparktui status --json``'s ``upgrade`` object: the record, its times as ISO, what it means now
        (``phase``) and the one line (``text``)."""
        if not self.known:
            return {"phase": Phase.UNKNOWN.value, "text": self.outcome_line(now)}
        return {"phase": self.phase(now).value, "image": self.image, "image_id": self.image_id,
                "previous": self.previous, "previous_id": self.previous_id, "host": self.host,
                "pid": self.pid,
                "dry_run": self.dry_run, "started": iso(self.started), "heartbeat": iso(self.heartbeat),
                "ended": None if self.ended is None else iso(self.ended), "outcome": self.outcome,
                "reason": self.reason,
                "downtime_s": None if self.downtime_s is None else round(self.downtime_s, 1),
                "stages": [{"stage": s.name, "status": s.status, "message": s.message,
                            "seconds": None if s.seconds is None else round(s.seconds, 1)}
                           for s in self.stages],
                "text": self.status_line(now)}

    def status_line(self, now: float) -> str:
        """``sparktui status``'s line: the running stage, or the outcome with when it ended."""
        if self.phase(now) is Phase.ENDED and self.ended is not None:
            return f"{self.outcome_line(now)} ({time.strftime('%Y-%m-%d %H:%M', time.localtime(self.ended))})"
        return self.outcome_line(now)


def write_argv(config: SparkConfig, homes: Mapping[str, str] | None, record: UpgradeRecord) -> list[str]:
    return head_files.write_argv(config, homes, UPGRADE_FILE, record.to_json())


def read_argv(config: SparkConfig, homes: Mapping[str, str] | None) -> list[str]:
    return head_files.read_argv(config, homes, UPGRADE_FILE)


#: A record on the head that cannot be read as one.
UNKNOWN = UpgradeRecord(image="", previous="", host="", pid=0, started=0.0, heartbeat=0.0, stages=(),
                        known=False)


def _stage(data: Any) -> UpgradeStage:
    if not isinstance(data, dict):
        raise TypeError("a stage is not an object")
    status = str(data.get("status", "pending"))
    if status not in _STATUSES:
        raise ValueError(f"unknown stage status {status!r}")
    return UpgradeStage(_text(data["name"]), status, str(data.get("message") or ""),
                        _optional_number(data.get("seconds")), _optional_number(data.get("since")))


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("not a non-empty string")
    return value


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError("not an integer")
    return value


def _number(value: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError("not a number")
    return float(value)


def _optional(value: Any) -> str | None:
    return None if value is None else str(value)


def _optional_number(value: Any) -> float | None:
    return None if value is None else _number(value)
