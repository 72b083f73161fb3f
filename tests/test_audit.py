"""`sparktui audit`: the nodes' facts compared (pure), each difference named with its node; the node script's
shipped text run here (``python -I -c``, nothing of sparktui importable) against real directories, its
reports compared as two nodes' would be; preflight's rows (warnings, a failure where a start would hang)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from sparktui import node
from sparktui.config import SparkConfig, parse_config
from sparktui.domain.events import StepStatus
from sparktui.domain.lifecycle.audit import (
    NodeAudit,
    audit_commands,
    audit_json,
    compare,
    ifname_matches,
    nccl_text,
    summary_rows,
)
from sparktui.domain.lifecycle.audit import audit_views as views
from tests.cli_helpers import run_sparktui

CONFIG_SHA = "1a2b3c4d" + "0" * 56
OTHER_SHA = "3c4d5e6f" + "0" * 56
SYSTEM_NCCL = {"override": None, "pip": None, "pip_version": None,
               "system": ["/usr/lib/aarch64-linux-gnu/libnccl.so.2"],
               "loads": "/usr/lib/aarch64-linux-gnu/libnccl.so.2"}
PIP_NCCL = {"override": None, "pip": "/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
            "pip_version": "nvidia-nccl-cu12 2.21.5", "system": SYSTEM_NCCL["system"],
            "loads": "/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"}


def config(runtime: str = "host", **engine: Any) -> SparkConfig:
    return parse_config({
        "nodes": [{"name": "spark1", "host": "spark1.lan", "ip": "10.0.0.1", "role": "head"},
                  {"name": "spark2", "host": "spark2.lan", "ip": "10.0.0.2"}],
        "engine": {"runtime": runtime, "model": "/models/qwen", "image": "vllm:test", **engine},
    }, "<test>")


def facts(name: str, **kw: Any) -> NodeAudit:
    """A node that agrees with its twin unless told otherwise: the cable on enp1s0f1np1 at 10.0.0.N."""
    n = name[-1]
    base: dict[str, Any] = dict(
        hostname=name, model_path="/models/qwen", model_exists=True,
        files={"config.json": (1234, CONFIG_SHA), "tokenizer.json": (11_422_654, "ab" * 32),
               "model-00001-of-00002.safetensors": (4_000_000_000, None),
               "model-00002-of-00002.safetensors": (3_500_000_000, None)},
        env={"NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1", "CUDA_HOME": "/usr/local/cuda"},
        vllm="0.11.0", nccl=SYSTEM_NCCL, image_id="sha256:" + "ee" * 32,
        interfaces={"lo": "127.0.0.1", "enp1s0f1np1": f"10.0.0.{n}", "wlP9s9": f"192.168.1.{n}"},
        cable=("enp1s0f1np1", "enP2p1s0f1np1"), routes={f"10.0.0.{3 - int(n)}": f"10.0.0.{n}"},
    )
    base.update(kw)
    return NodeAudit(**base)


def messages(cfg: SparkConfig, found: dict[str, NodeAudit | str]) -> list[str]:
    return [d.message for d in compare(cfg, found)]


def test_twins_agree_and_preflight_says_so() -> None:
    cfg = config()
    found: dict[str, NodeAudit | str] = {"spark1": facts("spark1"), "spark2": facts("spark2")}
    assert compare(cfg, found) == []
    [row] = views(cfg, found)
    assert row.status is StepStatus.OK and row.name == "nodes alike"


def test_a_model_file_that_differs_is_named_with_its_node_and_both_hashes() -> None:
    other = facts("spark2").files | {"config.json": (1234, OTHER_SHA)}
    missing = {k: v for k, v in other.items() if k != "model-00002-of-00002.safetensors"}
    found: dict[str, NodeAudit | str] = {"spark1": facts("spark1"), "spark2": facts("spark2", files=missing)}
    assert messages(config(), found) == [
        "config.json differs on spark2 (sha256 3c4d5e6f… vs 1a2b3c4d… on spark1)",
        "model-00002-of-00002.safetensors missing on spark2 (3,500,000,000 bytes on spark1)",
    ]
    shard = facts("spark1").files | {"model-00001-of-00002.safetensors": (3_999_999_000, None)}
    found = {"spark1": facts("spark1"), "spark2": facts("spark2", files=shard)}
    assert messages(config(), found) == ["model-00001-of-00002.safetensors differs on spark2 (size "
                                         "3,999,999,000 vs 4,000,000,000 bytes on spark1)"]


def test_an_env_var_set_on_one_side_only_or_with_another_value_is_named() -> None:
    one_side = facts("spark1").env | {"PYTHONHASHSEED": "0"}
    other_value = facts("spark2").env | {"NCCL_IB_HCA": "rocep1s0f1"}
    found: dict[str, NodeAudit | str] = {"spark1": facts("spark1", env=one_side),
                                         "spark2": facts("spark2", env=other_value)}
    diffs = compare(config(), found)
    assert [(d.topic, d.node, d.message) for d in diffs] == [
        ("env", "spark2",
         "NCCL_IB_HCA differs on spark2 (=rocep1s0f1 vs =rocep1s0f1,roceP2p1s0f1 on spark1)"),
        ("env", "spark2", "PYTHONHASHSEED set on spark1 only (=0)"),
    ]
    # Preflight warns (a start goes on), one row per difference, on the node that differs.
    assert [(v.status, v.node) for v in views(config(), found)] == [(StepStatus.WARNING, "spark2")] * 2


def test_what_the_config_sets_overrides_the_nodes_own_so_it_is_not_drift() -> None:
    cfg = config(env={"PYTHONHASHSEED": "0"})
    found: dict[str, NodeAudit | str] = {
        "spark1": facts("spark1", env=facts("spark1").env | {"PYTHONHASHSEED": "42"}),
        "spark2": facts("spark2")}
    assert compare(cfg, found) == []


def test_a_pip_nccl_on_one_node_and_the_systems_on_the_other() -> None:
    found: dict[str, NodeAudit | str] = {"spark1": facts("spark1"), "spark2": facts("spark2", nccl=PIP_NCCL)}
    assert messages(config(), found) == [
        "libnccl differs on spark2: /venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2 (pip "
        "nvidia-nccl-cu12 2.21.5) vs /usr/lib/aarch64-linux-gnu/libnccl.so.2 (system) on spark1"]
    assert nccl_text({**SYSTEM_NCCL, "override": "/opt/nccl.so", "loads": "/opt/nccl.so"}) == \
        "/opt/nccl.so (VLLM_NCCL_SO_PATH or LD_PRELOAD)"


def test_image_and_vllm_differ_in_the_verb_but_are_preflights_own_checks() -> None:
    cfg = config("docker")
    other = facts("spark2", image_id="sha256:" + "ff" * 32, vllm="0.10.2")
    found: dict[str, NodeAudit | str] = {"spark1": facts("spark1"), "spark2": other}
    assert [d.topic for d in compare(cfg, found)] == ["image", "vLLM"]
    assert "vLLM version differs on spark2: 0.10.2 vs 0.11.0 on spark1" in messages(cfg, found)
    assert [v.status for v in views(cfg, found)] == [StepStatus.OK]


def test_addresses_a_wifi_address_or_a_socket_interface_off_the_cable() -> None:
    wifi = facts("spark2", routes={"10.0.0.1": "192.168.1.2"})
    absent = facts("spark1", interfaces={"lo": "127.0.0.1", "enp1s0f1np1": "10.0.0.9"})
    found: dict[str, NodeAudit | str] = {"spark1": absent, "spark2": wifi}
    diffs = compare(config(), found)
    assert [(d.node, d.message, d.blocking) for d in diffs] == [
        ("spark1",
         "spark1 advertises 10.0.0.1 (Ray node IP, VLLM_HOST_IP) but no interface of spark1 holds it", True),
        ("spark2", "spark2 reaches 10.0.0.1 from 192.168.1.2, not from its advertised 10.0.0.2", False),
    ]
    # A start would hang on the first: preflight fails it.
    assert [v.status for v in views(config(), found)] == [StepStatus.FAILED, StepStatus.WARNING]
    on_wifi = config(env={"NCCL_SOCKET_IFNAME": "wl"})
    found = {"spark1": facts("spark1"), "spark2": facts("spark2")}
    assert messages(on_wifi, found) == [
        f"NCCL_SOCKET_IFNAME=wl selects wlP9s9 (192.168.1.{n}) on spark{n}, not the advertised 10.0.0.{n}"
        for n in (1, 2)]
    gloo = facts("spark1").env | {"GLOO_SOCKET_IFNAME": "eth0"}
    found = {"spark1": facts("spark1", env=gloo), "spark2": facts("spark2")}
    assert [(d.message, d.blocking) for d in compare(config(), found)] == [
        ("GLOO_SOCKET_IFNAME set on spark1 only (=eth0)", False),
        ("GLOO_SOCKET_IFNAME=eth0 selects no interface of spark1", True)]


def test_advertising_an_address_off_the_cable() -> None:
    cfg = parse_config({"nodes": [{"name": "spark1", "host": "192.168.1.1", "role": "head"},
                                  {"name": "spark2", "host": "192.168.1.2"}],
                        "engine": {"runtime": "host", "model": "/models/qwen"}}, "<test>")
    found: dict[str, NodeAudit | str] = {n: facts(n, routes={}) for n in ("spark1", "spark2")}
    assert messages(cfg, found) == [
        f"spark{n} advertises 192.168.1.{n} on wlP9s9, not on the cable (enp1s0f1np1: 10.0.0.{n}, "
        f"enP2p1s0f1np1: no address)" for n in (1, 2)]


def test_nccl_ifname_syntax() -> None:
    names = ["eth0", "enp1s0f1np1", "enP2p1s0f1np1", "lo"]
    assert ifname_matches("enp1", names) == ["enp1s0f1np1"]
    assert ifname_matches("=eth", names) == []
    assert ifname_matches("^lo,docker", names) == ["eth0", "enp1s0f1np1", "enP2p1s0f1np1"]
    assert ifname_matches("enp1s0f1np1,enP2p1s0f1np1", names) == ["enp1s0f1np1", "enP2p1s0f1np1"]


def test_mounts_missing_on_one_node_or_differing_a_cache_dir_may_be_missing() -> None:
    cfg = config("docker", mounts=[{"source": "/etc/vllm/chat.jinja", "target": "/chat.jinja"}])
    chat = {"kind": "file", "size": 900, "sha256": CONFIG_SHA}
    cache = {"kind": "dir", "entries": 3}
    mounts1 = {"/etc/vllm/chat.jinja": chat, "~/.cache/vllm": cache, "~/.cache/flashinfer": cache}
    mounts2 = {"/etc/vllm/chat.jinja": {"kind": "missing"}, "~/.cache/vllm": {"kind": "missing"},
               "~/.cache/flashinfer": cache}
    found: dict[str, NodeAudit | str] = {"spark1": facts("spark1", mounts=mounts1),
                                         "spark2": facts("spark2", mounts=mounts2)}
    assert messages(cfg, found) == ["mount source /etc/vllm/chat.jinja missing on spark2 (present on spark1)"]
    mounts2 = mounts1 | {"/etc/vllm/chat.jinja": chat | {"sha256": OTHER_SHA}}
    found = {"spark1": facts("spark1", mounts=mounts1), "spark2": facts("spark2", mounts=mounts2)}
    assert messages(cfg, found) == ["mount source /etc/vllm/chat.jinja differs on spark2 (sha256 3c4d5e6f… "
                                    "vs 1a2b3c4d… on spark1)"]


def test_an_unreadable_node_is_a_difference_and_the_others_are_still_shown() -> None:
    cfg = config()
    found: dict[str, NodeAudit | str] = {"spark1": facts("spark1"), "spark2": "exit 127: python3: not found"}
    assert messages(cfg, found) == ["spark2's facts unreadable: exit 127: python3: not found"]
    rows = dict(summary_rows(cfg, found))
    assert rows["model files"] == {"spark1": "4 files, 7.0 GiB, 2 hashed", "spark2": "unreadable"}
    assert rows["advertised address"]["spark1"] == "10.0.0.1 on enp1s0f1np1"
    out = audit_json(cfg, found, compare(cfg, found))
    assert out["ok"] is False and out["nodes"]["spark2"] == {"error": "exit 127: python3: not found"}
    json.dumps(out)


# ---- the node script, run here ------------------------------------------------------------------------
def run_script(tmp_path: Path, req: dict[str, Any], env: dict[str, str]) -> str:
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-I", "-c", node.source("audit"), json.dumps(req)], cwd=cwd,
                          env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), **env},
                          capture_output=True, text=True, timeout=60, check=True).stdout


def make_model(root: Path, config_text: str) -> None:
    root.mkdir(parents=True)
    (root / "config.json").write_text(config_text)
    (root / "tokenizer_config.json").write_text('{"model_max_length": 4096}')
    (root / "model-00001-of-00001.safetensors").write_bytes(b"\0" * 70_000)


def test_two_nodes_reports_from_the_script_compared(tmp_path: Path) -> None:
    """The shipped script on two model directories (one config.json edited) and two environments (one with
    PYTHONHASHSEED): the comparison names the file and the variable, with the node."""
    make_model(tmp_path / "a", '{"architectures": ["Qwen3ForCausalLM"]}')
    make_model(tmp_path / "b", '{"architectures": ["Qwen2ForCausalLM"]}')    # the same size
    cfg = config()
    req = json.loads(audit_commands(cfg, cfg.nodes[0]).host[-1])
    assert req["engine"]["env_prefixes"][:2] == ["NCCL_", "GLOO_"] and req["net"] == {"peers": ["10.0.0.2"]}
    reports = {}
    for name, folder, env in (("spark1", "a", {"PYTHONHASHSEED": "0", "HF_TOKEN": "hf_secret"}),
                              ("spark2", "b", {})):
        req["model"] = {"path": str(tmp_path / folder)}
        req["hash_bound"] = 65_536     # the 70 kB "shard" is sized, never hashed
        req["net"] = {"peers": ["127.0.0.1"]}
        text = run_script(tmp_path, req, env)
        assert "hf_secret" not in text   # a secret's digest only
        reports[name] = NodeAudit.parse(text)
    one = reports["spark1"]
    assert one.files["model-00001-of-00001.safetensors"] == (70_000, None)
    assert one.files["config.json"][1] is not None and one.env is not None
    assert one.env["HF_TOKEN"].startswith("sha256:") and one.interfaces["lo"] == "127.0.0.1"
    assert one.routes == {"127.0.0.1": "127.0.0.1"} and one.nccl is not None and "loads" in one.nccl
    # The test machine's addresses are not the config's: compare the files and the environment here.
    found: dict[str, NodeAudit | str] = {n: replace(r, interfaces={}, routes={}) for n, r in reports.items()}
    said = messages(cfg, found)
    assert len(said) == 3, said
    a, b = (hashlib.sha256((tmp_path / f / "config.json").read_bytes()).hexdigest()[:8] for f in "ab")
    assert said[0] == f"config.json differs on spark2 (sha256 {b}… vs {a}… on spark1)"
    assert said[1:] == [f"HF_TOKEN set on spark1 only (={one.env['HF_TOKEN']})",
                        "PYTHONHASHSEED set on spark1 only (=0)"]


def test_the_script_reads_mounts_and_an_hf_cache_snapshot(tmp_path: Path) -> None:
    repo = tmp_path / "hf" / "hub" / "models--org--tiny"
    make_model(repo / "snapshots" / "abc", "{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc")
    chat = tmp_path / "chat.jinja"
    chat.write_text("{{ messages }}")
    req = {"model": {"hf_id": "org/tiny", "hf_home": str(tmp_path / "hf")},
           "mounts": [str(chat), str(tmp_path / "absent"), "~/"]}
    got = NodeAudit.parse(run_script(tmp_path, req, {}))
    assert got.model_path == str(repo / "snapshots" / "abc") and "config.json" in got.files
    assert got.mounts[str(chat)]["kind"] == "file" and got.mounts[str(chat)]["size"] == 14
    assert got.mounts[str(tmp_path / "absent")] == {"kind": "missing"} and got.mounts["~/"]["kind"] == "dir"
    assert got.env is None      # not asked: with docker the image answers for the engine's world


def test_preflight_leaves_a_local_models_listing_to_its_model_files_check_but_not_an_hf_ids() -> None:
    other = facts("spark2").files | {"config.json": (1234, OTHER_SHA)}
    missing = {k: v for k, v in other.items() if k != "model-00002-of-00002.safetensors"}
    found: dict[str, NodeAudit | str] = {"spark1": facts("spark1"), "spark2": facts("spark2", files=missing)}
    # "model files" (preflight's own) says the missing shard and offers `model sync`: here only the content.
    assert [v.message for v in views(config(), found)] == [
        "config.json differs on spark2 (sha256 3c4d5e6f… vs 1a2b3c4d… on spark1)"]
    # A Hugging Face id: each node's cache snapshot, which nothing else compares.
    assert len(views(config(model="Qwen/Qwen3-8B"), found)) == 2


def test_the_image_answers_for_the_engines_world_and_its_report_is_merged(tmp_path: Path) -> None:
    """With docker the node's report has no ``engine``; the throw-away container's does (the same script)."""
    host = run_script(tmp_path, {"model": {"path": str(tmp_path / "absent")}}, {})
    inner = run_script(tmp_path, {"engine": {"env_names": ["PYTHONHASHSEED"], "env_prefixes": []}},
                       {"PYTHONHASHSEED": "0", "NCCL_DEBUG": "INFO", "LD_PRELOAD": "/opt/nccl/libnccl.so.2"})
    got = NodeAudit.parse(host, inner)
    assert got.model_exists is False and got.env == {"PYTHONHASHSEED": "0"} and got.nccl is not None
    # A preloaded libnccl comes before torch's: the one that loads.
    assert nccl_text(got.nccl) == "/opt/nccl/libnccl.so.2 (VLLM_NCCL_SO_PATH or LD_PRELOAD)"


def test_the_verb_on_two_local_nodes_that_agree(tmp_path: Path) -> None:
    """The verb end to end (transports, both nodes' scripts, the table): two `local` nodes, one model."""
    make_model(tmp_path / "m", "{}")
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'''[[nodes]]
name = "one"
host = "localhost"
local = true
role = "head"
python = "{sys.executable}"

[[nodes]]
name = "two"
host = "localhost"
local = true
python = "{sys.executable}"

[engine]
runtime = "host"
model = "{tmp_path / 'm'}"
''')
    out = run_sparktui("--config", str(cfg), "audit", timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["one", "two"]
    assert lines[3].split()[:2] == ["model", "files"] and lines[3].count("3 files, 0.0 GiB, 2 hashed") == 2
    assert lines[-1].startswith("The nodes agree: ")


def test_a_venvs_vllm_is_asked_through_the_python_beside_it(tmp_path: Path) -> None:
    """vLLM's version, torch and libnccl are those of the venv its command lives in: the python3 beside it,
    else the node's ``python`` (a vllm not on PATH, or with no python3 beside it)."""
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "vllm").write_text("#!/bin/sh\n")
    (venv / "vllm").chmod(0o755)
    (venv / "python3").symlink_to(sys.executable)
    for command, expected in ((str(venv / "vllm"), str(venv / "python3")), ("no-such-vllm", sys.executable)):
        cfg = config(vllm_command=[command])
        argv = list(audit_commands(cfg, cfg.nodes[0].model_copy(update={"python": sys.executable})).host)
        argv[-1] = json.dumps({"engine": {"env_names": [], "env_prefixes": []}})
        res = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True, cwd=tmp_path)
        assert json.loads(res.stdout)["engine"]["python"] == expected


