"""Preflight judgement (pure): memory, RDMA, ports, leftovers, model files, same image/version, vLLM flags."""

from __future__ import annotations

import json

from sparktui.config import parse_config
from sparktui.domain.events import EngineState, StepStatus
from sparktui.domain.lifecycle import preflight as F
from sparktui.domain.lifecycle import vllm_help
from sparktui.domain.lifecycle.discovery import DetachedState, classify

GIB_KB = 1048576


def facts(**kw: object) -> F.PreflightFacts:
    base = {"hostname": "spark1", "home": "/home/u", "mem_total_kb": 120 * GIB_KB,
            "mem_available_kb": 110 * GIB_KB, "rdma": [], "ports_busy": [], "processes": []}
    base.update(kw)
    return F.PreflightFacts.parse(json.dumps(base))


def config(**engine: object):  # type: ignore[no-untyped-def]
    return parse_config({"nodes": [{"name": "spark1", "host": "a", "role": "head"},
                                   {"name": "spark2", "host": "b"}],
                         "engine": {"runtime": "docker", "model": "/models/m",
                                    "mounts": [{"source": "~/models", "target": "/models"}], **engine}})


def test_memory() -> None:
    assert F.check_memory("n", facts(), 0.85).status is StepStatus.OK
    low = F.check_memory("n", facts(mem_available_kb=50 * GIB_KB), 0.85)
    assert low.status is StepStatus.WARNING and "85%" in low.message
    assert F.needed_memory_fraction(["--gpu-memory-utilization", "0.7"]) == 0.7
    assert F.needed_memory_fraction(["--gpu-memory-utilization=0.6"]) == 0.6
    assert F.needed_memory_fraction([]) == 0.9


def test_rdma() -> None:
    up = {"device": "rocep1s0f1", "port": "1", "state": "4: ACTIVE", "phys_state": "5: LinkUp"}
    down = {"device": "roceP2p1s0f1", "port": "1", "state": "1: DOWN", "phys_state": "3: Disabled"}
    assert F.check_rdma("n", facts(), ()).status is StepStatus.SKIPPED
    assert F.check_rdma("n", facts(rdma=[up]), ()).status is StepStatus.OK
    assert F.check_rdma("n", facts(rdma=[down]), ()).status is StepStatus.FAILED
    both = F.check_rdma("n", facts(rdma=[up, down]), ("rocep1s0f1", "roceP2p1s0f1"))
    assert both.status is StepStatus.WARNING
    absent = F.check_rdma("n", facts(rdma=[up]), ("rocep1s0f1", "roceP2p1s0f1"))
    assert absent.status is StepStatus.FAILED and "roceP2p1s0f1" in absent.message


def test_ports_and_leftovers() -> None:
    v = F.check_ports("spark1", facts(ports_busy=[6379]), {8000: "vLLM API", 6379: "Ray GCS"})
    assert v.status is StepStatus.FAILED and "6379 (Ray GCS)" in v.message
    assert F.check_ports("spark1", facts(), {8000: "vLLM API"}).status is StepStatus.OK
    procs = [{"pid": 42, "cmdline": "/usr/bin/raylet --x"}]
    left = F.check_leftovers("spark2", facts(processes=procs),
                             [F.DockerContainer("sparktui-ray-spark2", "abc", "running")])
    assert left.status is StepStatus.FAILED
    assert "spark2: pid 42 /usr/bin/raylet --x" in left.output_tail
    assert "spark2: container sparktui-ray-spark2 (running)" in left.output_tail
    ps = "sparktui-ray-head\tid1\trunning\tUp 2 hours\nothersparktui-x\tid2\texited\t-\n"
    assert [c.name for c in F.parse_docker_ps(ps, "sparktui")] == ["sparktui-ray-head"]


def test_model_files_compared_across_nodes() -> None:
    cfg = config()
    assert F.model_host_path(cfg) == "~/models/m"
    model = {"exists": True, "files": [["config.json", 10], ["w.safetensors", 100]], "total_bytes": 110}
    other = {"exists": True, "files": [["config.json", 10], ["w.safetensors", 99]], "total_bytes": 109}
    views = F.check_model(cfg, {"spark1": facts(model=model), "spark2": facts(model=other)})
    assert [v.status for v in views] == [StepStatus.OK, StepStatus.FAILED]
    assert "size differs: w.safetensors" in views[1].output_tail[0]
    views = F.check_model(cfg, {"spark1": facts(model=model), "spark2": facts(model={"exists": False})})
    assert views[0].status is StepStatus.FAILED and views[0].node == "spark2"
    hf = F.check_model(config(model="Qwen/Qwen3-8B"), {})
    assert hf[0].status is StepStatus.SKIPPED


