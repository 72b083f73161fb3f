"""The engine's desired state, kept on the head beside the operation lock (pure).

A person's intent outlives every sparktui process: ``start``, ``restart`` and the dashboard's keys set it
to ``serving``; a person's ``stop`` sets it to ``stopped``. The supervisor (``sparktui supervise``) starts
an engine whose desired state is serving and that does not run, and never undoes a person's stop. Stops
that no person asked for (the memory guard's, a restart's own stop) leave it as it is.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum

from sparktui.config import SparkConfig
from sparktui.domain.json_report import last_json_object
from sparktui.domain.lifecycle import head_files

#: The file's name in ``engine.state_dir`` on the head.
DESIRED_FILE = "desired.json"


class Desired(StrEnum):
    SERVING = "serving"
    STOPPED = "stopped"


@dataclass(frozen=True)
class DesiredState:
    state: Desired
    #: Who set it, as the operation lock names its holders ("`sparktui stop`", "the dashboard").
    by: str
    host: str
    at: float   # epoch seconds

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "state": self.state.value}, sort_keys=True)

    @classmethod
    def parse(cls, text: str) -> DesiredState | None:
        """What ``read`` printed; ``None`` when nothing was ever set (or the file is not ours)."""
        # The script prints the record last (``{}``: never written); noise lines around it are passed over.
        data = last_json_object(text)
        if data is None:
            return None
        try:
            return cls(Desired(str(data["state"])), str(data.get("by", "")), str(data.get("host", "")),
                       float(str(data.get("at", 0.0))))
        except (KeyError, ValueError):
            return None

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.at))
        return f"{self.state.value} (set by {self.by} on {self.host} at {when})"


def write_argv(config: SparkConfig, homes: Mapping[str, str] | None, desired: DesiredState) -> list[str]:
    return head_files.write_argv(config, homes, DESIRED_FILE, desired.to_json())


def read_argv(config: SparkConfig, homes: Mapping[str, str] | None) -> list[str]:
    return head_files.read_argv(config, homes, DESIRED_FILE)
