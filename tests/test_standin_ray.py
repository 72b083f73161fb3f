"""The stand-in vLLM engine on a real two-node Ray cluster (test bed hosts spark1 + spark2, root only).

Ray is real: ``ray start --head`` on spark1, ``ray start --address`` on spark2, one declared GPU each.
The stand-in runs on spark1 like ``vllm serve`` would (detached, output to a log file in the host's
/tmp), and is observed from outside: its log, its HTTP port on spark1's address, Ray's own state.
"""

from __future__ import annotations

import http.client
import json
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparktui.domain.json_report import last_json_object
from tests.testbed import Testbed, unavailable_reason
from tests.waiting import wait_until_sync

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

RAY = str(Path(sys.executable).with_name("ray"))
RAY_PORT = "6379"
PACE = "5"
MODEL = "/models/standin-model"
RAY_NODE_ARGS = [
    "--num-gpus",
    "1",
    "--num-cpus",
    "1",
    "--object-store-memory",
    "80000000",
    "--disable-usage-stats",
]
# Start the command detached inside the host; record its pid and, when it ends, its exit status.
_DETACH = (
    'log="$1"; shift; ( "$@" >"$log" 2>&1 </dev/null & pid=$!; echo "$pid" >"$log.pid"; '
    'wait "$pid"; echo "$?" >"$log.rc" ) >/dev/null 2>&1 </dev/null &'
)
_PG_TABLE = (
    "import json, ray; ray.init(address='auto', logging_level='ERROR'); "
    "print(json.dumps({'groups': list(ray.util.placement_group_table().values())}))"
)
# Until the cluster has exactly N GPUs (a stopped node counts until Ray declares it dead).
_WAIT_GPUS = (
    "import sys, time, ray; ray.init(address='auto', logging_level='ERROR'); "
    "t = time.time() + 60\n"
    "while ray.cluster_resources().get('GPU', 0) != int(sys.argv[1]) and time.time() < t: time.sleep(0.2)\n"
    "print(ray.cluster_resources().get('GPU', 0))"
)


def _exec(bed: Testbed, host: str, *argv: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return bed.exec(host, ["env", "RAY_USAGE_STATS_ENABLED=0", *argv], timeout=timeout)


@pytest.fixture(scope="module")
def bed() -> Iterator[Testbed]:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    with Testbed(("spark1", "spark2")) as testbed:
        yield testbed


@pytest.fixture(scope="module")
def cluster(bed: Testbed) -> Iterator[Testbed]:
    head_ip = bed.ip("spark1")
    started = time.monotonic()
    head = _exec(
        bed,
        "spark1",
        RAY,
        "start",
        "--head",
        "--node-ip-address",
        head_ip,
        "--port",
        RAY_PORT,
        "--include-dashboard=false",
        *RAY_NODE_ARGS,
    )
    assert head.returncode == 0, head.stderr
    _start_worker(bed)
    print(f"ray head + worker up in {time.monotonic() - started:.1f}s")
    try:
        yield bed
    finally:
        for host in ("spark2", "spark1"):
            _exec(bed, host, RAY, "stop", "--force")


def _start_worker(bed: Testbed) -> None:
    worker = _exec(
        bed,
        "spark2",
        RAY,
        "start",
        "--address",
        f"{bed.ip('spark1')}:{RAY_PORT}",
        "--node-ip-address",
        bed.ip("spark2"),
        *RAY_NODE_ARGS,
    )
    assert worker.returncode == 0, worker.stderr
    gpus = _exec(bed, "spark1", sys.executable, "-c", _WAIT_GPUS, "2")
    assert gpus.stdout.strip().splitlines()[-1] == "2.0", gpus.stdout + gpus.stderr


@dataclass
class Standin:
    bed: Testbed
    log: Path
    port: int

    @property
    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.text)
            if m:
                return m
            if self.returncode() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"{pattern!r} not seen; rc={self.returncode()}; log tail:\n{self.text[-3000:]}")

    def returncode(self) -> int | None:
        rc = self.log.with_name(self.log.name + ".rc")
        return int(rc.read_text()) if rc.exists() and rc.read_text().strip() else None

    def wait_exit(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rc = self.returncode()
            if rc is not None:
                return rc
            time.sleep(0.05)
        raise AssertionError(f"still running after {timeout}s; log tail:\n{self.text[-2000:]}")

    def signal(self, name: str) -> None:
        pid = self.log.with_name(self.log.name + ".pid").read_text().strip()
        self.bed.exec("spark1", ["kill", f"-{name}", pid])

    def get(self, path: str, method: str = "GET", body: object = None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(self.bed.ip("spark1"), self.port, timeout=10)
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"content-type": "application/json"} if data else {})
        resp = conn.getresponse()
        out = resp.status, resp.read()
        conn.close()
        return out