def test_same_image_and_version() -> None:
    views = F.check_same("same image", {"spark1": "sha256:a", "spark2": "sha256:b"}, "image", "spark1")
    assert [v.status for v in views] == [StepStatus.OK, StepStatus.FAILED]
    assert "sha256:b differs from sha256:a on spark1" in views[1].message


HELP_OLD = """usage: vllm serve [-h] [--host HOST] [--port PORT] [--max-model-len MAX_MODEL_LEN]

options:
  -h, --help            show this help message and exit
  --host HOST           host name
  --port PORT           port number
  --max-model-len MAX_MODEL_LEN
                        Model context length.
  --trust-remote-code, --no-trust-remote-code
                        Trust remote code.
  --tensor-parallel-size TENSOR_PARALLEL_SIZE, -tp TENSOR_PARALLEL_SIZE
  --compilation-config COMPILATION_CONFIG, -O COMPILATION_CONFIG
"""


def test_vllm_flags_checked_against_help() -> None:
    known = vllm_help.flags_in_help(HELP_OLD)
    assert {"--max-model-len", "--trust-remote-code", "--no-trust-remote-code", "-tp", "-O"} <= known
    ok = vllm_help.check_flags(["--max_model_len", "4096", "--trust-remote-code", "-O3",
                                "--compilation-config.level", "3"], known)
    assert ok.ok, ok
    bad = vllm_help.check_flags(["--max-model-len", "-1", "--enable-turbo", "--port", "9"], known)
    assert bad.unknown == ("--enable-turbo",)
    assert bad.reserved == (("--port", "engine.api_port"),)
    msg = bad.message("0.11.0")
    assert "unknown to vLLM 0.11.0: --enable-turbo" in msg and "engine.api_port" in msg
    assert vllm_help.help_is_summary("Use --help=all to show all options")
    assert vllm_help.parse_version("INFO 11-29 warming\n0.11.0\n") == "0.11.0"
    assert vllm_help.parse_version("0.19.2+cu130") == "0.19.2+cu130"


def test_malformed_flag_words_refused() -> None:
    """A flag word with a space, ``;``, ``|`` or a newline is two list items glued (or a pasted shell line):
    refused by name, never skipped as "not a flag"."""
    known = vllm_help.flags_in_help(HELP_OLD)
    for word in ("--max-model-len 4096", "--help; touch /tmp/pwned", "--trust-remote-code|cat",
                 "--max-model-len\n4096"):
        check = vllm_help.check_flags([word], known)
        assert not check.ok and check.malformed == (word,), word
        msg = check.message("0.11.0")
        assert "did you mean two list items?" in msg and repr(word) in msg
        assert "every flag" not in msg
    odd = vllm_help.check_flags(["--max$len"], known)
    assert odd.malformed == ("--max$len",) and "not a flag name" in odd.message(None)
    # A value after "=" may hold spaces (JSON configs); "--" alone ends options.
    fine = vllm_help.check_flags(['--compilation-config={"level": 3}', "--"], known)
    assert fine.ok, fine


def test_discovery_classification() -> None:
    running = {"spark1": DetachedState("running", 42, 100, "/tmp/vllm.log")}
    state, detail = classify(running, {}, {}, {}, None)
    assert state is EngineState.STARTING and "pid 42" in detail
    state, detail = classify({"spark1": DetachedState("exited", 42)}, {}, {}, {}, None)
    assert state is EngineState.FAILED
    state, detail = classify({"spark1": DetachedState("none")}, {}, {"spark2": [{"pid": 7}]}, {}, None)
    assert state is EngineState.STOPPED and "leftovers" in detail
    assert classify({}, {}, {}, {}, None)[0] is EngineState.STOPPED
    parsed = DetachedState.parse("running 4242\nlog 1234 /home/u/state/vllm.log\n")
    assert parsed == DetachedState("running", 4242, 1234, "/home/u/state/vllm.log")
    assert DetachedState.parse("none\nlog - /x/vllm.log\n").log_size is None
