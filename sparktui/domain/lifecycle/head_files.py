"""The head's small JSON records — the desired state, the supervisor's presence, the image in use, an
upgrade's progress — each a file in ``engine.state_dir`` on the head, beside the operation lock, written and
read by one node script (``sparktui/node/json_file.py``) on the head's host, never in a container."""

from __future__ import annotations

from collections.abc import Mapping

from sparktui.config import SparkConfig
from sparktui.domain.lifecycle import scripts as S
from sparktui.domain.lifecycle.plan import state_dir


def head_file(config: SparkConfig, homes: Mapping[str, str] | None, name: str) -> str:
    """``name``'s path in the head's state directory (``~`` expanded when the head's home is known)."""
    return state_dir(config, homes, config.head.name).rstrip("/") + "/" + name


def write_argv(config: SparkConfig, homes: Mapping[str, str] | None, name: str, text: str) -> list[str]:
    """Replaces the file atomically with ``text`` (a reader never sees half of it); prints ``OK``."""
    return [config.head.python, "-c", S.JSON_FILE_PY, "write", head_file(config, homes, name), text]


def read_argv(config: SparkConfig, homes: Mapping[str, str] | None, name: str) -> list[str]:
    """Prints the file's JSON, or ``{}`` when it was never written."""
    return [config.head.python, "-c", S.JSON_FILE_PY, "read", head_file(config, homes, name)]
