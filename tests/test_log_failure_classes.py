# ruff: noqa: E501  (log lines rendered from vLLM's, PyTorch's and Triton's format strings)
"""The failure classes of issue 12, each from the format strings that print it (never from one log file).

Every line here is the format string of the program named in its comment, rendered with made-up values,
behind the record header and process prefix vLLM puts in front (reference §1-§2)."""

from __future__ import annotations

import pytest

from sparktui.cli import main
from sparktui.domain.logs import parse_log_text, timeline_from_bytes
from sparktui.domain.logs.line import split_glued

_EC = "(EngineCore_DP0 pid=7)"
_W1 = "(EngineCore_DP0 pid=7) (RayWorkerWrapper pid=8, ip=10.0.0.2)"
_API = "(APIServer pid=6)"


def _h(level: str, t: str, where: str) -> str:
    return f"{level} 03-01 {t} [{where}] "


# A V1 start that reaches ready (format strings of §3), then serves.
READY = "".join(f"{line}\n" for line in (
    f"{_API} {_h('INFO', '10:00:00', 'api_server.py:1')}vLLM API server version 0.17.1",
    f"{_EC} {_h('INFO', '10:00:01', 'core.py:1')}Initializing a V1 LLM engine (v0.17.1) with config: model='m', tensor_parallel_size=2",
    f"{_EC} {_h('INFO', '10:00:05', 'gpu_model_runner.py:1')}Starting to load model m...",
    f"{_EC} {_h('INFO', '10:01:00', 'gpu_model_runner.py:1')}Model loading took 30.1 GiB and 50.2 seconds",
    f"{_EC} {_h('INFO', '10:01:30', 'gpu_worker.py:1')}Available KV cache memory: 40.0 GiB",
    f"{_EC} {_h('INFO', '10:01:31', 'kv_cache_utils.py:1')}Maximum concurrency for 8192 tokens per request: 10.5x",
    f"{_EC} {_h('INFO', '10:01:50', 'gpu_model_runner.py:1')}Graph capturing finished in 15 secs, took 1.2 GiB",
    f"{_EC} {_h('INFO', '10:01:51', 'core.py:1')}init engine (profile, create kv cache, warmup model) took 60.00 seconds",
    f"{_API} {_h('INFO', '10:02:00', 'api_server.py:1')}Starting vLLM API server 0 on http://0.0.0.0:8000",
    f"{_API} INFO:     Application startup complete.",
    # uvicorn's access log: '%s - "%s %s HTTP/%s" %d'
    *[f'{_API} INFO:     10.0.0.9:5000{i} - "POST /v1/chat/completions HTTP/1.1" 200 OK' for i in range(3)],
    f"{_API} {_h('INFO', '10:07:00', 'loggers.py:1')}Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 5.0 tokens/s",
))


def test_clean_stop_by_signal_after_ready_is_not_a_failure() -> None:
    # v1/engine/core.py signal_handler: "[shutdown] EngineCore: trigger received signal=%s"; then the API
    # server's client sees the engine go away (EngineDeadError) and uvicorn shuts down.
    stop = (
        f"{_EC} {_h('INFO', '10:12:00', 'core.py:1')}[shutdown] EngineCore: trigger received signal=SIGTERM\n"
        f"{_EC} {_h('INFO', '10:12:00', 'core.py:1')}[shutdown] EngineCore: start mode=abort timeout=0s\n"
        f"{_API} {_h('ERROR', '10:12:01', 'async_llm.py:1')}AsyncLLM output_handler failed.\n"
        f"{_API} vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.\n"
        f"{_API} INFO:     Shutting down\n"
    )
    snap = parse_log_text(READY + stop)
    assert snap.outcome == "stopped" and snap.failure is None
    assert snap.facts["stop_signal"] == "SIGTERM"
    assert snap.served_seconds == 600.0 and snap.facts["requests_served"] == 3


def test_uvicorn_shutdown_alone_is_a_stop() -> None:
    snap = parse_log_text(READY + f"{_API} INFO:     Shutting down\n{_API} INFO:     Waiting for application shutdown.\n")
    assert snap.outcome == "stopped" and snap.failure is None


