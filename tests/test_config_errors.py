"""Config faults read as sentences in TOML's terms (file, key path, what it must be, what it got), never in
pydantic's words; a config file that is not there is "not found", not "invalid"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sparktui.commands.exit_status import ExitStatus
from sparktui.config import ConfigError, load_config
from tests.cli_helpers import run_sparktui
from tests.config_texts import TWO_SPARKS as GOOD

#: pydantic's own phrasing, which must never reach a user.
PYDANTIC_WORDS = re.compile(r"Input should|should have|after validation|valid (?:integer|string|boolean|"
                            r"number|dictionary|tuple|list)|Value error|greater than or equal|less than or "
                            r"equal|instance of|unable to parse|type=|\[type")


def _faults(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    lines = str(err.value).splitlines()
    assert lines[0] == f"{path}: invalid config"
    prefix = f"  {path}: "
    assert all(line.startswith(prefix) for line in lines[1:]), lines
    return [line.removeprefix(prefix) for line in lines[1:]]


def test_each_fault_is_a_sentence_with_what_it_got(tmp_path: Path) -> None:
    text = GOOD.replace('role = "head"', 'role = "head"\nport = 0\nlocal = "yes"\ngpus = 1.5') + """
vllm_command = []
runtime = "podman"
tensor_parallel_size = "2"
memory_floor = "4QB"
ray_wait_timeout = "soon"
env = 3
[ui]
refresh_interval = 100
"""
    assert _faults(tmp_path, text) == [
        "nodes[0].port: must be 1 or more, got 0",
        'nodes[0].local: must be true or false, got "yes"',
        "nodes[0].gpus: must be a whole number, got 1.5",
        'engine.runtime: must be one of "docker" or "host", got "podman"',
        'engine.tensor_parallel_size: must be a whole number, got "2"',
        "engine.env: must be a table (key = value pairs), got 3",
        "engine.vllm_command: must list at least one word (the command), got an empty list",
        'engine.ray_wait_timeout: must be a number, got "soon"',
        'engine.memory_floor: must be a size such as "4GiB" or "512MiB" (unknown unit \'QB\'), got "4QB"',
        "ui.refresh_interval: must be 60 or less, got 100",
    ]


@pytest.mark.parametrize("line", [
    "vllm_command = []", "vllm_command = [1]", "vllm_command = \"vllm\"", "ray_python = []",
    "name_prefix = \"\"", "model = 3", "api_port = 70000", "api_port = \"80\"", "drop_caches = 1",
    "extra_args = \"--x\"", "mounts = [{source = \"a\"}]", "mounts = 3", "memory_floor = -1",
    "memory_psi_full = 101", "cache_mounts = [3]", "restart = \"soft\"", "env = {A = 1}",
])
def test_no_fault_is_in_pydantics_words(tmp_path: Path, line: str) -> None:
    faults = _faults(tmp_path, GOOD + line + "\n")
    assert faults and not [f for f in faults if PYDANTIC_WORDS.search(f)], faults


def test_no_nodes_and_no_engine_say_what_is_missing(tmp_path: Path) -> None:
    assert _faults(tmp_path, "nodes = []\n[engine]\nmodel = \"m\"\n") == [
        "nodes: must list at least one node (a [[nodes]] table), got an empty list"]
    assert _faults(tmp_path, GOOD.split("[engine]")[0]) == ["engine: required key is missing"]


def test_a_missing_config_file_is_not_found_not_invalid(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    out = run_sparktui("--config", str(missing), "status")
    assert out.returncode == ExitStatus.USAGE
    assert out.stderr == f"config file not found: {missing}\n"
    unreadable = run_sparktui("--config", str(tmp_path), "start", "--dry-run")
    assert unreadable.returncode == ExitStatus.USAGE
    assert unreadable.stderr == f"cannot read config file {tmp_path}: Is a directory\n"
