# ruff: noqa: E501  (verbatim vLLM log lines as test data)
"""Stage machine: live feeding, stalls, multi-node completion, times, failure kinds from format strings."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.domain.logs import (
    FAILURE_KINDS,
    STAGES,
    LogReader,
    Timeline,
    parse_line,
    parse_log_text,
    timeline_from_bytes,
)

DATA = Path(__file__).parent / "data" / "vllm-logs"


def _log(prefix: str) -> bytes:
    return next(DATA.glob(prefix + "*")).read_bytes()


def test_live_feed_chunk_by_chunk_pending_running_done_and_stall() -> None:
    data = _log("12_")
    reader = LogReader()
    timeline = Timeline(expected_nodes=1)
    now = 1_000_000.0
    seen: dict[str, list[str]] = {name: [] for name in STAGES}
    for i in range(0, len(data), 97):  # odd chunk size: records and UTF-8 characters split across chunks
        now += 0.5
        for rec in reader.feed(data[i : i + 97]):
            timeline.feed(rec, now=now)
        snap = timeline.snapshot()
        for st in snap.stages:
            if not seen[st.name] or seen[st.name][-1] != st.status:
                seen[st.name].append(st.status)
        if snap.outcome == "incomplete" and any(st.status != "pending" for st in snap.stages):
            stall = timeline.stall_seconds(now + 5)
            assert stall is not None and stall >= 5
    for rec in reader.flush():
        timeline.feed(rec, now=now)
    snap = timeline.snapshot()
    assert snap.outcome == "ready"
    for name in ("config", "distributed", "weights", "kv_cache", "cuda_graphs", "api"):
        assert seen[name][:3] == ["pending", "running", "done"], (name, seen[name])
    assert seen["placement"] == ["pending", "skipped"]
    assert seen["compile"] == ["pending", "running", "skipped"]  # a compile-cache hit
    assert timeline.stall_seconds(now + 100) is None  # ready: nothing to wait for
    weights = snap.stage("weights")
    assert weights.progress is not None and (weights.progress.done, weights.progress.total) == (41, 41)


def test_stall_seconds_counts_from_the_last_progress_of_the_running_stage() -> None:
    t = Timeline()
    t.feed(parse_line("(Worker_TP0 pid=1) INFO 10-23 15:10:41 [gpu_model_runner.py:2338] Starting to load model m..."),
           now=100.0)
    t.feed(parse_line("Loading safetensors checkpoint shards:   2% Completed | 1/41 [00:05<03:52,  5.81s/it]"), now=160.0)
    assert t.snapshot().current == "weights"
    assert t.stall_seconds(160.0 + 720) == pytest.approx(720.0)
    # a heartbeat is not progress
    t.feed(parse_line("(EngineCore pid=2) INFO 10-23 15:30:00 [shm_broadcast.py:681] No available shared memory "
                      "broadcast block found in 60 seconds."), now=900.0)
    assert t.stall_seconds(900.0) == pytest.approx(740.0)
    t.feed(parse_line("Loading safetensors checkpoint shards:   5% Completed | 2/41 [00:10<03:18,  5.10s/it]"), now=950.0)
    assert t.stall_seconds(960.0) == pytest.approx(10.0)
    assert t.snapshot().stall_seconds(960.0) == pytest.approx(10.0)  # the snapshot carries it too
    assert t.snapshot(now=1000.0).stage("weights").seconds == pytest.approx(900.0)  # live elapsed
    assert t.snapshot().stage("weights").progress.done == 2  # type: ignore[union-attr]


def test_lines_without_times_take_durations_from_now() -> None:
    t = Timeline()
    t.feed(parse_line("Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]"), now=10.0)
    t.feed(parse_line("Capturing CUDA graphs (decode, FULL):   0%|          | 0/5 [00:00<?, ?it/s]"), now=70.0)
    snap = t.snapshot()
    assert snap.stage("weights").status == "done"
    assert snap.stage("weights").seconds == pytest.approx(60.0)
    assert snap.stage("weights").started is not None  # rendered from the wall clock


def test_year_rollover_keeps_durations_positive() -> None:
    t = Timeline()
    t.feed(parse_line("(W pid=1) INFO 12-31 23:59:00 [gpu_model_runner.py:1] Starting to load model m..."))
    t.feed(parse_line("(W pid=1) INFO 01-01 00:01:00 [gpu_model_runner.py:2] Model loading took 1.0 GiB memory and "
                      "120.0 seconds"))
    assert t.snapshot().stage("weights").seconds == pytest.approx(120.0)


MULTI_NODE = """\
(EngineCore_DP0 pid=9) INFO 11-13 06:17:40 [core.py:101] Initializing a V1 LLM engine (v0.17.1) with config: model='m', tensor_parallel_size=2, pipeline_parallel_size=1
(EngineCore_DP0 pid=9) INFO 11-13 06:17:41 [ray_utils.py:417] No current placement group found. Creating a new placement group.
(EngineCore_DP0 pid=9) (RayWorkerWrapper pid=274, ip=10.0.0.2) INFO 11-13 06:17:46 [parallel_state.py:1] rank 1 in world size 2 is assigned as DP rank 0, PP rank 0, TP rank 1
(EngineCore_DP0 pid=9) (RayWorkerWrapper pid=273) INFO 11-13 06:17:46 [parallel_state.py:1] rank 0 in world size 2 is assigned as DP rank 0, PP rank 0, TP rank 0
(EngineCore_DP0 pid=9) (RayWorkerWrapper pid=273) INFO 11-13 06:17:47 [gpu_model_runner.py:1] Starting to load model m...
(EngineCore_DP0 pid=9) (RayWorkerWrapper pid=273) INFO 11-13 06:18:47 [gpu_model_runner.py:2] Model loading took 60.1 GiB memory and 45.3 seconds
"""
LATE_NODE_2 = (
    "(EngineCore_DP0 pid=9) (RayWorkerWrapper pid=274, ip=10.0.0.2) INFO 11-13 06:18:50 [gpu_model_runner.py:2] "
    "Model loading took 60.1 GiB memory and 47.9 seconds\n"
)


def test_per_node_stage_waits_for_every_node() -> None:
    t = Timeline(expected_nodes=2)
    t.feed_text(MULTI_NODE, now=1.0)
    snap = t.snapshot()
    weights = snap.stage("weights")
    assert weights.status == "running"
    assert weights.progress is not None and (weights.progress.done, weights.progress.total) == (1, 2)
    assert snap.stage("distributed").progress.done == 2  # type: ignore[union-attr]
    t.feed_text(LATE_NODE_2, now=2.0)
    snap = t.snapshot()
    assert snap.stage("weights").status == "done" and snap.stage("weights").ended == "11-13 06:18:50"
    assert snap.facts["weights_seconds"] == pytest.approx(47.9)  # the slower node
    assert snap.nodes == ("head", "10.0.0.2")


def test_ray_dedup_repeat_counts_as_other_nodes() -> None:
    t = Timeline(expected_nodes=2)
    t.feed_text(MULTI_NODE.replace("45.3 seconds", "45.3 seconds [repeated 1x across cluster]"))
    assert t.snapshot().stage("weights").status == "done"


def test_late_line_from_a_finished_stage_does_not_reopen_it() -> None:
    t = Timeline(expected_nodes=1)
    t.feed_text(MULTI_NODE)
    t.feed(parse_line("(W pid=1) INFO 11-13 06:19:00 [backends.py:1] Dynamo bytecode transform time: 6.07 s"))
    t.feed(parse_line(LATE_NODE_2.strip()))
    snap = t.snapshot()
    assert snap.stage("weights").status == "done" and snap.stage("compile").status == "running"
    assert snap.current == "compile"


def test_enforce_eager_skips_compile_and_cuda_graphs() -> None:
    snap = parse_log_text(
        "(EngineCore pid=1) INFO 01-01 00:00:00 [core.py:1] Initializing a V1 LLM engine (v0.20.0) with config: "
        "model='m', enforce_eager=True, tensor_parallel_size=1\n"
        "(EngineCore pid=1) INFO 01-01 00:01:00 [gpu_model_runner.py:1] Model loading took 1 GiB memory and 50 s\n"
        "(EngineCore pid=1) INFO 01-01 00:01:05 [gpu_worker.py:1] Available KV cache memory: 10.5 GiB\n"
        "(EngineCore pid=1) INFO 01-01 00:01:05 [kv_cache_utils.py:1] GPU KV cache size: 1,587,648 tokens, "
        "Maximum concurrency for 2,048 tokens per request: 775.22x\n"
        "(EngineCore pid=1) INFO 01-01 00:01:09 [core.py:2] init engine (profile, create kv cache, warmup model) "
        "took 9.10 s (compilation: 0.00 s)\n"
    )
    status = {s.name: s.status for s in snap.stages}
    assert status["compile"] == status["cuda_graphs"] == "skipped"
    assert status["kv_cache"] == status["engine"] == "done"
    assert snap.facts["kv_cache_tokens"] == 1587648 and snap.facts["max_concurrency"] == 775.22
    assert snap.facts["engine_seconds"] == 9.10 and snap.facts["enforce_eager"] is True


def test_restart_in_the_same_log_starts_a_new_timeline() -> None:
    data = _log("12_") + b"(APIServer pid=5) INFO 10-23 16:00:00 [api_server.py:1] vLLM API server version 0.11.0\n"
    snap = timeline_from_bytes(data)
    assert snap.outcome == "incomplete" and snap.vllm_version == "0.11.0"
    assert snap.stage("config").status == "running" and snap.stage("weights").status == "pending"


def test_restart_after_ready_inside_one_block_is_read_in_full() -> None:
    restart = (
        "(APIServer pid=5) INFO 10-23 16:00:00 [api_server.py:1] vLLM API server version 0.11.0\n"
        "(EngineCore_DP0 pid=6) INFO 10-23 16:00:05 [core.py:1] Initializing a V1 LLM engine (v0.11.0) with config: "
        "model='m2', tensor_parallel_size=2\n"
        "(Worker_TP0 pid=7) INFO 10-23 16:00:09 [gpu_model_runner.py:1] Starting to load model m2...\n"
    )
    t = Timeline()
    t.feed_text(_log("12_").decode())
    assert t.snapshot().outcome == "ready"
    t.feed_text(restart)  # one block scanned from "ready": the banner, then lines only startup cares about
    snap = t.snapshot()
    assert snap.model == "m2" and snap.facts["tensor_parallel_size"] == 2
    assert snap.stage("weights").status == "running"


def test_serving_flood_after_ready_is_ignored_but_engine_death_is_not() -> None:
    ready = _log("12_").decode()
    flood = "(APIServer pid=1) INFO 10-23 15:20:00 [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s\n" * 50
    death = (
        "(EngineCore_DP0 pid=1805889) ERROR 10-23 15:21:00 [core.py:1] torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 2.00 MiB\n"
        "(APIServer pid=1804347) ERROR 10-23 15:21:01 [core_client.py:1] Engine core proc EngineCore_DP0 died "
        "unexpectedly, shutting down client.\n"
    )
    assert parse_log_text(ready + flood).outcome == "ready"
    snap = parse_log_text(ready + flood + death)
    assert snap.outcome == "failed" and snap.failure is not None
    assert snap.failure.kind == "oom" and "torch.OutOfMemoryError" in snap.failure.message
    # It had served for a minute past the last stats line: the message says so (issue 12).
    assert snap.failure.message.startswith("crashed after serving ")


# One startup context + the failing lines, written from vLLM's format strings (reference §6).
_CTX = (
    "(EngineCore_DP0 pid=7) INFO 03-01 10:00:00 [core.py:1] Initializing a V1 LLM engine (v0.17.1) with config: "
    "model='m', tensor_parallel_size=2\n"
)
_WEIGHTS = "(EngineCore_DP0 pid=7) (RayWorkerWrapper pid=8) INFO 03-01 10:01:00 [gpu_model_runner.py:1] Starting to load model m...\n"
_KV = "(EngineCore_DP0 pid=7) (RayWorkerWrapper pid=8) INFO 03-01 10:02:00 [gpu_worker.py:1] Available KV cache memory: 1.71 GiB\n"
_FAIL = "(EngineCore_DP0 pid=7) ERROR 03-01 10:03:00 [core.py:866] EngineCore failed to start.\n"
_FINAL = "(APIServer pid=6) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"

CASES = [
    ("placement_timeout", "placement", _CTX + "(EngineCore_DP0 pid=7) INFO 03-01 10:00:01 [ray_utils.py:1] No current placement group found. Creating a new placement group.\n"
     + _FAIL + "(EngineCore_DP0 pid=7) ERROR 03-01 10:30:00 [core.py:866] ValueError: Cannot provide a placement group of placement_group_specs=[{'GPU': 1.0}, {'GPU': 1.0}] within 1800 seconds.\n" + _FINAL),
    ("ip_mismatch", "placement", _CTX + "(EngineCore_DP0 pid=7) RuntimeError: Every node should have a unique IP address. Got 2 nodes with node ids ['a', 'b'] and 1 unique IP addresses {'10.0.0.1'}.\n"),
    ("no_gpu_on_node", "placement", _CTX + "(EngineCore_DP0 pid=7) ValueError: Ray does not allocate any GPUs on the driver node. Driver IP: 10.0.0.1\n"),
    ("nccl", "distributed", _CTX + "(EngineCore_DP0 pid=7) (RayWorkerWrapper pid=8, ip=10.0.0.2) INFO 03-01 10:00:30 [parallel_state.py:1] world_size=2 rank=1 local_rank=0 distributed_init_method=tcp://10.0.0.1:1 backend=nccl\n"
     + _FAIL + "(EngineCore_DP0 pid=7) ERROR 03-01 10:03:00 [core.py:866] RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n" + _FINAL),
    ("oom", "weights", _CTX + _WEIGHTS + _FAIL + "(EngineCore_DP0 pid=7) ERROR 03-01 10:03:00 [core.py:866] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB.\n" + _FINAL),
    ("kv_cache_insufficient", "kv_cache", _CTX + _WEIGHTS + _KV + _FAIL + "(EngineCore_DP0 pid=7) ERROR 03-01 10:03:00 [core.py:866] ValueError: To serve at least one request with the models's max seq len (131072), (4.54 GiB KV cache is needed, which is larger than the available KV cache memory (1.71 GiB).\n" + _FINAL),
    ("free_memory_low", "weights", _CTX + _WEIGHTS + "(EngineCore_DP0 pid=7) ERROR 03-01 10:03:00 [core.py:866] ValueError: Free memory on device (10.1/119.7 GiB) on startup is less than desired GPU memory utilization (0.9, 107.7 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.\n"),
    ("compile", "compile", _CTX + _WEIGHTS + "(EngineCore_DP0 pid=7) ERROR 03-01 10:03:00 [core.py:866] RuntimeError: vLLM failed to compile the model. The most likely reason for this is that a previous compilation failed\n"),
    ("model_not_found", "config", "ValueError: Invalid repository ID or local directory specified: 'x/y'.\n"),
    ("unsupported_architecture", "config", "(APIServer pid=1) ValueError: Model architectures ['FooForCausalLM'] are not supported for now. Supported architectures: dict_keys([...])\n"),
    ("kernel_unsupported", "weights", _CTX + _WEIGHTS + "(EngineCore_DP0 pid=7) ERROR 03-01 10:03:00 [core.py:866] RuntimeError: CUDA error: no kernel image is available for execution on the device\n"),
    ("config_error", "config", "(APIServer pid=1) INFO 03-01 10:00:00 [utils.py:1] non-default args: {'model': 'm'}\n(APIServer pid=1) ValueError: max_model_len (999999) is greater than the derived max_model_len (131072).\n"),
    ("port_in_use", "config", "(APIServer pid=1) INFO 03-01 10:00:00 [utils.py:1] non-default args: {'model': 'm'}\n(APIServer pid=1) OSError: [Errno 98] Address already in use\n"),
    ("worker_died", "weights", _CTX + _WEIGHTS + "(EngineCore pid=7) ERROR 03-01 10:03:00 [multiproc_executor.py:1] Worker proc VllmWorker-1 died unexpectedly, shutting down executor.\n"),
    ("engine_timeout", "weights", _CTX + _WEIGHTS + "(APIServer pid=6) TimeoutError: Timed out waiting for engine core processes to start. This is often caused by slow weight loading for large models. Waited 600s (configured by VLLM_ENGINE_READY_TIMEOUT_S).\n"),
    ("driver_mismatch", "config", "(APIServer pid=1) INFO 03-01 10:00:00 [utils.py:1] non-default args: {'model': 'm'}\n(APIServer pid=1) RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 803: system has unsupported display driver / cuda driver combination\n"),
    ("unknown", "weights", _CTX + _WEIGHTS + _FAIL + "(EngineCore_DP0 pid=7) ERROR 03-01 10:03:00 [core.py:866] KeyError: 'model.layers.0.foo'\n" + _FINAL),
    # platforms/cuda.py get_attn_backend_cls: "No valid attention backend found for {device_name} with {config_str}.
    # Reasons: {reasons_str}."
    ("attention_backend", "weights", _CTX + _WEIGHTS + _FAIL + "(EngineCore_DP0 pid=7) ERROR 03-01 10:03:00 [core.py:866] ValueError: No valid attention backend found for cuda with head_size: 576, dtype: torch.bfloat16, kv_cache_dtype: fp8, block_size: None, use_mla: True, has_sink: False, use_sparse: True. Reasons: {FLASH_ATTN_MLA: [compute capability not supported], FLASHMLA: [compute capability not supported]}.\n" + _FINAL),
    # triton/backends/nvidia/compiler.py make_cubin: PTXASError(f"{error}\n`ptxas` stderr:\n{log}\n..."), ptxas's
    # "ptxas fatal   : Value '%s' is not defined for option '%s'".
    ("triton_ptxas", "kv_cache", _CTX + _WEIGHTS + _KV + _FAIL
     + "(EngineCore_DP0 pid=7) ERROR 03-01 10:03:00 [core.py:866] triton.runtime.errors.PTXASError: PTXAS error: Internal Triton PTX codegen error\n"
       "(EngineCore_DP0 pid=7) ERROR 03-01 10:03:00 [core.py:866] `ptxas` stderr:\n"
       "(EngineCore_DP0 pid=7) ERROR 03-01 10:03:00 [core.py:866] ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'\n" + _FINAL),
    # flashinfer/jit/cpp_ext.py run_ninja: RuntimeError("Ninja build failed." + " Ninja output:\n" + output)
    ("jit_build", "kv_cache", _CTX + _WEIGHTS + _KV + _FAIL
     + "(EngineCore_DP0 pid=7) ERROR 03-01 10:03:00 [core.py:866] RuntimeError: Ninja build failed. Ninja output:\n"
       "(EngineCore_DP0 pid=7) ERROR 03-01 10:03:00 [core.py:866] nvcc fatal   : Unsupported gpu architecture 'compute_121a'\n"
       "(EngineCore_DP0 pid=7) ERROR 03-01 10:03:00 [core.py:866] ninja: build stopped: subcommand failed.\n" + _FINAL),
    # src/ray/util/logging.cc: "[%Y-%m-%d %H:%M:%S,%e %L %P %t] " + RAY_CHECK's "file.cc:N: Check failed: %s"
    ("ray_fatal", "weights", _CTX + _WEIGHTS
     + "(EngineCore_DP0 pid=7) [2026-03-01 10:03:00,412 C 7 91] core_worker.cc:912: Check failed: worker_context_.GetCurrentActorID().IsNil()\n"
       "(EngineCore_DP0 pid=7) *** SIGABRT received at time=1772359380 on cpu 3 ***\n"),
]


@pytest.mark.parametrize(("kind", "stage", "text"), CASES, ids=[c[0] for c in CASES])
def test_failure_kinds(kind: str, stage: str, text: str) -> None:
    snap = parse_log_text(text)
    assert snap.outcome == "failed"
    assert snap.failure is not None
    assert (snap.failure.kind, snap.failure.stage) == (kind, stage)
    assert "Engine core initialization failed" not in snap.failure.message  # the root cause, not the summary
    assert "EngineCore failed to start" not in snap.failure.message or kind == "unknown"
    assert len(snap.failure.hint) > 40
    assert snap.stage(stage).status == "failed"


MORE_SIGNATURES = [
    ("model_not_found", "OSError: You are trying to access a gated repo.\nMake sure to have access to it at https://huggingface.co/x."),
    ("unsupported_architecture", "ValueError: The checkpoint you are trying to load has model type `qwen9` but Transformers does not recognize this architecture."),
    ("nccl", "torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 1/2 clients joined."),
    ("port_in_use", "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): address already in use"),
    ("worker_died", "(raylet, ip=10.0.0.2) A worker died or was killed while executing a task by an unexpected system error."),
    ("worker_died", "(RayWorkerWrapper pid=8, ip=10.0.0.2) *** SIGSEGV received at time=1775691200 on cpu 11 ***"),
    ("kernel_unsupported", "NotImplementedError: No compiled cutlass_scaled_mm for a compute capability less than CUDA device capability: 121"),
]


@pytest.mark.parametrize(("kind", "line"), MORE_SIGNATURES, ids=[c[0] for c in MORE_SIGNATURES])
def test_more_signatures(kind: str, line: str) -> None:
    snap = parse_log_text(_CTX + line + "\n")
    assert snap.failure is not None and snap.failure.kind == kind


def test_error_executing_method_names_the_stage() -> None:
    snap = parse_log_text(
        "(RayWorkerWrapper pid=677) ERROR 04-29 13:39:08 [worker_base.py:620] Error executing method "
        "'load_model'. This might cause deadlock in distributed execution.\n"
    )
    assert snap.failure is not None and (snap.failure.kind, snap.failure.stage) == ("unknown", "weights")


def test_every_failure_kind_is_covered() -> None:
    assert {c[0] for c in CASES} == set(FAILURE_KINDS)


def test_placement_hint_names_gpus_and_host_ip() -> None:
    snap = parse_log_text(CASES[0][2])
    assert snap.failure is not None
    hint = snap.failure.hint
    assert "2 GPU" in hint and "ray status" in hint and "VLLM_HOST_IP" in hint


def test_warning_tracebacks_are_not_failures() -> None:
    text = _CTX + (
        "(Worker_TP1 pid=9) WARNING 03-01 10:01:00 [decorators.py:321] Compiling model again due to a load failure\r\n"
        "(Worker_TP1 pid=9) WARNING 03-01 10:01:00 [decorators.py:321] RuntimeError: cached artifact mismatch\r\n"
        "(Worker_TP1 pid=9) INFO 03-01 10:01:00 [gpu_worker.py:1] Free memory on device (92.98/95.0 GiB) on startup. "
        "Desired GPU memory utilization is (0.9, 85.5 GiB).\n"
    )
    snap = parse_log_text(text)
    assert snap.outcome == "incomplete" and snap.failure is None


def test_json_shape() -> None:
    d = timeline_from_bytes(_log("12_")).to_json()
    assert list(d) == ["outcome", "vllm_version", "model", "stages", "facts", "failure", "nodes", "year_known"]
    assert [s["name"] for s in d["stages"]] == list(STAGES)
    # ISO 8601; vLLM's header has no year, so the year-less form (issue 12)
    assert d["year_known"] is False and d["stages"][0]["started"] == "--10-23T15:10:10"
    assert set(d["stages"][0]) == {"name", "status", "started", "ended", "seconds", "progress"}
    for key in ("weights_gib", "weights_seconds", "kv_cache_gib", "kv_cache_tokens", "max_concurrency",
                "cuda_graphs_seconds", "cuda_graphs_gib", "engine_seconds", "tensor_parallel_size",
                "pipeline_parallel_size", "data_parallel_size", "api_url", "nccl_version"):
        assert key in d["facts"], key


def test_every_failure_signature_reaches_the_error_path() -> None:
    """The bulk reader only parses lines holding a keyword. A signature that can stand on a headerless
    line without an exception name (Ray's raylet OOM line, a raw ``torch._dynamo.exc...`` line) must be
    covered by a keyword; the others are only ever raised as ``SomethingError: ...`` or logged at ERROR."""
    from sparktui.domain.logs.failures import SIGNATURES
    from sparktui.domain.logs.rules import STARTUP_KEYWORDS

    raised_as_error = {  # format strings of exceptions: their lines always hold "Error"/"ERROR"
        "[Errno 98]", "is not included in a placement group", "Every node should have a unique IP address",
        "Ray does not allocate any", "No CUDA GPUs are available", "To serve at least one request with the model",
        "No available memory for the cache blocks", "stored in KV cache", "KV cache is needed, which is larger than",
        "on startup is less than desired", "NCCL error", "nccl", "Cannot find model module",
        "does not recognize this architecture", "Invalid repository ID or local directory", "gated repo",
        "Repo id must", "is not a valid model identifier", "does not appear to have a file named config.json",
        "validation error for", "No compiled cutlass", "No valid attention backend found",
        "is not valid for this configuration", "Invalid attention backend",
    }
    for sig in SIGNATURES:
        covered = any(kw in sig.keyword for kw in STARTUP_KEYWORDS)
        assert covered or sig.keyword in raised_as_error, sig.keyword


_EC = "(EngineCore_DP{dp} pid=7{dp}) INFO 03-01 10:00:0{s} [core.py:1] Initializing a V1 LLM engine (v0.17.1) with config: model='m', tensor_parallel_size=1\n"
_W = "(EngineCore_DP0 pid=70) (RayWorkerWrapper pid=8) INFO 03-01 10:00:05 [parallel_state.py:1] world_size=1 rank=0 local_rank=0 distributed_init_method=tcp://1.2.3.4:5 backend=nccl\n"


def test_a_late_data_parallel_engine_config_is_not_a_new_start() -> None:
    text = _EC.format(dp=0, s=1) + _W + _EC.format(dp=1, s=6)
    snap = parse_log_text(text)
    assert snap.stage("distributed").status == "running" and snap.stage("config").status == "done"


def test_the_api_banner_past_config_is_a_new_start() -> None:
    banner = "INFO 03-01 10:30:00 [api_server.py:1] vLLM API server version 0.9.2\n"
    snap = parse_log_text(_EC.format(dp=0, s=1) + _W + banner)
    assert snap.stage("config").status == "running" and snap.stage("distributed").status == "pending"


def test_other_frameworks_worker_actors_are_not_vllm_workers() -> None:
    verl = "(WorkerDict pid=9) INFO 03-01 10:00:02 [x.py:1] Loading safetensors checkpoint shards: 50% Completed | 1/2 [00:01<00:01, 1.0it/s]\n"
    snap = parse_log_text(_EC.format(dp=0, s=1) + "(WorkerDict pid=9) ERROR 03-01 10:00:02 [x.py:1] no luck\n")
    assert snap.stage("distributed").status == "pending"
    assert parse_log_text(_EC.format(dp=0, s=1) + verl).stage("distributed").status in ("pending", "skipped")


def test_a_node_clock_offset_needs_a_clean_time_zone_step() -> None:
    head = "(EngineCore_DP0 pid=70) INFO 03-01 12:00:00 [core.py:1] No current placement group found. Creating a new placement group.\n"
    late = "(EngineCore_DP0 pid=70) (RayWorkerWrapper pid=9, ip=10.0.0.2) INFO 03-01 11:40:00 [pynccl.py:1] vLLM is using nccl==2.27.3\n"
    utc = "(EngineCore_DP0 pid=70) (RayWorkerWrapper pid=9, ip=10.0.0.2) INFO 03-01 10:00:30 [x.py:1] Model loading took 1 GiB memory and 2 seconds\n"
    head2 = "(EngineCore_DP0 pid=70) INFO 03-01 12:01:00 [kv_cache_utils.py:1] GPU KV cache size: 1,000 tokens\n"
    snap = parse_log_text(_EC.format(dp=0, s=1) + head + late + utc + head2)
    # 20 min behind is no time-zone step (a copy held back): not an offset; 2 h behind is one.
    assert snap.stage("distributed").started == "03-01 12:00:00"  # the held-back copy's 11:40 is ignored
    assert snap.stage("weights").started == "03-01 12:00:30"  # 10:00:30 on a UTC node = 12:00:30 here
    assert snap.stage("weights").ended == "03-01 12:01:00"


def test_a_tentative_failure_that_a_real_one_confirms() -> None:
    """An unexplained exception, then another rank's progress (taken back), then the EngineCore's
    'failed to start' with the same exception: failed, and the root cause is the exception."""
    text = (
        _EC.format(dp=0, s=1) + _W
        + "(EngineCore_DP0 pid=70) (RayWorkerWrapper pid=9, ip=10.0.0.2) AttributeError: 'NoneType' object has no attribute 'shape'\n"
        + "(EngineCore_DP0 pid=70) (RayWorkerWrapper pid=8) \rLoading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.0it/s]\n"
        + "(EngineCore_DP0 pid=70) ERROR 03-01 10:00:09 [core.py:708] EngineCore failed to start.\n"
        + "(EngineCore_DP0 pid=70) ERROR 03-01 10:00:09 [core.py:708] AttributeError: 'NoneType' object has no attribute 'shape'\n"
    )
    snap = parse_log_text(text)
    assert snap.outcome == "failed" and snap.failure is not None
    assert (snap.failure.kind, snap.failure.stage) == ("unknown", "weights")
    assert snap.failure.message.startswith("AttributeError")


def test_an_exception_the_start_survives_is_taken_back() -> None:
    text = (
        _EC.format(dp=0, s=1)
        + "(EngineCore_DP0 pid=70) KeyError: 'optional_feature'\n"  # config-time: config_error, tentative
        + _W
    )
    snap = parse_log_text(text)
    assert snap.outcome == "incomplete" and snap.failure is None
    assert snap.facts["ignored_error"] == "KeyError: 'optional_feature'"
    assert snap.stage("distributed").status == "running"



# Ray's C++ logger (src/ray/util/logging.cc): "[%Y-%m-%d %H:%M:%S,%e %L %P %t] " + RAY_CHECK's "file.cc:N: Check
# failed: %s"; %L "C" is Ray's FATAL. Ray aborts the process that printed it (issue 31).
_READY = _log("12_").decode()
_RAY_CHECK = "[2025-10-23 15:30:00,412 C {pid} 91] core_worker.cc:912: Check failed: _s.ok() Bad status: RpcError\n"


def test_a_fatal_ray_check_in_the_engine_core_after_ready_ends_ready() -> None:
    snap = parse_log_text(_READY + "(EngineCore_DP0 pid=1805889) " + _RAY_CHECK.format(pid=1805889))
    assert snap.outcome == "failed" and snap.failure is not None
    assert (snap.failure.kind, snap.failure.stage) == ("ray_fatal", "serving")
    assert "Check failed: _s.ok()" in snap.failure.message and "RAY_CHECK" in snap.failure.hint


def test_a_fatal_ray_check_in_a_worker_leaves_the_verdict_to_the_engine() -> None:
    """In a worker it kills the worker; the engine says so itself when it next calls it."""
    line = "(EngineCore_DP0 pid=1805889) (RayWorkerWrapper pid=77, ip=10.0.0.2) " + _RAY_CHECK.format(pid=77)
    assert parse_log_text(_READY + line).outcome == "ready"


def test_ray_error_level_lines_after_ready_are_no_crash() -> None:
    line = "(EngineCore_DP0 pid=1805889) [2025-10-23 15:30:00,412 E 1805889 91] logging.cc:440: something\n"
    assert parse_log_text(_READY + line).outcome == "ready"


def test_a_new_kind_snippet_with_no_stage_gets_its_natural_stage() -> None:
    """A pasted line alone: the stage where each kind fails, not "unknown"."""
    cases = {
        "attention_backend": ("ValueError: No valid attention backend found for cuda with head_size: 72, dtype: "
                              "torch.float16. Reasons: {FLASH_ATTN: [head_size not supported]}.", "weights"),
        "triton_ptxas": ("triton.runtime.errors.PTXASError: PTXAS error: Internal Triton PTX codegen error",
                         "kv_cache"),
        "jit_build": ("RuntimeError: Error building extension 'sampling'", "kv_cache"),
        "ray_fatal": ("[2026-03-01 10:03:00,412 C 7 91] core_worker.cc:912: Check failed: x", "distributed"),
    }
    for kind, (line, stage) in cases.items():
        snap = parse_log_text(line + "\n")
        assert snap.failure is not None, kind
        assert (snap.failure.kind, snap.failure.stage) == (kind, stage)
        assert "during unknown" not in snap.failure.hint


def test_a_remote_workers_segfault_names_its_node() -> None:
    """Ray's signal handler in the worker on 10.0.0.2, then the raylet's report: both name that node."""
    segv = "(EngineCore_DP0 pid=7) (RayWorkerWrapper pid=8, ip=10.0.0.2) *** SIGSEGV received at time=1 on cpu 3 ***\n"
    snap = parse_log_text(_CTX + segv)
    assert snap.failure is not None and (snap.failure.kind, snap.failure.node) == ("worker_died", "10.0.0.2")
    assert "10.0.0.2" in snap.failure.hint