def start_standin(bed: Testbed, *extra: str, env: tuple[str, ...] = ()) -> Standin:
    name = f"standin-{secrets.token_hex(3)}.log"
    port = 18000 + secrets.randbelow(1000)
    argv = [
        "env",
        "RAY_USAGE_STATS_ENABLED=0",
        f"SPARKTUI_STANDIN_PACE={PACE}",
        *env,
        sys.executable,
        "-m",
        "sparktui.sim.vllm_standin",
        "serve",
        MODEL,
        "--tensor-parallel-size",
        "2",
        "--distributed-executor-backend",
        "ray",
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
        "--served-model-name",
        "standin",
        "--max-model-len",
        "32768",
        "--gpu-memory-utilization",
        "0.85",
        "--trust-remote-code",
        *extra,
    ]
    proc = bed.exec("spark1", ["sh", "-c", _DETACH, "sh", f"/tmp/{name}", *argv])
    assert proc.returncode == 0, proc.stderr
    return Standin(bed, bed.host_tmp("spark1") / name, port)


def _placement_groups(bed: Testbed) -> list[dict[str, object]]:
    proc = _exec(bed, "spark1", sys.executable, "-c", _PG_TABLE)
    assert proc.returncode == 0, proc.stderr
    # Ray may print its own warnings on stdout after the table (e.g. "raylet has lagging heartbeats").
    report = last_json_object(proc.stdout)
    assert report is not None, proc.stdout
    groups: list[dict[str, object]] = report["groups"]
    return groups


def test_reaches_ready_through_ray_and_serves(cluster: Testbed) -> None:
    bed = cluster
    started = time.monotonic()
    run = start_standin(bed, "--standin-metrics-dialect", "new")
    run.wait_for(r"INFO:     Application startup complete\.")
    print(f"stand-in ready after {time.monotonic() - started:.1f}s (pace {PACE}s)")
    log = run.text
    # Worker lines travelled through Ray's log forwarding with Ray's own prefix, from spark2's actor.
    assert re.search(
        rf"\x1b\[36m\(RayWorkerWrapper pid=\d+, ip={re.escape(bed.ip('spark2'))}\)\x1b\[0m ", log
    )
    assert "Connecting to existing Ray cluster at address:" in log  # printed by the real ray.init()
    assert f"model='{MODEL}'" in log and "tensor_parallel_size=2" in log and "Llama-3.3" not in log
    # One GPU bundle per node, STRICT_SPREAD, placed on two different nodes.
    groups = [g for g in _placement_groups(bed) if g["state"] == "CREATED"]
    assert len(groups) == 1
    pg = groups[0]
    assert pg["strategy"] == "STRICT_SPREAD"
    bundles = pg["bundles"]
    assert isinstance(bundles, dict) and len(bundles) == 2
    assert all(b["GPU"] == 1.0 for b in bundles.values())
    nodes = pg["bundles_to_node_id"]
    assert isinstance(nodes, dict) and len(set(nodes.values())) == 2

    assert run.get("/health") == (200, b"")
    status, body = run.get("/v1/models")
    card = json.loads(body)["data"][0]
    assert status == 200 and (card["id"], card["max_model_len"], card["root"]) == ("standin", 32768, MODEL)
    status, body = run.get(
        "/v1/chat/completions",
        "POST",
        {"model": "standin", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1},
    )
    assert status == 200 and json.loads(body)["usage"]["completion_tokens"] == 1
    status, body = run.get("/metrics")
    names = {f.name for f in text_string_to_metric_families(body.decode())}
    assert {"vllm:kv_cache_usage_perc", "vllm:inter_token_latency_seconds"} <= names
    assert "vllm:gpu_cache_usage_perc" not in names
    run.wait_for(r'"POST /v1/chat/completions HTTP/1.1" 200 OK')

    asked = time.monotonic()
    run.signal("TERM")
    rc = run.wait_exit(10)
    assert time.monotonic() - asked < 3.5
    assert rc == 0
    assert "INFO:     Application shutdown complete." in run.text
    assert "Shutting down Ray distributed executor." in run.text
    assert not [g for g in _placement_groups(bed) if g["state"] == "CREATED"]


