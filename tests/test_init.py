"""`sparktui init`: discovery judged into a config (unit), and on the test hosts over real SSH: the config
it writes starts the stand-in engine to ready unchanged."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import pytest

from sparktui.config import parse_config
from sparktui.domain.init_setup import (
    DiscoveredHost,
    Image,
    InitOptions,
    choose_cable,
    parse_set,
    propose_config,
    render_toml,
    ssh_config_hosts,
)
from sparktui.domain.model_files import ModelDir
from sparktui.domain.recipes import all_recipes
from tests.cli_helpers import run_sparktui
from tests.fixtures.telemetry import sparks
from tests.lifecycle_helpers import RAY_START_ARGS, make_model_dirs
from tests.testbed import Testbed

REPO = Path(__file__).resolve().parent.parent
GB10_ENV = {"PYTHONPATH": str(sparks.NVML_DIR), "SPARKTUI_PROBE_NVML_MODULE": sparks.NVML_MODULE}


def probe_sample(spark: str) -> dict:
    """One real probe sample of a fixture Spark (its /proc and /sys trees, the GB10 NVML double)."""
    root = sparks.HERE / spark
    out = subprocess.run([sys.executable, str(REPO / "sparktui" / "probe.py"), "--count", "1",
                          "--proc-root", str(root / "proc"), "--sys-root", str(root / "sys"),
                          "--no-containers"], capture_output=True, text=True, check=True,
                         env={**GB10_ENV, "PATH": "/usr/bin:/bin"})
    return json.loads(out.stdout.splitlines()[-1])


def spark_facts(host: str, spark: str, cable_ip: str | None, ssh_ip: str) -> DiscoveredHost:
    h = DiscoveredHost(host=host, reachable=True)
    h.apply_host_report({
        "hostname": host + ".lan", "arch": "aarch64", "kernel": "6.11.0-1016-nvidia", "home": "/home/aurora",
        "ssh_connection": f"10.0.0.99 51234 {ssh_ip} 22",
        "interfaces": [{"name": "enP7s7", "operstate": "up", "mtu": "1500", "ipv4": ssh_ip, "prefix": 24},
                       {"name": "enp1s0f1np1", "operstate": "up", "mtu": "9000", "ipv4": cable_ip,
                        "prefix": 24},
                       {"name": "enP2p1s0f1np1", "operstate": "up", "mtu": "9000", "ipv4": None}],
        "disk_free": 1_500_000_000_000, "tools": {"docker": "/usr/bin/docker"},
    })
    h.apply_probe_sample(probe_sample(spark))
    h.docker = "28.3.3"
    h.images = [Image("nvcr.io/nvidia/vllm:25.11-py3", "sha256:" + "a" * 64, "0.11.0"),
                Image("eugr/spark-vllm:latest", "sha256:" + "b" * 64, "0.17.1")]
    cfg = json.loads((REPO / "tests/data/model-configs/Llama-3.3-70B-Instruct.config.json").read_text())
    half = 141_107_412_992 // 2
    h.models = [ModelDir("/home/aurora/models/Llama-3.3-70B-Instruct", True, config=cfg,
                         safetensors=(("a.safetensors", half + 1008, 1000),
                                      ("b.safetensors", half + 1008, 1000)),
                         total_bytes=141_107_414_992 + 20_000)]
    return h


def two_sparks() -> list[DiscoveredHost]:
    a = spark_facts("spark1", "spark-a", "192.168.100.10", "10.0.0.11")
    b = spark_facts("spark2", "spark-b", "192.168.100.11", "10.0.0.12")
    a.reaches = {"spark2": "ok"}
    b.reaches = {"spark1": "ok"}
    return [a, b]


def test_cable_is_the_active_twins_and_the_p_less_netdev():
    a = two_sparks()[0]
    # from the probe's real sample of the fixture sysfs: the ACTIVE twins and their netdevs
    assert {(p.device, p.state, p.netdev) for p in a.rdma if p.active} == {
        ("rocep1s0f1", "ACTIVE", "enp1s0f1np1"), ("roceP2p1s0f1", "ACTIVE", "enP2p1s0f1np1")}
    assert a.gpus == ["NVIDIA GB10"] and a.mem_total == 127_600_748 * 1024
    cable = choose_cable(a)
    assert (cable.interface, cable.ip, cable.rdma_devices) == (
        "enp1s0f1np1", "192.168.100.10", ("roceP2p1s0f1", "rocep1s0f1"))
    # no address on the cable: the address SSH came in on, said so
    a.interfaces = [i for i in a.interfaces if i.name != "enp1s0f1np1"]
    cable = choose_cable(a)
    assert (cable.interface, cable.sockets, cable.ip, cable.addressed) == (
        "enp1s0f1np1", "enP7s7", "10.0.0.11", False)
    assert "have no IPv4 address here: sockets on enP7s7" in cable.why


def test_proposal_for_two_sparks_is_a_valid_commented_config():
    hosts = two_sparks()
    for h in hosts:
        h.mem_available = 118 * 2**30
    recipes = {rid: f.recipe for rid, f in all_recipes().items()}
    p = propose_config(hosts, InitOptions(), recipes)
    text = render_toml(p.data, p.comments, "written by a test")
    cfg = parse_config(tomllib.loads(text), "init.toml")
    assert [(n.name, n.role, n.ip, n.interface) for n in cfg.nodes] == [
        ("spark1", "head", "192.168.100.10", "enp1s0f1np1"),
        ("spark2", "worker", "192.168.100.11", "enp1s0f1np1")]
    assert cfg.nodes[0].rdma_devices == ("roceP2p1s0f1", "rocep1s0f1")
    e = cfg.engine
    # the newest vLLM among the images with one ID on both nodes
    assert (e.runtime, e.image) == ("docker", "eugr/spark-vllm:latest")
    # the model under ~/models, mounted read-only at /models; its recipe found by name
    assert e.model == "/models/Llama-3.3-70B-Instruct"
    assert [(m.source, m.target, m.read_only) for m in e.mounts] == [("~/models", "/models", True)]
    assert e.recipe == "llama-3.3-70b-instruct"
    # the recipe sets the sizing flags, so init keeps them (its own proposal is a note)
    assert "--gpu-memory-utilization" in e.extra_args and "--max-model-len" in e.extra_args
    assert any(n.startswith("memory sizing would propose --gpu-memory-utilization 0.") for n in p.notes)
    assert e.env["NCCL_SOCKET_IFNAME"] == "enp1s0f1np1" and e.env["NCCL_IB_HCA"] == "roceP2p1s0f1,rocep1s0f1"
    assert "# spark1.lan (aarch64, NVIDIA GB10, 118.0 of 121.7 GiB free, 1500 GB free disk); cable: " \
        "enp1s0f1np1 carries RDMA ports roceP2p1s0f1, rocep1s0f1, address 192.168.100.10" in text
    assert p.warnings == []


def test_proposal_without_a_recipe_takes_the_sizing_values_and_warns_on_a_broken_cable():
    hosts = two_sparks()
    hosts[1].reaches = {"spark1": "TimeoutError: timed out"}
    p = propose_config(hosts, InitOptions(), recipes={})
    cfg = parse_config(tomllib.loads(render_toml(p.data, p.comments)), "init.toml")
    # fixture: 75.3 GiB free of 121.69 → (75.26 − 4) / 121.69 = 0.58; weights 65.7 GiB/GPU do not leave room:
    # 0.58 × 121.69 = 70.6 GiB − 65.7 − 5 < 0 → nothing fits at a safe utilization
    assert "--gpu-memory-utilization" not in cfg.engine.extra_args
    assert any("does not fit 2 node(s)" in w for w in p.warnings)
    assert "spark2 cannot reach spark1 over the cable: TimeoutError: timed out" in p.warnings
    for h in hosts:
        h.mem_available = 118 * 2**30
    p = propose_config(hosts, InitOptions(), recipes={})
    assert p.data["engine"]["extra_args"] == ["--gpu-memory-utilization", "0.90", "--max-model-len", "131072"]


def test_helpers():
    ssh = "Host spark1 spark2\n  HostName 10.0.0.1\nHost *\n  User x\nhost gx10 !bad\n"
    assert ssh_config_hosts(ssh) == ["spark1", "spark2", "gx10"]
    assert parse_set('engine.vllm_command=["python3", "-m", "x"]') == \
        ("engine.vllm_command", ["python3", "-m", "x"])
    assert parse_set("engine.runtime=host") == ("engine.runtime", "host")
    assert parse_set('engine.env.A="0"') == ("engine.env.A", "0")
    with pytest.raises(ValueError, match=r"expected SECTION\.KEY=VALUE"):
        parse_set("runtime=host")


def test_vllm_images_from_docker_images_lines():
    from sparktui.domain.init_setup import vllm_images

    text = ("nvcr.io/nvidia/vllm:25.11-py3\tsha256:1111\n"
            "vllm/vllm-openai:v0.17.1\tsha256:2222\n"
            "eugr/spark-vllm:latest\tsha256:3333\n"
            "<none>:<none>\tsha256:4444\n"
            "ubuntu:24.04\tsha256:5555\n"
            "registry.local:5000/team/vllm-node:dev\tsha256:6666\n"
            "garbage line\n")
    assert vllm_images(text) == [("nvcr.io/nvidia/vllm:25.11-py3", "sha256:1111"),
                                 ("vllm/vllm-openai:v0.17.1", "sha256:2222"),
                                 ("eugr/spark-vllm:latest", "sha256:3333"),
                                 ("registry.local:5000/team/vllm-node:dev", "sha256:6666")]


def test_init_needs_hosts(tmp_path):
    out = run_sparktui("init", env={"HOME": str(tmp_path)})
    assert out.returncode == 2 and "no hosts" in out.stderr


@pytest.mark.testbed
@pytest.mark.ray
def test_init_on_the_test_hosts_writes_a_config_that_starts_to_ready(testbed: Testbed,
                                                                     tmp_path: Path) -> None:
    make_model_dirs(testbed)
    run = f"init-{uuid.uuid4().hex[:8]}"
    # Each host's private /tmp gets its Spark's fixture /proc and /sys at the same path.
    for name, spark in (("spark1", "spark-a"), ("spark2", "spark-b")):
        shutil.copytree(sparks.HERE / spark, testbed.host_tmp(name) / run)
    venv_bin = Path(sys.executable).parent
    output = tmp_path / "config.toml"
    args = [
        "init", *(testbed.host(n).ip for n in testbed.names), "--yes", "--json", "--output", str(output),
        "--user", "root", "--identity-file", str(testbed.client_key),
        "--known-hosts", str(testbed.known_hosts),
        "--python", sys.executable, "--proc-root", f"/tmp/{run}/proc", "--sys-root", f"/tmp/{run}/sys",
        "--model", "/tmp/models/standin-model", "--runtime", "host",
        # What a GPU-less test host needs to run the stand-in engine (test_lifecycle's settings):
        "--set", f"engine.vllm_command={json.dumps([sys.executable, '-m', 'sparktui.sim.vllm_standin'])}",
        "--set", f"engine.ray_command={json.dumps([str(venv_bin / 'ray')])}",
        "--set", f"engine.ray_start_args={json.dumps(RAY_START_ARGS)}",
        "--set", f"engine.ray_python={json.dumps([sys.executable])}",
        "--set", 'engine.state_dir="/tmp/sparktui"',
        "--set", 'engine.env.RAY_USAGE_STATS_ENABLED="0"',
        "--set", 'engine.env.SPARKTUI_STANDIN_PACE="4.0"',
    ]
    try:
        out = run_sparktui(*args, timeout=180)
        assert out.returncode == 0, out.stdout + out.stderr
        report = json.loads(out.stdout)
        assert report["written"] == str(output)
        hosts = {h["host"]: h for h in report["hosts"]}
        ip1, ip2 = testbed.host("spark1").ip, testbed.host("spark2").ip
        assert hosts[ip1]["hostname"] == "spark1" and hosts[ip2]["hostname"] == "spark2"
        # through the probe's readers on the fixture sysfs: the cable's twins and their netdev
        assert hosts[ip1]["cable"]["rdma_devices"] == ["roceP2p1s0f1", "rocep1s0f1"]
        # its netdevs have no address in the test host: the node's address and its sockets' interface
        # are the ones SSH reached
        cable = hosts[ip1]["cable"]
        assert cable["ip"] == ip1 and cable["addressed"] is False
        assert cable["interface"] == "enp1s0f1np1"      # preflight's link checks read it under sys_root
        assert {"name": cable["sockets"], "ipv4": ip1} in [
            {"name": i["name"], "ipv4": i["ipv4"]} for i in hosts[ip1]["interfaces"]]
        assert any("the cable's netdevs have no IPv4 address" in w for w in report["warnings"])
        assert hosts[ip1]["reaches"] == {ip2: "ok"} and hosts[ip2]["reaches"] == {ip1: "ok"}
        assert hosts[ip1]["memory"]["total"] == 127_600_748 * 1024
        assert hosts[ip1]["docker"] is None
        text = output.read_text()
        assert text.startswith("# sparktui config written by `sparktui init`")
        cfg = parse_config(tomllib.loads(text), output)
        assert [(n.name, n.role, n.ip) for n in cfg.nodes] == [("spark1", "head", ip1),
                                                               ("spark2", "worker", ip2)]
        assert cfg.engine.model == "/tmp/models/standin-model" and cfg.engine.tensor_parallel_size == 2

        # Without --yes and without a terminal to ask on: shown, said, not written (asked and could not).
        other = tmp_path / "other.toml"
        shown = run_sparktui("init", *args[1:3], "--output", str(other), *args[7:], timeout=180)
        assert shown.returncode == 1, shown.stdout + shown.stderr
        assert "# sparktui config proposed by `sparktui init`" in shown.stdout
        assert "nothing written: no terminal to ask on" in shown.stderr and not other.exists()
        dry = run_sparktui("init", *args[1:3], "--yes", "--output", str(other), *args[7:], timeout=180)
        assert dry.returncode == 0, dry.stderr
        assert f"# `sparktui start --dry-run --config {other}` for this config:" in dry.stdout
        assert "# dry run: nothing is executed" in dry.stdout and "ray start --head" in dry.stdout

        # The written config, unchanged, starts the engine to ready.
        start = run_sparktui("--config", str(output), "start", "--wait", timeout=300)
        assert start.returncode == 0, start.stdout + start.stderr
        assert "engine: ready: Application startup complete." in start.stdout
        assert "memory sizing" in start.stdout
    finally:
        stop = run_sparktui("--config", str(output), "stop", timeout=240) if output.exists() else None
        for name in testbed.names:
            shutil.rmtree(testbed.host_tmp(name) / run, ignore_errors=True)
    assert stop is not None and stop.returncode == 0, stop.stdout + stop.stderr


def test_an_unreachable_host_is_named_with_the_reason_and_nothing_is_written(tmp_path):
    out = run_sparktui("init", "127.0.0.1", "--port", "1", "--known-hosts", "/dev/null", "--yes",
                       "--output", str(tmp_path / "c.toml"), env={"HOME": str(tmp_path)}, timeout=60)
    assert out.returncode == 1
    assert out.stderr.splitlines() == ["sparktui init: 127.0.0.1:1: connection refused — is sshd running?",
                                       "sparktui init: nothing written"]
    assert not (tmp_path / "c.toml").exists()


async def test_interactive_screen_picks_and_previews_the_config():
    from textual.widgets import Select, Static

    from sparktui.ui.init_app import NONE, InitApp

    hosts = two_sparks()
    for h in hosts:
        h.mem_available = 118 * 2**30
    recipes = {rid: f.recipe for rid, f in all_recipes().items()}
    app = InitApp(hosts, InitOptions(), recipes, "/tmp/never-written.toml")
    async with app.run_test(size=(160, 50)) as pilot:
        preview = app.query_one("#toml", Static)
        assert 'recipe = "llama-3.3-70b-instruct"' in str(preview.render())
        # pick the other head, the older image and no recipe: the preview follows
        app.query_one("#pick-head", Select).value = "spark2"
        app.query_one("#pick-image", Select).value = "nvcr.io/nvidia/vllm:25.11-py3"
        app.query_one("#pick-recipe", Select).value = NONE
        await pilot.pause()
        text = str(preview.render())
        assert 'image = "nvcr.io/nvidia/vllm:25.11-py3"' in text
        assert 'name = "spark2"\nhost = "spark2"\nrole = "head"' in text
        assert "recipe =" not in text
        await pilot.press("w")
    picked = app.return_value
    assert picked is not None and (picked.head, picked.image) == ("spark2", "nvcr.io/nvidia/vllm:25.11-py3")
    # the same options give the same file as `init --yes` would
    p = propose_config(hosts, picked, recipes)
    assert p.data["nodes"][1]["role"] == "head"
    assert p.data["engine"]["image"] == "nvcr.io/nvidia/vllm:25.11-py3" and "recipe" not in p.data["engine"]

    leave = InitApp(hosts, InitOptions(), recipes, "/tmp/never-written.toml")
    async with leave.run_test() as pilot:
        await pilot.press("escape")
    assert leave.return_value is None


# -- --model through the picking screen ------------------------------------------------------------
def _init_args(tmp_path: Path, *extra: str) -> argparse.Namespace:
    from sparktui.cli import build_parser

    return build_parser(load_verbs=True).parse_args(
        ["init", "spark1", "spark2", "--output", str(tmp_path / "config.toml"), *extra])


def _sized_sparks() -> list[DiscoveredHost]:
    hosts = two_sparks()
    for h in hosts:
        h.mem_available = 118 * 2**30
    return hosts


async def test_the_picking_screen_keeps_model_and_writes_it(tmp_path, capsys):
    from textual.widgets import OptionList, Select, Static

    from sparktui.commands.init import conclude
    from sparktui.ui.init_app import InitApp

    hosts = _sized_sparks()
    recipes = {rid: f.recipe for rid, f in all_recipes().items()}
    args = _init_args(tmp_path, "--model", "/tmp/models/standin-model")
    opts = InitOptions(model=args.model)
    app = InitApp(hosts, opts, recipes, args.output)
    async with app.run_test(size=(160, 50)) as pilot:
        pick = app.query_one("#pick-model", Select)
        # not in the scan, still offered and picked: a path or an HF id is a model all the same
        assert pick.value == "/tmp/models/standin-model"
        offered = pick.query_one(OptionList)   # the list the select opens
        assert "/tmp/models/standin-model  (--model)" in [str(offered.get_option_at_index(i).prompt)
                                                          for i in range(offered.option_count)]
        assert 'model = "/tmp/models/standin-model"' in str(app.query_one("#toml", Static).render())
        await pilot.press("w")
    picked = app.return_value
    assert picked is not None and picked.model == "/tmp/models/standin-model"
    assert conclude(args, ["spark1", "spark2"], hosts, picked, recipes, confirmed=True) == 0
    written = tomllib.loads((tmp_path / "config.toml").read_text())
    assert written["engine"]["model"] == "/tmp/models/standin-model"
    assert f"wrote {args.output}" in capsys.readouterr().out

    # --model naming a scanned model (by name): that model is the one picked, at its path in the container
    app = InitApp(hosts, InitOptions(model="Llama-3.3-70B-Instruct"), recipes, args.output)
    async with app.run_test(size=(160, 50)):
        assert app.query_one("#pick-model", Select).value == "/home/aurora/models/Llama-3.3-70B-Instruct"
        assert 'model = "/models/Llama-3.3-70B-Instruct"' in str(app.query_one("#toml", Static).render())


async def test_the_picking_screen_does_not_leave_with_a_config_that_does_not_validate():
    from textual.widgets import Static

    from sparktui.ui.init_app import InitApp

    hosts = _sized_sparks()
    for h in hosts:
        h.models = []
    app = InitApp(hosts, InitOptions(), {}, "/tmp/never-written.toml")
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("w")
        assert app.is_running
        notes = str(app.query_one("#notes", Static).render())
        assert notes.startswith("not written: the config does not validate")
        assert "\n  engine.model: required key is missing" in notes
        await pilot.press("escape")
    assert app.return_value is None


# -- --no-tui: show, then ask ----------------------------------------------------------------------
@pytest.fixture
def terminal(monkeypatch):
    """stdin on a real pseudo-terminal; returns a function typing a line into it."""
    leader, follower = os.openpty()
    stdin = os.fdopen(follower, "r")
    monkeypatch.setattr(sys, "stdin", stdin)
    yield lambda line: os.write(leader, line.encode() + b"\n")
    stdin.close()
    os.close(leader)


@pytest.mark.parametrize("answer", ["n", "y"])
def test_no_tui_shows_the_config_then_asks(tmp_path, capsys, terminal, answer):
    from sparktui.commands.init import conclude

    args = _init_args(tmp_path, "--no-tui")
    recipes = {rid: f.recipe for rid, f in all_recipes().items()}
    terminal(answer)
    code = conclude(args, ["spark1", "spark2"], _sized_sparks(), InitOptions(), recipes)
    out = capsys.readouterr().out
    config, question = out.index("# sparktui config proposed by `sparktui init`"), out.index("? [y/N] ")
    assert config < question and out.index('model = "/models/Llama-3.3-70B-Instruct"') < question
    assert out[:question].endswith(f"write {args.output}")
    if answer == "n":
        assert code == 0 and not Path(args.output).exists()
        assert "sparktui init: nothing written (answered no)" in out
        assert "written by" not in out
    else:
        assert code == 0 and f"wrote {args.output}" in out
        assert Path(args.output).read_text().startswith("# sparktui config written by `sparktui init`")


def test_without_a_terminal_or_yes_nothing_is_written_and_it_says_so(tmp_path, capsys, monkeypatch):
    from sparktui.commands.init import conclude

    args = _init_args(tmp_path)
    with open(os.devnull) as no_terminal:
        monkeypatch.setattr(sys, "stdin", no_terminal)
        code = conclude(args, ["spark1", "spark2"], _sized_sparks(), InitOptions(), {})
    out, err = capsys.readouterr()
    assert code == 1 and not Path(args.output).exists()
    assert "# sparktui config proposed by `sparktui init`" in out and "written by" not in out + err
    assert err.strip() == (f"sparktui init: nothing written: no terminal to ask on; pass --yes to write "
                           f"{args.output} (or --json to only show the config)")


def test_asked_to_write_and_could_not_exits_1(tmp_path, capsys, terminal):
    from sparktui.commands.init import conclude

    hosts = ["spark1", "spark2"]
    # the file is there: not replaced, and not even asked
    existing = tmp_path / "config.toml"
    existing.write_text("mine\n")
    assert conclude(_init_args(tmp_path, "--no-tui"), hosts, _sized_sparks(), InitOptions(), {}) == 1
    out, err = capsys.readouterr()
    assert "[y/N]" not in out and existing.read_text() == "mine\n"
    assert f"sparktui init: nothing written: {existing} exists; not replaced" in err
    # a file where its folder should be: the OS's reason, naming that file
    args = _init_args(tmp_path, "--yes", "--output", str(existing / "config.toml"))
    assert conclude(args, hosts, _sized_sparks(), InitOptions(), {}) == 1
    inside = existing / "config.toml"
    assert capsys.readouterr().err == (f"sparktui init: nothing written: cannot write {inside}: "
                                       f"File exists ({existing})\n")
    assert existing.read_text() == "mine\n"


def test_written_where_sparktui_does_not_look_says_how_to_use_it(tmp_path, capsys, monkeypatch):
    from sparktui.commands.init import conclude

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("SPARKTUI_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    elsewhere = tmp_path / "elsewhere.toml"
    args = _init_args(tmp_path, "--yes", "--output", str(elsewhere))
    assert conclude(args, ["spark1", "spark2"], _sized_sparks(), InitOptions(), {}) == 0
    out = capsys.readouterr().out
    assert f"note: sparktui without --config does not look at {elsewhere}: pass --config {elsewhere}" in out
    assert f"# `sparktui start --dry-run --config {elsewhere}` for this config:" in out
    # at the default (the user's config): found by the lookup, nothing to add
    args = _init_args(tmp_path, "--yes", "--output", str(tmp_path / "xdg" / "sparktui" / "config.toml"))
    assert conclude(args, ["spark1", "spark2"], _sized_sparks(), InitOptions(), {}) == 0
    out = capsys.readouterr().out
    assert "without --config" not in out and "# `sparktui start --dry-run` for this config:" in out
