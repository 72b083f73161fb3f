"""Where the supervisor's presence (``sparktui.domain.presence``) is kept on the head, and the commands
that write and read it (``sparktui/node/json_file.py``, as the desired state's)."""

from __future__ import annotations

from collections.abc import Mapping

from sparktui.config import SparkConfig
from sparktui.domain.lifecycle import head_files
from sparktui.domain.presence import SupervisorPresence

#: The file's name in ``engine.state_dir`` on the head, beside ``desired.json``.
SUPERVISOR_FILE = "supervisor.json"


def presence_path(config: SparkConfig, homes: Mapping[str, str] | None) -> str:
    return head_files.head_file(config, homes, SUPERVISOR_FILE)


def write_argv(config: SparkConfig, homes: Mapping[str, str] | None,
               presence: SupervisorPresence) -> list[str]:
    return head_files.write_argv(config, homes, SUPERVISOR_FILE, presence.to_json())


def read_argv(config: SparkConfig, homes: Mapping[str, str] | None) -> list[str]:
    return head_files.read_argv(config, homes, SUPERVISOR_FILE)