def test_crash_after_ready_reads_crashed_after_serving_with_the_cause() -> None:
    # "EngineCore encountered a fatal error." (logger.exception) then the cause, a class not ending in Error:
    # triton.runtime.errors.OutOfResources: "out of resource: {name}, Required: {required}, Hardware limit:
    # {limit}. Reducing block sizes or `num_stages` may help."
    crash = (
        f"{_EC} {_h('ERROR', '10:12:00', 'core.py:1')}EngineCore encountered a fatal error.\n"
        f"{_EC} {_h('ERROR', '10:12:00', 'core.py:1')}Traceback (most recent call last):\n"
        f'{_EC} {_h("ERROR", "10:12:00", "core.py:1")}  File "/usr/lib/python3/triton/runtime/jit.py", line 1, in run\n'
        f"{_EC} {_h('ERROR', '10:12:00', 'core.py:1')}triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 147456, Hardware limit: 101376. Reducing block sizes or `num_stages` may help.\n"
        f"{_API} {_h('ERROR', '10:12:01', 'core_client.py:1')}Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.\n"
    )
    snap = parse_log_text(READY + crash)
    assert snap.outcome == "failed" and snap.failure is not None
    assert snap.failure.kind == "kernel_unsupported"
    assert snap.failure.message.startswith("crashed after serving 10m00s (3 requests answered): ")
    assert "triton.runtime.errors.OutOfResources: out of resource: shared memory" in snap.failure.message
    assert "encountered a fatal error" not in snap.failure.message
    assert "sm_121" in snap.failure.hint and "shared memory" in snap.failure.hint


def test_unqualified_cause_before_the_fatal_line_is_the_message() -> None:
    # torch.AcceleratorError (torch 2.8+): "CUDA error: %s" — logged before the engine's fatal line.
    crash = (
        f"{_EC} {_h('ERROR', '10:08:00', 'core.py:1')}torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
        f"{_EC} {_h('ERROR', '10:08:00', 'core.py:1')}EngineCore encountered a fatal error.\n"
    )
    snap = parse_log_text(READY + crash)
    assert snap.failure is not None
    assert "torch.AcceleratorError: CUDA error: an illegal memory access" in snap.failure.message


_CTX = f"{_EC} {_h('INFO', '10:00:01', 'core.py:1')}Initializing a V1 LLM engine (v0.17.1) with config: model='m', tensor_parallel_size=2\n"


def _tb(who: str, frames: list[str], exc: str) -> str:
    head = f"{who} {_h('ERROR', '10:05:00', 'multiproc_executor.py:1')}"
    lines = [f"{head}WorkerProc hit an exception.", f"{head}Traceback (most recent call last):"]
    for func in frames:
        lines.append(f'{head}  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/x.py", line 10, in {func}')
        lines.append(f"{head}    return self.{func}()")
    lines.append(head + exc)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("frames", "stage"), [
    (["worker_busy_loop", "determine_available_memory", "profile_run", "_dummy_run"], "kv_cache"),
    (["worker_busy_loop", "compile_or_warm_up_model", "capture_model", "_capture_cudagraphs", "capture_end"], "cuda_graphs"),
    (["worker_busy_loop", "load_model", "load_weights"], "weights"),
    # 0.18+: memory profiling captures graphs to measure them: still the KV-cache stage.
    (["worker_busy_loop", "determine_available_memory", "profile_cudagraph_memory", "capture_model"], "kv_cache"),
])
def test_failure_stage_follows_the_traceback_frames(frames: list[str], stage: str) -> None:
    # Nothing but the config line ran: the frames are the only stage evidence.
    snap = parse_log_text(_CTX + _tb("(Worker_TP0 pid=9)", frames, "RuntimeError: CUDA error: an illegal memory access was encountered"))
    assert snap.failure is not None and snap.failure.stage == stage
    assert snap.stage(stage).status == "failed"


def test_a_snippet_without_stage_evidence_is_stage_unknown() -> None:
    snap = parse_log_text("KeyError: 'model.layers.0.mlp.experts.w13_weight'\n")
    assert snap.failure is not None and snap.failure.stage == "unknown"
    assert snap.current is None
    assert all(st.status != "failed" for st in snap.stages)


@pytest.mark.parametrize("line", [
    # ProcessGroupNCCL.cpp: "[Rank %d] Watchdog caught collective operation timeout: %s ran for %d milliseconds before timing out."
    "[rank3]:[E219 10:05:00.123456789 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.",
    # "[PG ID %d PG GUID %s Rank %d] Exception (either an error or timeout) detected by watchdog at work: %d, ..."
    "[rank1]:[E219 10:05:00.1 ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0(default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog at work: 12, last enqueued NCCL work: 12, last completed NCCL work: 11.",
    "[rank1]:[E219 10:05:00.1 ProcessGroupNCCL.cpp:1946] [PG ID 0 PG GUID 0(default_pg) Rank 1] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives.",
    "[rank0]:[E219 10:05:00.1 ProcessGroupNCCL.cpp:686] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
])
def test_c10d_nccl_watchdog_is_nccl(line: str) -> None:
    snap = parse_log_text(_CTX + f"{_W1} {line}\n")
    assert snap.failure is not None and snap.failure.kind == "nccl", snap.failure


