"""The stand-in engine's parts that need no cluster: recordings, replay plan, CLI, metrics, HTTP.

The whole stand-in on a real two-node Ray cluster is tested in ``test_standin_ray.py``.
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparktui.domain.serving import sample_from_text
from sparktui.sim import standin_script as script
from sparktui.sim.recording import (
    DEFAULT_RECORDING,
    DGX_SPARK_RECORDING,
    list_recordings,
    load_recording,
    ready_index,
    recording_text,
)
from sparktui.sim.standin_http import ANSWER, ServedModel, StandinHTTPServer
from sparktui.sim.standin_metrics import ServingMetrics
from sparktui.sim.vllm_standin import parse_args

# -- recordings -------------------------------------------------------------------------------------


def test_recordings_are_listed_with_their_versions() -> None:
    infos = {i.name: i for i in list_recordings()}
    assert infos[DEFAULT_RECORDING].vllm_version == "0.8.3"
    assert infos[DGX_SPARK_RECORDING].vllm_version == "0.19.2"
    assert all(i.line_count > 100 and i.duration_seconds > 0 for i in infos.values())


def test_default_recording_starts_at_the_vllm_process_and_reaches_ready() -> None:
    lines = load_recording()
    assert "Automatically detected platform cuda." in lines[0].text  # the launcher's `ray start` is skipped
    ready = ready_index(lines)
    assert ready is not None and lines[ready].text == "INFO:     Application startup complete."
    offsets = [line.offset_seconds for line in lines]
    assert offsets == sorted(offsets)


def test_worker_lines_lose_rays_prefix_and_dedup_suffix_but_keep_their_source() -> None:
    lines = load_recording()
    workers = [line for line in lines if line.role == "worker"]
    assert workers and all("\x1b[36m(" not in w.text[:40] for w in workers)
    assert not any("repeated" in w.text and "across cluster" in w.text for w in workers)
    remote = next(w for w in workers if w.remote)
    assert remote.source is not None and "ip=10.244.1.18" in remote.source
    assert remote.raw.startswith("\x1b[36m(")
    # The raw text is the recorded file's, byte for byte.
    assert remote.raw in recording_text(DEFAULT_RECORDING)


def test_bars_glued_behind_a_ray_prefix_belong_to_that_worker() -> None:
    lines = load_recording()
    bars = [line for line in lines if line.text.startswith("Capturing CUDA graph shapes:")]
    assert any(b.role == "worker" and b.source == "RayWorkerWrapper pid=327, ip=10.244.1.18" for b in bars)
    assert any(b.role == "head" for b in bars)


def test_dgx_spark_recording_has_vllm_process_prefixes_on_head_lines() -> None:
    lines = load_recording(DGX_SPARK_RECORDING)
    assert lines[1].text.startswith("(APIServer pid=1) INFO")
    assert all(line.role == "head" for line in lines)
    assert ready_index(lines) is None  # this capture has no uvicorn lines; the stand-in adds them


# -- replay plan ------------------------------------------------------------------------------------


def test_anchors_of_the_default_recording() -> None:
    lines = load_recording()
    a = script.find_anchors(lines)
    assert "No current placement group found" in lines[a.pg_create].text
    assert a.dist is not None and a.weights_start is not None and a.kv is not None
    assert a.pg_create < a.dist < a.weights_start < a.kv < (a.ready or 0)
    assert "Starting to load model" in lines[a.weights_start].text
    assert a.end == (a.ready or 0) + 1


def test_compressed_offsets_keep_order_and_hit_the_pace() -> None:
    lines = load_recording()
    end = script.find_anchors(lines).end
    offsets = script.compressed_offsets(lines, 0, end, 8.0)
    assert len(offsets) == end
    assert offsets == sorted(offsets)
    assert offsets[-1] == pytest.approx(8.0)


def test_rewriter_states_the_configured_model_sizes_address_and_now() -> None:
    lines = load_recording()
    dialect = script.detect_dialect(lines)
    assert (dialect.version, dialect.v1, dialect.recorded_model) == (
        "0.8.3",
        False,
        "meta-llama/Llama-3.3-70B-Instruct",
    )
    rewrite = script.Rewriter(dialect, "org/Test-Model", "test", 2, 1, None, 18000, 4242, 32768)
    init = next(line.text for line in lines if "Initializing a V0 LLM engine" in line.text)
    out = rewrite(init)
    assert "model='org/Test-Model'" in out and "Llama-3.3" not in out
    assert "tensor_parallel_size=2" in out and "pipeline_parallel_size=1" in out
    assert "max_seq_len=32768" in out
    assert out.startswith(f"INFO {time.strftime('%m-%d')} ")
    assert "in world size 2 " in rewrite(
        "INFO 04-14 16:08:40 [parallel_state.py:957] rank 1 in world size 8 is x"
    )
    start = next(line.text for line in lines if "Starting vLLM API server" in line.text)
    assert rewrite(start).endswith("on http://0.0.0.0:18000")
    assert rewrite("INFO:     Started server process [5941]") == "INFO:     Started server process [4242]"


def test_failure_wording_is_vllms() -> None:
    old = script.detect_dialect(load_recording())
    new = script.detect_dialect(load_recording(DGX_SPARK_RECORDING))
    assert "larger than the maximum number of tokens that can be stored in KV cache" in script.oom_message(
        old, 9
    )
    assert "To serve at least one request with the models's max seq len (131072)" in script.oom_message(
        new, 131072
    )
    v1 = script.engine_failure(new, "ValueError", "boom")
    assert "EngineCore failed to start." in v1[0] and v1[0].startswith("(EngineCore pid=")
    assert v1[-1].endswith(
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
    )
    v0 = script.engine_failure(old, "RuntimeError", script.NCCL_MESSAGE)
    assert v0[-1] == "RuntimeError: Engine process failed to start. See stack trace for the root cause."
    wait = script.pg_wait_line(old, 30, "[{'GPU': 1.0}]")
    assert "Waiting for creating a placement group of specs for 30 seconds. specs=[{'GPU': 1.0}]." in wait


def test_placement_specs_pin_the_first_bundle_to_the_driver_node() -> None:
    old = script.detect_dialect(load_recording())
    assert script.placement_specs(old, 2, "10.0.0.1") == [{"GPU": 1.0, "node:10.0.0.1": 0.001}, {"GPU": 1.0}]


# -- command line -----------------------------------------------------------------------------------


def test_vllm_serve_command_shape_and_ignored_flags() -> None:
    args = parse_args(
        [
            "serve",
            "/models/m",
            "--tensor-parallel-size",
            "2",
            "--distributed-executor-backend",
            "ray",
            "--host",
            "0.0.0.0",
            "--port",
            "8001",
            "--served-model-name",
            "m2",
            "--max-model-len",
            "32k",
            "--gpu-memory-utilization",
            "0.85",
            "--trust-remote-code",
            "--enforce-eager",
            "--kv-cache-dtype",
            "fp8",
        ]
    )
    assert (args.model, args.tensor_parallel_size, args.port, args.served_model_name) == (
        "/models/m",
        2,
        8001,
        ["m2"],
    )
    assert args.max_model_len == 32000


def test_bad_arguments_fail_the_way_vllm_does() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "sparktui.sim.vllm_standin", "serve", "m", "--tensor-parallel-size", "two"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: vllm serve [model_tag] [options]")
    assert "vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: 'two'" in proc.stderr


# -- metrics ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dialect", "present", "absent"),
    [
        (
            "new",
            ["vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries", "vllm:inter_token_latency_seconds"],
            ["vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds"],
        ),
        (
            "old",
            [
                "vllm:gpu_cache_usage_perc",
                "vllm:gpu_prefix_cache_queries",
                "vllm:time_per_output_token_seconds",
            ],
            ["vllm:kv_cache_usage_perc", "vllm:inter_token_latency_seconds"],
        ),
    ],
)
def test_metric_dialects(dialect: str, present: list[str], absent: list[str]) -> None:
    metrics = ServingMetrics(dialect, "m", 32768)  # type: ignore[arg-type]
    names = {f.name for f in text_string_to_metric_families(metrics.exposition().decode())}
    assert set(present) <= names
    assert not set(absent) & names
    assert {
        "vllm:time_to_first_token_seconds",
        "vllm:num_requests_running",
        "vllm:cache_config_info",
    } <= names


# -- HTTP -------------------------------------------------------------------------------------------


@pytest.fixture(params=["new", "old"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[StandinHTTPServer, list[str]]]:
    access: list[str] = []
    model = ServedModel(
        ["standin"],
        "/models/standin-model",
        32768,
        "0.8.3",
        ServingMetrics(request.param, "standin", 32768),
        access.append,
    )
    srv = StandinHTTPServer("127.0.0.1", 0, model)
    srv.bind_early()
    srv.start_serving()
    try:
        yield srv, access
    finally:
        srv.stop()


def _call(
    srv: StandinHTTPServer, method: str, path: str, body: object = None
) -> tuple[int, dict[str, str], bytes]:
    host, port = srv.server_address[:2]
    conn = http.client.HTTPConnection(str(host), int(port), timeout=10)
    payload = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=payload, headers={"content-type": "application/json"} if payload else {})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data


def test_health_models_and_version(server: tuple[StandinHTTPServer, list[str]]) -> None:
    srv, access = server
    assert _call(srv, "GET", "/health")[::2] == (200, b"")
    status, _, body = _call(srv, "GET", "/v1/models")
    card = json.loads(body)["data"][0]
    assert status == 200 and card["id"] == "standin" and card["max_model_len"] == 32768
    assert card["root"] == "/models/standin-model" and card["owned_by"] == "vllm"
    assert json.loads(_call(srv, "GET", "/version")[2]) == {"version": "0.8.3"}
    assert _call(srv, "GET", "/nope")[0] == 404
    assert access[0].startswith("INFO:     127.0.0.1:") and access[0].endswith(
        '"GET /health HTTP/1.1" 200 OK'
    )


def test_chat_completion_honours_max_tokens_and_counts(server: tuple[StandinHTTPServer, list[str]]) -> None:
    srv, _ = server
    status, _, body = _call(
        srv,
        "POST",
        "/v1/chat/completions",
        {"model": "standin", "messages": [{"role": "user", "content": "hi there"}], "max_tokens": 3},
    )
    reply = json.loads(body)
    assert status == 200 and reply["object"] == "chat.completion"
    assert reply["choices"][0]["message"]["content"] == " ".join(ANSWER[:3])
    assert reply["choices"][0]["finish_reason"] == "length"
    assert reply["usage"]["completion_tokens"] == 3
    assert reply["usage"]["total_tokens"] == reply["usage"]["prompt_tokens"] + 3
    status, _, body = _call(
        srv,
        "POST",
        "/v1/chat/completions",
        {"model": "other", "messages": [{"role": "user", "content": "x"}]},
    )
    assert status == 404 and json.loads(body)["message"] == "The model `other` does not exist."


def test_streamed_chat_completion(server: tuple[StandinHTTPServer, list[str]]) -> None:
    srv, _ = server
    status, headers, body = _call(
        srv,
        "POST",
        "/v1/chat/completions",
        {
            "model": "standin",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 4,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = [e.removeprefix("data: ") for e in body.decode().split("\n\n") if e]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == " ".join(ANSWER[:4])
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["usage"]["completion_tokens"] == 4


def test_metrics_advance_with_requests(server: tuple[StandinHTTPServer, list[str]]) -> None:
    srv, _ = server
    before = sample_from_text(_call(srv, "GET", "/metrics")[2].decode(), "standin")
    for _ in range(2):
        _call(
            srv,
            "POST",
            "/v1/chat/completions",
            {"model": "standin", "messages": [{"role": "user", "content": "same prompt"}], "max_tokens": 5},
        )
    status, headers, body = _call(srv, "GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    after = sample_from_text(body.decode(), "standin")
    assert before.counters.get("generation_tokens", 0.0) == 0.0
    assert after.counters["generation_tokens"] == 10.0
    assert after.counters["prompt_tokens"] > 0
    assert after.counters["prefix_cache_hits"] > 0  # the second identical prompt hit the prefix cache
    assert after.histograms["ttft"].count == 2.0
    assert after.histograms["itl"].count == 8.0
    assert after.kv_cache_usage == 0.0 and after.requests_running == 0.0


def test_version_and_help_like_vllm() -> None:
    run = [sys.executable, "-m", "sparktui.sim.vllm_standin"]
    version = subprocess.run([*run, "--version"], capture_output=True, text=True, timeout=30)
    assert (version.returncode, version.stdout.strip()) == (0, "0.8.3")
    helptext = subprocess.run([*run, "serve", "--help"], capture_output=True, text=True, timeout=30).stdout
    for flag in (
        "--tensor-parallel-size",
        "--max-model-len",
        "--gpu-memory-utilization",
        "--trust-remote-code",
        "--enforce-eager",
        "--nnodes",
        "--headless",
        "--kv-cache-dtype",
    ):
        assert flag in helptext
    # vLLM before 0.10 had no --help=all; argparse refuses it the same way.
    old = subprocess.run([*run, "serve", "--help=all"], capture_output=True, text=True, timeout=30)
    assert old.returncode == 2 and "ignored explicit argument 'all'" in old.stderr


# -- vLLM's own multi-node mode (no Ray), on loopback -----------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_text(path: Path, needle: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text(errors="replace") if path.exists() else ""
        if needle in text:
            return text
        time.sleep(0.1)
    raise AssertionError(f"{needle!r} not in {path}:\n{path.read_text(errors='replace')[-2000:]}")


def test_multinode_mp_mode_headless_rank_prints_its_worker_lines(tmp_path: Path) -> None:
    master, api = _free_port(), _free_port()
    common = [
        "serve",
        "/models/m",
        "--tensor-parallel-size",
        "2",
        "--nnodes",
        "2",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(master),
        "--standin-pace",
        "3",
    ]
    run = [sys.executable, "-m", "sparktui.sim.vllm_standin", *common]
    head_log, worker_log = tmp_path / "head.log", tmp_path / "worker.log"
    with head_log.open("w") as out:
        head = subprocess.Popen(
            [*run, "--node-rank", "0", "--host", "127.0.0.1", "--port", str(api)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    with worker_log.open("w") as out:
        worker = subprocess.Popen(
            [*run, "--node-rank", "1", "--headless"], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        _wait_text(head_log, "INFO:     Application startup complete.")
        conn = http.client.HTTPConnection("127.0.0.1", api, timeout=5)
        conn.request("GET", "/health")
        assert conn.getresponse().status == 200
        conn.close()
        text = worker_log.read_text()
        assert f"(VllmWorkerProcess pid={worker.pid})\x1b[0;0m INFO " in text  # vLLM's own mp worker prefix
        # No Ray here: no line starts with Ray's prefix (the recording has a few glued mid-line).
        assert not re.search(r"^\x1b\[36m\(RayWorkerWrapper", text + head_log.read_text(), re.M)
        worker.terminate()  # a worker node lost while serving: the head notices and goes down
        assert worker.wait(5) == 0
        assert head.wait(10) == 1
        assert "Worker proc VllmWorker-1 died unexpectedly, shutting down executor." in head_log.read_text()
    finally:
        for proc in (head, worker):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_wedged_engine_answers_health_holds_requests_and_stops_tokens(
    server: tuple[StandinHTTPServer, list[str]],
) -> None:
    srv, _ = server
    body = {"model": "standin", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    _call(srv, "POST", "/v1/chat/completions", body)
    srv.model.metrics.wedge()
    assert _call(srv, "GET", "/health")[0] == 200
    host, port = srv.server_address[:2]
    conn = http.client.HTTPConnection(str(host), int(port), timeout=1.0)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(),
                 headers={"content-type": "application/json"})
    with pytest.raises(TimeoutError):
        conn.getresponse()          # held: a wedged engine never answers
    conn.close()
    after = sample_from_text(_call(srv, "GET", "/metrics")[2].decode(), "standin")
    assert after.requests_running == 2.0          # the stuck one and the held one
    assert after.counters["generation_tokens"] == 2.0
