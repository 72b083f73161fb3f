"""Where the supervisor's presence (``sparktui.domain.presence``) is kept on the head, and the commands
that write and read it (``sparktui/node/json_file.py``, as the desired state's)."""

from __future__ import annotations

from collections.abc import Mapping

from sparktui.config import SparkConfig
from sparktui.domain.lifecycle import scripts as S
from sparktui.domain.lifecycle.plan import state_dir
from sparktui.domain.presence import SupervisorPresence

#: The file's name in ``engine.state_dir`` on the head, beside ``desired.json``.
SUPERVISOR_FILE = "supervisor.json"


def presence_path(config: SparkConfig, homes: Mapping[str, str] | None) -> str:
    return state_dir(config, homes, config.head.name).rstrip("/") + "/" + SUPERVISOR_FILE


def write_argv(config: SparkConfig, homes: Mapping[str, str] | None,
               presence: SupervisorPresence) -> list[str]:
    """Run on the head's host (not in a container), beside the desired state."""
    return [config.head.python, "-c", S.JSON_FILE_PY, "write", presence_path(config, homes),
            presence.to_json()]


def read_argv(config: SparkConfig, homes: Mapping[str, str] | None) -> list[str]:
    return [config.head.python, "-c", S.JSON_FILE_PY, "read", presence_path(config, homes)]