def test_two_records_glued_at_a_process_prefix_are_split() -> None:
    glued = (f"{_EC} {_h('INFO', '10:00:05', 'gpu_model_runner.py:1')}Starting to load model m..."
             f"(RayWorkerWrapper pid=8, ip=10.0.0.2) {_h('INFO', '10:00:06', 'gpu_model_runner.py:1')}Starting to load model m...")
    parts = split_glued(glued)
    assert len(parts) == 2 and parts[1].startswith("(RayWorkerWrapper pid=8, ip=10.0.0.2) INFO")
    snap = parse_log_text(_CTX + glued + "\n")
    assert set(snap.nodes) == {"head", "10.0.0.2"}


def test_multi_node_weights_done_when_every_node_bar_reached_its_total() -> None:
    # tqdm: "{desc}: {percentage:3.0f}% Completed | {n}/{total} [...]", one bar per node; node 2's "Model
    # loading took" never arrives (Ray dedup); a crash in KV-cache profiling follows.
    bars = "".join(
        f"{who} \rLoading safetensors checkpoint shards: {100 * n // 4:3d}% Completed | {n}/4 [00:0{n}<00:00,  1.50it/s]\n"
        for who in (_EC, _W1) for n in range(5))
    text = (_CTX + f"{_EC} {_h('INFO', '10:00:05', 'gpu_model_runner.py:1')}Starting to load model m...\n" + bars
            + f"{_EC} {_h('INFO', '10:01:00', 'gpu_model_runner.py:1')}Model loading took 30.1 GiB and 50.2 seconds\n"
            + _tb("(Worker_TP1 pid=9)", ["determine_available_memory", "profile_run"], "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."))
    snap = parse_log_text(text)
    assert snap.stage("weights").status == "done"
    assert snap.failure is not None and (snap.failure.kind, snap.failure.stage) == ("oom", "kv_cache")


def test_cache_hit_then_a_real_compile_of_the_drafter_is_done() -> None:
    w = f"{_EC} {_h('INFO', '10:00:30', 'backends.py:1')}"
    text = (_CTX + f"{_EC} {_h('INFO', '10:00:05', 'gpu_model_runner.py:1')}Starting to load model m...\n"
            + f"{_EC} {_h('INFO', '10:00:20', 'gpu_model_runner.py:1')}Model loading took 30.1 GiB and 15.0 seconds\n"
            # compilation/backends.py: "Directly load the compiled graph(s) for %s from the cache, took %.3f s"
            + f"{w}Directly load the compiled graph(s) for dynamic shape from the cache, took 3.100 s\n"
            + f"{_EC} {_h('INFO', '10:00:31', 'monitor.py:1')}torch.compile takes 4.10 s in total\n"
            # the drafter (MTP) graph is new: "Compiling a graph for dynamic shape takes %.2f s"
            + f"{_EC} {_h('INFO', '10:00:55', 'backends.py:1')}Compiling a graph for dynamic shape takes 22.40 s\n"
            + f"{_EC} {_h('INFO', '10:00:56', 'monitor.py:1')}torch.compile takes 26.80 s in total\n"
            + f"{_EC} {_h('INFO', '10:01:30', 'gpu_worker.py:1')}Available KV cache memory: 40.0 GiB\n")
    snap = parse_log_text(text)
    assert snap.stage("compile").status == "done"
    assert snap.facts["compile_seconds"] == 26.8 and snap.facts["compile_cache_hit"] is True


@pytest.mark.parametrize(("line", "kind", "hint_word"), [
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "kernel_unsupported", "sm_121"),
    ("RuntimeError: HIP error: invalid kernel file", "kernel_unsupported", "gfx"),
    ("triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 232448, Hardware limit: 101376. Reducing block sizes or `num_stages` may help.", "kernel_unsupported", "sm_121"),
    # torch/cuda/__init__.py: "Unexpected error from cudaGetDeviceCount(). ... Error 803: system has unsupported display driver / cuda driver combination"
    ("RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have already set an error? Error 803: system has unsupported display driver / cuda driver combination", "driver_mismatch", "sm_121"),
    # torch: "The NVIDIA driver on your system is too old (found version %d). Please update your GPU driver ..."
    ("AssertionError: The NVIDIA driver on your system is too old (found version 12020). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx", "driver_mismatch", "nvidia-smi"),
    ("RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version", "driver_mismatch", "driver"),
])
def test_kernel_and_driver_kinds_with_their_hints(line: str, kind: str, hint_word: str) -> None:
    snap = parse_log_text(_CTX + _tb("(Worker_TP0 pid=9)", ["init_device"], line))
    assert snap.failure is not None and snap.failure.kind == kind, snap.failure
    assert hint_word in snap.failure.hint