def test_old_metric_names_then_crash_after_ready(cluster: Testbed) -> None:
    run = start_standin(
        cluster, env=("SPARKTUI_STANDIN_METRICS=old", "SPARKTUI_STANDIN_FAIL=crash_after_ready:3")
    )
    run.wait_for(r"Application startup complete\.")
    status, body = run.get("/metrics")
    names = {f.name for f in text_string_to_metric_families(body.decode())}
    assert status == 200 and {"vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds"} <= names
    assert "vllm:kv_cache_usage_perc" not in names
    assert run.get("/health")[0] == 200
    assert run.wait_exit(20) != 0
    with pytest.raises(OSError):
        run.get("/health")
    assert "ActorDiedError" in run.text


def test_sigusr1_wedges_a_serving_engine_at_once(cluster: Testbed) -> None:
    """A fault from outside at any moment (the soak's): /health still 200, tokens stop, requests hang."""
    run = start_standin(cluster, env=("SPARKTUI_STANDIN_STATS_INTERVAL=30",))
    run.wait_for(r"Application startup complete\.")
    run.signal("USR1")

    def stuck() -> bool:
        _, body = run.get("/metrics")
        return 'vllm:num_requests_running{' in body.decode() and any(
            line.startswith("vllm:num_requests_running{") and not line.rstrip().endswith(" 0.0")
            for line in body.decode().splitlines())

    # Well under the stats interval: the signal does not wait for it.
    wait_until_sync(stuck, "wedged after SIGUSR1", timeout=5, interval=0.1)
    assert run.get("/health")[0] == 200
    with pytest.raises(OSError):   # a new request hangs: the client gives up
        conn = http.client.HTTPConnection(cluster.ip("spark1"), run.port, timeout=2)
        conn.request("POST", "/v1/chat/completions", body=json.dumps(
            {"model": "standin", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}),
            headers={"content-type": "application/json"})
        conn.getresponse()
    run.signal("TERM")
    assert run.wait_exit(10) == 0


def test_oom_at_kv_cache_sizing(cluster: Testbed) -> None:
    run = start_standin(cluster, "--standin-fail", "oom")
    assert run.wait_exit(60) != 0
    log = run.text
    assert (
        "The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in "
        "KV cache" in log
    )
    assert "RuntimeError: Engine process failed to start. See stack trace for the root cause." in log
    assert "Model loading took" in log and "Application startup complete" not in log


def test_nccl_error_during_distributed_init(cluster: Testbed) -> None:
    run = start_standin(cluster, "--standin-fail", "nccl")
    assert run.wait_exit(60) != 0
    log = run.text
    ip2 = re.escape(cluster.ip("spark2"))
    assert re.search(
        rf"\(RayWorkerWrapper pid=\d+, ip={ip2}\)\x1b\[0m ERROR .*Error executing method 'init_device'", log
    )
    assert "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)" in log
    assert "Starting to load model" not in log


def test_v1_recording_nests_rays_prefix_inside_the_engine_core_prefix(cluster: Testbed) -> None:
    # vLLM ≤0.30 patches the engine core's stdout, so Ray-forwarded lines get its prefix in front.
    run = start_standin(
        cluster,
        "--standin-recording",
        "dgx-spark-gb10-qwen3.6-35b-a3b-ready_v0.19.2",
        "--standin-fail",
        "nccl",
    )
    assert run.wait_exit(60) != 0
    log = run.text
    ip2 = re.escape(cluster.ip("spark2"))
    assert re.search(
        r"^\(EngineCore pid=\d+\) \d{4}-\d\d-\d\d [\d:,]+\tINFO worker\.py:\d+ -- Connecting to "
        r"existing Ray cluster",
        log,
        re.M,
    )
    assert re.search(
        rf"^\(EngineCore pid=\d+\) \x1b\[36m\(RayWorkerWrapper pid=\d+, ip={ip2}\)\x1b\[0m ERROR "
        r".*Error executing method 'init_device'",
        log,
        re.M,
    )
    assert re.search(r"^\(EngineCore pid=\d+\) ERROR .* EngineCore failed to start\.$", log, re.M)
    assert re.search(r"^\(APIServer pid=\d+\) RuntimeError: Engine core initialization failed\.", log, re.M)
    assert "(APIServer pid=1)" not in log and "Qwen/Qwen3.6-35B-A3B" not in log


