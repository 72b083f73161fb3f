"""The operation lock on the head node: who holds it, in words, and what ``scripts.LOCK_PY`` answered (pure).

start, stop, restart and clean take it, from any sparktui on any machine; a second one is refused naming
the holder ("restart by `sparktui restart` on laptop2 since 10:02"). The lock lives as long as the holder's
SSH channel, so a holder that died frees it; the file still names that holder, and the next taker says it
took the lock over.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from sparktui.config import SparkConfig
from sparktui.domain.lifecycle import scripts as S
from sparktui.domain.lifecycle.plan import state_dir

#: The lock file's name in ``engine.state_dir`` on the head.
LOCK_FILE = "operation.lock"


@dataclass(frozen=True)
class LockHolder:
    kind: str       # start | stop | restart | clean
    origin: str     # "`sparktui restart`", "the dashboard"
    host: str       # the machine sparktui runs on
    pid: int
    started: float  # epoch seconds

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_mapping(cls, data: Mapping[str, object]) -> LockHolder | None:
        try:
            return cls(str(data["kind"]), str(data["origin"]), str(data["host"]), int(str(data["pid"])),
                       float(str(data["started"])))
        except (KeyError, ValueError):
            return None

    def describe(self) -> str:
        since = time.strftime("%H:%M", time.localtime(self.started))
        return f"{self.kind} by {self.origin} on {self.host} (pid {self.pid}) since {since}"


@dataclass(frozen=True)
class LockAnswer:
    """One line of LOCK_PY: ``taken`` (with the holder found dead, if any), ``held`` or ``free``."""

    status: str
    holder: LockHolder | None = None

    @classmethod
    def parse(cls, line: str) -> LockAnswer | None:
        word, _, rest = line.strip().partition(" ")
        if word not in ("TAKEN", "HELD", "FREE"):
            return None
        try:
            data = json.loads(rest or "{}")
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        if word == "TAKEN":
            previous = data.get("previous")
            return cls("taken", LockHolder.from_mapping(previous) if isinstance(previous, dict) else None)
        return cls(word.lower(), LockHolder.from_mapping(data))


def lock_path(config: SparkConfig, homes: Mapping[str, str] | None) -> str:
    return state_dir(config, homes, config.head.name).rstrip("/") + "/" + LOCK_FILE


def take_argv(config: SparkConfig, homes: Mapping[str, str] | None, holder: LockHolder) -> list[str]:
    """Run on the head's host (not in a container) with ``Transport.start``: held while its stdin is open."""
    return [config.head.python, "-c", S.LOCK_PY, "take", lock_path(config, homes), holder.to_json()]


def show_argv(config: SparkConfig, homes: Mapping[str, str] | None) -> list[str]:
    return [config.head.python, "-c", S.LOCK_PY, "show", lock_path(config, homes)]


def refusal(kind: str, holder: LockHolder | None) -> str:
    who = holder.describe() if holder else "another sparktui's operation"
    return f"cannot {kind}: {who} is running; wait for it to finish"


__all__ = ["LOCK_FILE", "LockAnswer", "LockHolder", "lock_path", "refusal", "show_argv", "take_argv"]
