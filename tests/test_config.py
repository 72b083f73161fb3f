"""config.toml: the shipped example parses, lookup order, and bad configs fail naming file, key and fault."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sparktui.config import ConfigError, find_config, load_config
from tests.cli_helpers import run_sparktui

REPO = Path(__file__).resolve().parents[1]

GOOD = """
[[nodes]]
name = "spark1"
host = "spark1"
role = "head"

[[nodes]]
name = "spark2"
host = "spark2"

[engine]
model = "/models/m"
"""


def _write(tmp_path: Path, text: str, name: str = "config.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _sparktui(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_sparktui(*args, cwd=cwd, env=env, timeout=60)


# -- the shipped example ---------------------------------------------------------------------------
def test_repo_config_parses() -> None:
    config = load_config(REPO / "config.toml")
    assert config.cluster.example is True
    assert [n.name for n in config.nodes] == ["spark1", "spark2"]
    # Nodes are named by SSH alias, never by an address.
    assert [n.host for n in config.nodes] == ["spark1", "spark2"]
    assert config.head.name == "spark1"
    assert config.engine.tensor_parallel_size == 2
    assert config.engine.executor == "ray"
    assert any(m.read_only for m in config.engine.mounts)
    assert "NCCL_SOCKET_IFNAME" in config.engine.env


def test_minimal_config_gets_defaults(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, GOOD))
    assert config.head.name == "spark1" and [w.name for w in config.workers] == ["spark2"]
    assert config.engine.runtime == "docker" and config.ui.refresh_interval == 1.0


# -- bad configs -----------------------------------------------------------------------------------
def test_misspelt_key_is_rejected_with_file_and_key_path(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace('host = "spark2"', 'hots = "spark2"'))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    text = str(err.value)
    assert str(path) in text
    assert "nodes[1].hots: unknown key" in text
    assert "nodes[1].host: required key is missing" in text


def test_misspelt_table_is_rejected(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD + "\n[engin]\nmodel = 'x'\n")
    with pytest.raises(ConfigError, match=r"engin: unknown key"):
        load_config(path)


def test_wrong_type_is_rejected_with_file_and_key_path(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD + 'tensor_parallel_size = "2"\n')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    text = str(err.value)
    assert f"{path}: engine.tensor_parallel_size:" in text
    assert "integer" in text and "'2'" in text


def test_out_of_range_and_bad_choice(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace('role = "head"', 'role = "boss"') + "api_port = 70000\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "nodes[0].role:" in str(err.value)
    assert "engine.api_port:" in str(err.value)


def test_toml_syntax_error_names_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "[engine\nmodel = 1\n")
    with pytest.raises(ConfigError, match="TOML syntax error") as err:
        load_config(path)
    assert str(path) in str(err.value)


def test_cli_prints_the_fault_and_exits_2(tmp_path: Path) -> None:
    text = GOOD.replace('host = "spark2"', 'hots = "spark2"') + 'tensor_parallel_size = "2"\n'
    path = _write(tmp_path, text)
    proc = _sparktui("status", "--config", str(path), cwd=tmp_path)
    assert proc.returncode == 2
    assert f"{path}: nodes[1].hots: unknown key" in proc.stderr
    assert f"{path}: engine.tensor_parallel_size:" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_without_any_config_exits_2(tmp_path: Path) -> None:
    proc = _sparktui("status", cwd=tmp_path, env={"HOME": str(tmp_path)})
    assert proc.returncode == 2
    assert "no config found" in proc.stderr


def test_cli_uses_sparktui_config_variable(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD + "bogus = 1\n", "from-env.toml")
    proc = _sparktui("status", cwd=tmp_path, env={"SPARKTUI_CONFIG": str(path), "HOME": str(tmp_path)})
    assert proc.returncode == 2
    assert f"{path}: engine.bogus: unknown key" in proc.stderr


# -- lookup order ----------------------------------------------------------------------------------
@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".config" / "sparktui").mkdir(parents=True)
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    return {
        "flag": _write(tmp_path, GOOD, "flag.toml"),
        "env": _write(tmp_path, GOOD, "env.toml"),
        "cwd": _write(work, GOOD),
        "xdg": _write(home / ".config" / "sparktui", GOOD),
    }


def test_lookup_order(places: dict[str, Path]) -> None:
    env = {"SPARKTUI_CONFIG": str(places["env"])}
    assert find_config(str(places["flag"]), env) == places["flag"]
    assert find_config(None, env) == places["env"]
    assert find_config(None, {}).resolve() == places["cwd"].resolve()
    places["cwd"].unlink()
    assert find_config(None, {}) == places["xdg"]
    places["xdg"].unlink()
    assert find_config(None, {}) is None


def test_explicit_path_is_used_even_when_missing(places: dict[str, Path], tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    assert find_config(str(missing), {}) == missing
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(missing)