def test_worker_ray_stopped_during_start_fails_with_rays_error_naming_the_node(cluster: Testbed) -> None:
    bed = cluster
    run = start_standin(bed, env=("SPARKTUI_STANDIN_PACE=12",))
    try:
        run.wait_for(rf"\(RayWorkerWrapper pid=\d+, ip={re.escape(bed.ip('spark2'))}\)")
        assert _exec(bed, "spark2", RAY, "stop", "--force").returncode == 0
        assert run.wait_exit(60) == 1
        log = run.text
        # Ray's own exception text, in vLLM's failure block. Which error Ray raises depends on how far it
        # got in noticing the node gone: ActorDiedError lists the actor's "ip: A"; ActorUnavailableError
        # quotes gRPC's "ipv4:A:port" it failed to reach — or, when the worker's socket was reset under a
        # call already sent, only "recvmsg:Connection reset by peer", with no address at all.
        assert re.search(r"ERROR .*ray\.exceptions\.\w*Actor\w*Error: ", log)
        assert "RuntimeError: Engine process failed to start." in log
        block = log[log.index("ray.exceptions.") : log.index("RuntimeError: Engine process failed to start.")]
        names_the_node = re.search(rf"(?:\bip: |\bipv4:){re.escape(bed.ip('spark2'))}\b", block)
        reset_under_a_call = re.search(r"ActorUnavailableError: .*RpcError: .*Connection reset by peer",
                                       block)
        assert names_the_node or reset_under_a_call, block
        assert "Application startup complete" not in log
    finally:
        _start_worker(bed)


def test_worker_node_down_leaves_the_placement_group_waiting(cluster: Testbed) -> None:
    bed = cluster
    assert _exec(bed, "spark2", RAY, "stop", "--force").returncode == 0
    try:
        # vLLM's 10, 30, 70 … s cadence, 20x faster; vLLM's 1800 s limit shortened to 100 s (5 s here).
        run = start_standin(bed, "--standin-pg-wait-scale", "0.05", "--standin-pg-timeout", "100")
        run.wait_for(
            r"Waiting for creating a placement group of specs for 10 seconds\. specs=\[\{'GPU': 1\.0, "
            r"'node:[\d.]+': 0\.001\}, \{'GPU': 1\.0\}\]"
        )
        run.wait_for(r"for 30 seconds")
        assert run.wait_exit(30) == 1
        log = run.text
        assert re.search(
            r"ValueError: Cannot provide a placement group of placement_group_specs=.* within 100 "
            r"seconds\.",
            log,
        )
        assert "RayWorkerWrapper" not in log and "Application startup complete" not in log
        # Stopped while waiting: vLLM's shutdown, promptly, group removed.
        run = start_standin(bed, "--standin-pg-wait-scale", "0.05")
        run.wait_for(r"for 10 seconds")
        asked = time.monotonic()
        run.signal("INT")
        assert run.wait_exit(10) != 0
        assert time.monotonic() - asked < 3.5
        assert not [g for g in _placement_groups(bed) if g["state"] != "REMOVED"]
    finally:
        _start_worker(bed)


def test_sequence_numbers_cover_every_line_once(cluster: Testbed) -> None:
    run = start_standin(
        cluster,
        env=(
            "SPARKTUI_STANDIN_SEQ=1",
            "SPARKTUI_STANDIN_SERVING_LOGS=1",
            "SPARKTUI_STANDIN_STATS_INTERVAL=0.5",
        ),
    )
    run.wait_for(r"Application startup complete\. \[seq=\d+\]")
    run.wait_for(r"Avg prompt throughput: 0\.0 tokens/s.* \[seq=\d+\]")  # periodic stats while idle
    run.signal("INT")
    assert run.wait_exit(10) == 0
    log = run.text
    seqs = [int(s) for s in re.findall(r" \[seq=(\d+)\]", log)]
    assert sorted(seqs) == list(range(1, max(seqs) + 1))  # none lost, none doubled (Ray dedup is off)
    head = [
        int(s)
        for line in log.splitlines()
        if not line.startswith("\x1b[36m(")
        for s in re.findall(r" \[seq=(\d+)\]$", line)
    ]
    assert head == sorted(head)  # the head's own lines are in order; Ray-forwarded ones may arrive late
    heartbeats = re.findall(r"weight loading in progress \(stand-in heartbeat\) \[seq=\d+\]", log)
    assert len(heartbeats) >= 3
    assert "rank 7 in world size" not in log  # the recording's extra ranks are not replayed
