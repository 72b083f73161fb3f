"""config.toml: the shipped example parses, lookup order, and bad configs fail naming file, key and fault."""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

import pytest

from sparktui.config import ConfigError, find_config, load_config, user_config_path
from tests.cli_helpers import run_sparktui
from tests.config_texts import TWO_SPARKS as GOOD

REPO = Path(__file__).resolve().parents[1]



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
    """A config at every step of the lookup; HOME and the working folder in tmp_path, no XDG_CONFIG_HOME."""
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".config" / "sparktui").mkdir(parents=True)
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.chdir(work)
    return {
        "flag": _write(tmp_path, GOOD, "flag.toml"),
        "env": _write(tmp_path, GOOD, "env.toml"),
        "user": _write(home / ".config" / "sparktui", GOOD),
        "cwd": _write(work, GOOD),
    }


def test_lookup_order(places: dict[str, Path]) -> None:
    env = {"SPARKTUI_CONFIG": str(places["env"])}
    assert find_config(str(places["flag"]), env) == places["flag"]
    assert find_config(None, env) == places["env"]
    assert find_config(None, {"SPARKTUI_CONFIG": ""}) == places["user"]   # set but empty: unset
    assert find_config(None, {}) == places["user"]                        # the user's before ./config.toml
    places["user"].unlink()
    assert find_config(None, {}).resolve() == places["cwd"].resolve()
    places["cwd"].unlink()
    assert find_config(None, {}) is None


def test_the_user_config_is_under_xdg_config_home(places: dict[str, Path], tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    (xdg / "sparktui").mkdir(parents=True)
    in_xdg = _write(xdg / "sparktui", GOOD)
    assert user_config_path({"XDG_CONFIG_HOME": str(xdg)}) == in_xdg
    assert find_config(None, {"XDG_CONFIG_HOME": str(xdg)}) == in_xdg
    # no file there: ~/.config is not looked at (the variable moves the user's config), ./config.toml is
    in_xdg.unlink()
    assert find_config(None, {"XDG_CONFIG_HOME": str(xdg)}) == Path("config.toml")
    # the spec: a relative value is invalid and ignored
    assert user_config_path({"XDG_CONFIG_HOME": "rel/dir", "HOME": str(tmp_path / "home")}) == places["user"]
    assert user_config_path({"HOME": str(tmp_path / "home")}) == places["user"]


def test_explicit_path_is_used_even_when_missing(places: dict[str, Path], tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    assert find_config(str(missing), {}) == missing
    with pytest.raises(ConfigError, match=f"^config file not found: {missing}$"):
        load_config(missing)


# -- the shipped example never shadows the user's config -------------------------------------------
@pytest.fixture
def checkout(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A working folder holding the shipped example (as when run from the checkout), and an environment
    whose HOME and XDG_CONFIG_HOME are in tmp_path with no user config yet."""
    work = tmp_path / "checkout"
    work.mkdir()
    shutil.copy(REPO / "config.toml", work / "config.toml")
    env = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    return work, env


def test_the_shipped_example_never_shadows_the_user_config(checkout: tuple[Path, dict[str, str]],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    work, env = checkout
    monkeypatch.chdir(work)
    assert find_config(None, env) == Path("config.toml")            # only the example: it is found ...
    user = user_config_path(env)
    user.parent.mkdir(parents=True)
    user.write_text(GOOD)                                            # ... until the user has a config
    assert find_config(None, env) == user
    # what a verb then does: the user's config, not "the shipped example"
    proc = _sparktui("start", "--dry-run", cwd=work, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "ray start --head" in proc.stdout and "example" not in proc.stderr


#: Verbs that refuse the shipped example (it names no real machines) and point to the demo instead.
REFUSING = [("status",), ("logs",), ("start",), ("stop",), ("restart",), ("bench",), ("export",),
            ("linktest",)]


@pytest.mark.parametrize("argv", REFUSING, ids=lambda a: a[0])
def test_a_verb_refusing_the_example_names_the_files_it_looked_at(checkout: tuple[Path, dict[str, str]],
                                                                  argv: tuple[str, ...]) -> None:
    work, env = checkout
    proc = _sparktui(*argv, cwd=work, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    user = Path(env["XDG_CONFIG_HOME"]) / "sparktui" / "config.toml"
    assert (f"sparktui {argv[0]}: no config of yours found (looked at {user}: no file; ./config.toml: "
            "the shipped example (cluster.example = true))") in " ".join(proc.stderr.split())
    assert f"Run `sparktui init` to write {user}" in " ".join(proc.stderr.split())


def test_the_dashboard_falling_back_to_the_demo_names_the_files_it_looked_at(
        checkout: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    from sparktui.commands.dashboard import choose

    work, env = checkout
    monkeypatch.chdir(work)
    args = argparse.Namespace(config=None, demo=False, readonly=False)
    user = user_config_path(env)
    choice = choose(args, env)
    assert choice.demo and choice.notice is not None
    assert (f"no config of yours found (looked at {user}: no file; ./config.toml: the shipped example "
            "(cluster.example = true))") in choice.notice
    (work / "config.toml").unlink()
    choice = choose(args, env)
    assert choice.demo and choice.notice is not None
    assert f"no config found (looked at {user}: no file; ./config.toml: no file)" in choice.notice
    # the user's config written (as `sparktui init` does): the real backend, whatever ./config.toml holds
    shutil.copy(REPO / "config.toml", work / "config.toml")
    user.parent.mkdir(parents=True)
    user.write_text(GOOD)
    choice = choose(args, env)
    assert not choice.demo and choice.config is not None and choice.config.nodes[0].name == "spark1"


def test_no_config_at_all_names_the_files_it_looked_at(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": ""}
    proc = _sparktui("status", cwd=tmp_path, env=env)
    assert proc.returncode == 2
    user = tmp_path / ".config" / "sparktui" / "config.toml"
    assert (f"sparktui: no config found (looked at {user}: no file; ./config.toml: no file; no --config "
            "or $SPARKTUI_CONFIG)") in proc.stderr
