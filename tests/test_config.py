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
    assert 'must be a whole number, got "2"' in text


def test_out_of_range_and_bad_choice(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace('role = "head"', 'role = "boss"') + "api_port = 70000\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "nodes[0].role:" in str(err.value)
    assert "engine.api_port:" in str(err.value)


def _fault_of(tmp_path: Path, text: str) -> str:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert str(path) in message
    return message


@pytest.mark.parametrize("ip, fault", [
    ("x && touch /tmp/pwned", "not an IP address or a host name"),
    ("10.0.0.1; reboot", "not an IP address or a host name"),
    ("-oProxyCommand=x", "not an IP address or a host name"),
    ("spark2-cx7.invalid", "not an IP address, and the host name does not resolve here"),
])
def test_ip_must_be_an_address_or_a_resolvable_name(tmp_path: Path, ip: str, fault: str) -> None:
    text = _fault_of(tmp_path, GOOD.replace('host = "spark2"', f'host = "spark2"\nip = {ip!r}'))
    assert f'nodes[1].ip: {fault}, got "{ip}"' in text


def test_ip_accepts_addresses_and_names_that_resolve(tmp_path: Path) -> None:
    for ip in ("192.168.100.11", "fe80::1", "localhost"):
        text = GOOD.replace('host = "spark2"', f'host = "spark2"\nip = "{ip}"')
        config = load_config(_write(tmp_path, text))
        assert config.node("spark2").address == ip


@pytest.mark.parametrize("prefix", ["x; touch /tmp/pwned", "my prefix", "-x", "", "ü"])
def test_name_prefix_is_a_docker_name_token(tmp_path: Path, prefix: str) -> None:
    text = _fault_of(tmp_path, GOOD + f"name_prefix = {prefix!r}\n")
    assert "engine.name_prefix:" in text
    assert "Docker-name-safe" in text or "must not be empty" in text


@pytest.mark.parametrize("where, toml", [
    ("nodes[0].name", 'name = "spark1\\nx"'),
    ("engine.model", None),
    ("engine.env.NCCL_DEBUG", None),
])
def test_control_characters_refused_in_any_value(tmp_path: Path, where: str, toml: str | None) -> None:
    if where == "nodes[0].name":
        text = GOOD.replace('name = "spark1"', toml or "")
    elif where == "engine.model":
        text = GOOD.replace('model = "/models/m"', 'model = "/models/m\\u0007"')
    else:
        text = GOOD + '[engine.env]\nNCCL_DEBUG = "INFO\\r\\nrm -rf /"\n'
    message = _fault_of(tmp_path, text)
    assert f"{where}: control character U+" in message


def test_node_names_are_any_printable_text(tmp_path: Path) -> None:
    text = GOOD.replace('name = "spark1"', 'name = "spark1.lan"')
    text = text.replace('name = "spark2"', 'name = "Spark Zwei"')
    config = load_config(_write(tmp_path, text))
    assert [n.name for n in config.nodes] == ["spark1.lan", "Spark Zwei"]
    assert "nodes[1].name: a node name must not be blank" in _fault_of(
        tmp_path, GOOD.replace('name = "spark2"', 'name = "  "'))
    assert "nodes[1].name: a node name must be printable text" in _fault_of(
        tmp_path, GOOD.replace('name = "spark2"', 'name = "spark\u00a02"'))


def test_key_conflicts_refused_naming_both_actions(tmp_path: Path) -> None:
    text = _fault_of(tmp_path, GOOD + '\n[ui.keys]\nstop = "s"\n')
    assert "ui.keys.stop: key 's' is also bound to start (default)" in text
    text = _fault_of(tmp_path, GOOD + '\n[ui.keys]\nstart = "g"\nstop = "g, ctrl+x"\n')
    assert "ui.keys.start: key 'g' is also bound to stop ([ui.keys])" in text
    assert "ui.keys.stop: key 'g' is also bound to start ([ui.keys])" in text
    assert "ui.keys.strat: unknown action" in _fault_of(tmp_path, GOOD + '\n[ui.keys]\nstrat = "g"\n')
    # "/" is the key Find has by default ("slash").
    assert "also bound to find" in _fault_of(tmp_path, GOOD + '\n[ui.keys]\nfilter = "/"\n')
    # A screen's own binding is in that screen's scope: "n" there does not clash with the log's "n".
    scoped = load_config(_write(tmp_path, GOOD + '\n[ui.keys]\n"confirm.no" = "n,escape,c"\n'))
    assert scoped.ui.keys["confirm.no"] == "n,escape,c"
    # Swapping two actions' keys is fine; so is moving one to a free key.
    ok = load_config(_write(tmp_path, GOOD + '\n[ui.keys]\nstart = "x"\nstop = "s"\nquit = "ctrl+q"\n'))
    assert ok.ui.keys["stop"] == "s"


def test_cli_refuses_hostile_values_naming_file_and_key(tmp_path: Path) -> None:
    text = GOOD.replace('host = "spark2"', 'host = "spark2"\nip = "x && touch /tmp/pwned"') + \
        'name_prefix = "x; touch /tmp/pwned"\n'
    path = _write(tmp_path, text)
    proc = _sparktui("start", "--dry-run", "--config", str(path), cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout
    assert f"{path}: nodes[1].ip: not an IP address or a host name" in proc.stderr
    assert f"{path}: engine.name_prefix:" in proc.stderr and "Traceback" not in proc.stderr


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
    with pytest.raises(ConfigError, match=f"^config file not found: {missing}$"):
        load_config(missing)