@pytest.mark.parametrize("exc", [
    # ray/exceptions.py ActorUnavailableError: f"The actor {actor_id} is unavailable: {error_msg}", the
    # message gRPC's: "failed to connect to all addresses; last error: UNKNOWN: ipv4:%s:%d: ..."
    "ray.exceptions.ActorUnavailableError: The actor 0ebacbd567459902e2ad296216000000 is unavailable: The actor is temporarily unavailable: RpcError: RPC error: failed to connect to all addresses; last error: UNKNOWN: ipv4:10.0.0.2:10329: Failed to connect to remote host: Connection refused rpc_code: 1",
    # ActorDiedError's base text with its context lines ("\tclass_name: ...", "\tip: ...")
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n\tclass_name: RayWorkerWrapper\n\tactor_id: 0ebacbd5\n\tpid: 8\n\tip: 10.0.0.2",
])
def test_a_ray_worker_actor_lost_is_worker_died_and_the_hint_names_its_address(exc: str) -> None:
    head = f"{_EC} {_h('ERROR', '10:05:00', 'core.py:1')}"
    body = "".join(f"{head}{part}\n" for part in exc.split("\n"))
    snap = parse_log_text(_CTX + f"{head}EngineCore failed to start.\n" + body)
    assert snap.failure is not None and snap.failure.kind == "worker_died", snap.failure
    assert "Ray lost a vLLM worker actor on 10.0.0.2" in snap.failure.hint, snap.failure.hint


def test_reasons_lines_are_part_of_the_message_and_the_hint() -> None:
    # mixed_precision/__init__.py: f"Failed to find a kernel that can implement the WNA16 linear layer. Reasons: \n"
    # + "\n".join(failure_reasons), each reason f" {kernel.__name__} cannot implement due to: {reason}"
    head = f"(Worker_TP0 pid=9) {_h('ERROR', '10:05:00', 'multiproc_executor.py:1')}"
    text = (_CTX + f"{head}ValueError: Failed to find a kernel that can implement the WNA16 linear layer. Reasons: \n"
            f"{head} CutlassW4A8LinearKernel cannot implement due to: requires capability 90, current compute capability is 121\n"
            f"{head} MacheteLinearKernel cannot implement due to: requires capability 90, current compute capability is 121\n"
            f"{_EC} {_h('ERROR', '10:05:01', 'core.py:1')}EngineCore failed to start.\n")
    snap = parse_log_text(text)
    assert snap.failure is not None and snap.failure.kind == "kernel_unsupported"
    assert "MacheteLinearKernel cannot implement due to" in snap.failure.message
    assert "CutlassW4A8LinearKernel" in snap.failure.hint and "MacheteLinearKernel" in snap.failure.hint


def test_not_a_vllm_log_says_so_and_exits_2(tmp_path: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "syslog.txt"  # type: ignore[operator]
    path.write_text("Dec  1 09:00:00 host systemd[1]: Started Session 4 of user root.\nhello world\n")
    assert not timeline_from_bytes(path.read_bytes()).is_vllm_log
    assert main(["timeline", str(path)]) == 2
    assert "not a vLLM log" in capsys.readouterr().err
    assert timeline_from_bytes(READY.encode()).is_vllm_log


def test_json_times_are_iso_with_the_year_a_docker_stamp_gives() -> None:
    text = "".join(f"2025-12-31T23:59:{50 + i:02d}.000000000Z {line}" for i, line in enumerate(READY.splitlines(True)[:4]))
    d = parse_log_text(text).to_json()
    assert d["year_known"] is True
    assert d["stages"][0]["started"] == "2025-03-01T10:00:00"  # the header's month-day, the stamp's year


def test_human_output_uses_the_dashboard_stage_names_and_fact_units(capsys: pytest.CaptureFixture[str], tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "v.log"  # type: ignore[operator]
    path.write_text(READY)
    assert main(["timeline", str(path)]) == 0
    out = capsys.readouterr().out
    assert "KV cache" in out and "CUDA graphs" in out and "engine init" in out and "API server" in out
    assert "30.1 GiB  (model weights per GPU" in out and "10.5×  (requests of full length" in out
    assert "50s  (loading the weights" in out
