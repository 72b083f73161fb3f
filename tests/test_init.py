"""`sparktui init`: discovery judged into a config (unit), and on the test hosts over real SSH: the config
it writes starts the stand-in engine to ready unchanged."""

from __future__ import annotations

import json
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

        dry = run_sparktui("init", *args[1:3], "--output", str(tmp_path / "other.toml"), *args[7:],
                           timeout=180)
        assert dry.returncode == 0, dry.stderr
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