def test_a_model_id_is_read_from_the_cache_the_engine_would_use() -> None:
    host = config(model="Qwen/Qwen3-8B", env={"HF_HOME": "/data/hf"})
    assert json.loads(audit_commands(host, host.nodes[1]).host[-1])["model"] == {
        "hf_id": "Qwen/Qwen3-8B", "hf_home": "/data/hf"}
    docker = config("docker", model="Qwen/Qwen3-8B",
                    mounts=[{"source": "~/.cache/huggingface", "target": "/root/.cache/huggingface"}])
    assert json.loads(audit_commands(docker, docker.nodes[1]).host[-1])["model"]["hf_home"] == \
        "~/.cache/huggingface"
    assert json.loads(audit_commands(docker, docker.nodes[1]).host[-1])["mounts"][0] == "~/.cache/huggingface"


def test_the_images_report_is_asked_once_per_image_id(tmp_path: Path) -> None:
    """Preflight's audit keeps the image's report per image ID (the node's report names it): the second
    start on the same image runs no throw-away container; another image, or a failed report, is asked."""
    import asyncio

    from sparktui.domain.lifecycle.vllm_facts_cache import VllmFactsCache
    from sparktui.remote.audit import gather_audit
    from sparktui.remote.transport import CommandResult

    inner = run_script(tmp_path, {"engine": {"env_names": ["PYTHONHASHSEED"], "env_prefixes": []}},
                       {"PYTHONHASHSEED": "0"})
    asked: list[str] = []
    image = {"id": "sha256:" + "ab" * 32, "fails": False}

    async def run(argv: Any) -> CommandResult:
        asked.append(argv[0])
        if argv[0] == "host":
            out = json.dumps({"hostname": "n1", "image_id": image["id"], "model": {}})
            return CommandResult(tuple(argv), 0, out, "", 0.1)
        return CommandResult(tuple(argv), 1 if image["fails"] else 0, "" if image["fails"] else inner,
                             "boom" if image["fails"] else "", 0.1)

    cache = VllmFactsCache(tmp_path / "cache")

    def gather() -> Any:
        return asyncio.run(gather_audit(run, ["host"], ["docker", "run"], cache))

    image["fails"] = True
    assert isinstance(gather(), str)          # a failed report is said and never kept
    image["fails"] = False
    first, second = gather(), gather()
    assert isinstance(first, NodeAudit) and first == second and first.env == {"PYTHONHASHSEED": "0"}
    assert asked == ["host", "docker", "host", "docker", "host"]
    image["id"] = "sha256:" + "cd" * 32       # a new image: asked afresh
    assert isinstance(gather(), NodeAudit) and asked[-2:] == ["host", "docker"]
