# ruff: noqa: E501  (log lines rendered from vLLM's, PyTorch's, NCCL's, CUDA's and Slurm's format strings)
"""The rule classes the public-log corpus (tests/public_logs/) showed missing, each from the format strings
that print it, rendered with made-up values (never lines copied from one corpus file)."""

from __future__ import annotations

from sparktui.domain.logs import parse_log_text
from tests.test_log_failure_classes import _API, _EC, READY, _h

# A V1 start up to the KV-cache profile run: weights loaded, torch.compile under way (Dynamo done).
_TO_PROFILE = "".join(f"{line}\n" for line in (
    f"{_API} {_h('INFO', '10:00:00', 'api_server.py:1')}vLLM API server version 0.13.0",
    f"{_EC} {_h('INFO', '10:00:01', 'core.py:1')}Initializing a V1 LLM engine (v0.13.0) with config: model='m', tensor_parallel_size=1",
    f"{_EC} {_h('INFO', '10:00:05', 'gpu_model_runner.py:1')}Starting to load model m...",
    f"{_EC} {_h('INFO', '10:01:00', 'gpu_model_runner.py:1')}Model loading took 14.2 GiB memory and 50.2 seconds",
))
_COMPILING = (
    f"{_EC} {_h('INFO', '10:01:05', 'backends.py:1')}Using cache directory: /c/torch_compile_cache/x/rank_0_0/backbone for vLLM's torch.compile\n"
    f"{_EC} {_h('INFO', '10:01:08', 'backends.py:1')}Dynamo bytecode transform time: 3.66 s\n"
)


def _tb(*frames: str, last: str) -> str:
    """vLLM's EngineCore traceback (core.py logs it line by line), CPython's frame format."""
    head = f"{_EC} {_h('ERROR', '10:01:20', 'core.py:866')}"
    lines = [f"{head}EngineCore failed to start.", f"{head}Traceback (most recent call last):"]
    lines += [f'{head}  File "/v/{f}.py", line 1, in {f}' for f in frames]
    lines.append(f"{head}{last}")
    return "\n".join(lines) + "\n"


_PROFILE_FRAMES = ("run_engine_core", "_initialize_kv_caches", "determine_available_memory", "profile_run", "_dummy_run")


def test_an_error_inside_inductor_during_the_profile_run_is_a_compile_failure() -> None:
    # V1 compiles in profile_run's first dummy run; torch/_inductor/compile_fx.py frames say it was compiling.
    log = _TO_PROFILE + _COMPILING + _tb(
        *_PROFILE_FRAMES, "compile_fx", "_compile_fx_inner", "fx_codegen_and_compile",
        last="torch._inductor.exc.InductorError: RuntimeError: Failed to run autotuning code block: CUDA out of memory. Tried to allocate 1.02 GiB.",
    )
    snap = parse_log_text(log)
    assert snap.failure is not None
    assert (snap.failure.kind, snap.failure.stage) == ("oom", "compile")
    assert snap.stage("compile").status == "failed" and snap.stage("kv_cache").status == "pending"


def test_an_error_in_the_profile_run_after_compile_is_the_kv_cache_stage() -> None:
    done = f"{_EC} {_h('INFO', '10:01:15', 'monitor.py:1')}torch.compile takes 10.0 s in total\n"
    log = _TO_PROFILE + _COMPILING + done + _tb(*_PROFILE_FRAMES, last="RuntimeError: shape '[2, 4]' is invalid for input of size 9")
    snap = parse_log_text(log)
    assert snap.failure is not None and snap.failure.stage == "kv_cache"
    assert snap.stage("compile").status == "done"


def test_kernel_warmup_is_the_engine_warm_up_not_cuda_graphs() -> None:
    # gpu_worker.compile_or_warm_up_model -> model_executor/warmup/kernel_warmup.kernel_warmup
    kv = f"{_EC} {_h('INFO', '10:01:30', 'gpu_worker.py:1')}Available KV cache memory: 40.0 GiB\n"
    log = _TO_PROFILE + kv + _tb("run_engine_core", "compile_or_warm_up_model", "kernel_warmup", last="TypeError: type 'array.array' is not subscriptable")
    snap = parse_log_text(log)
    assert snap.failure is not None and snap.failure.stage == "engine"


def test_cuda_invalid_kernel_image_is_kernel_unsupported() -> None:
    # CUDA_ERROR_INVALID_IMAGE's string, as Triton raises it: "Triton Error [CUDA]: device kernel image is invalid"
    log = _TO_PROFILE + _tb(*_PROFILE_FRAMES, last="RuntimeError: Triton Error [CUDA]: device kernel image is invalid")
    snap = parse_log_text(log)
    assert snap.failure is not None and snap.failure.kind == "kernel_unsupported"
    assert "sm_121" in snap.failure.hint  # the no-code-for-this-architecture hint


def test_the_cuda_error_nccl_reports_is_the_cause() -> None:
    # torch: "NCCL error in: %s:%d, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version %s";
    # NCCL's ncclGetLastError: "Cuda failure '%s'" (cudaGetErrorString: CUDA error 35's text).
    log = (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:1, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
        "ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "Last error:\n"
        "Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'\n"
    )
    snap = parse_log_text(log)
    assert snap.failure is not None and snap.failure.kind == "driver_mismatch"
    assert "CUDA driver version is insufficient" in snap.failure.message


def test_an_nccl_error_without_a_cuda_cause_stays_nccl() -> None:
    log = (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:1, remote process exited or there was a network error, NCCL version 2.21.5\n"
        "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.\n"
    )
    snap = parse_log_text(log)
    assert snap.failure is not None and snap.failure.kind == "nccl"


def test_a_v0_worker_death_is_worker_died_and_yields_to_its_cause() -> None:
    # V0 multiproc_worker_utils: "Worker %s pid %s died, exit code: %s"; then the worker's own cause.
    died = "ERROR 07-01 13:54:43 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 1159 died, exit code: -6\n"
    snap = parse_log_text(died)
    assert snap.failure is not None and snap.failure.kind == "worker_died"
    cause = "[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600059 milliseconds before timing out.\n"
    snap = parse_log_text(died + cause)
    assert snap.failure is not None and snap.failure.kind == "nccl" and "Watchdog" in snap.failure.message


def test_the_named_engine_death_is_the_cause_not_the_engine_dead_error_after_it() -> None:
    # v1/engine/core_client.py: "Engine core proc %s died unexpectedly, shutting down client."; then the API
    # server's EngineDeadError: "EngineCore encountered an issue. See stack trace (above) for the root cause."
    crash = (
        f"{_API} {_h('ERROR', '13:00:00', 'core_client.py:1')}Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.\n"
        f"{_API} {_h('ERROR', '13:00:00', 'async_llm.py:1')}AsyncLLM output_handler failed.\n"
        f"{_API} {_h('ERROR', '13:00:00', 'async_llm.py:1')}vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.\n"
    )
    snap = parse_log_text(READY + crash)
    assert snap.outcome == "failed" and snap.failure is not None
    assert (snap.failure.kind, snap.failure.stage) == ("worker_died", "serving")
    assert "died unexpectedly" in snap.failure.message


def test_a_watchdog_timeout_while_serving_is_a_crash() -> None:
    # c10d ProcessGroupNCCL: "[Rank %d] Watchdog caught collective operation timeout: ..." takes the process down.
    line = "(RayWorkerWrapper pid=9, ip=10.0.0.2) [rank1]:[E301 10:30:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 milliseconds before timing out.\n"
    snap = parse_log_text(READY + line)
    assert snap.outcome == "failed" and snap.failure is not None
    assert (snap.failure.kind, snap.failure.stage) == ("nccl", "serving")


def test_a_slurm_cancel_after_ready_is_a_stop() -> None:
    # slurmstepd: "*** JOB %u ON %s CANCELLED AT %s DUE TO TIME LIMIT ***" (and "*** STEP %u.%u ON ...").
    for line in ("slurmstepd: error: *** JOB 42 ON gpu07 CANCELLED AT 2026-03-01T12:00:00 DUE TO TIME LIMIT ***",
                 "slurmstepd: error: *** STEP 42.0 ON gpu07 CANCELLED AT 2026-03-01T12:00:00 ***"):
        snap = parse_log_text(READY + line + "\n")
        assert snap.outcome == "stopped" and snap.failure is None, line


def test_sigterm_while_starting_is_a_stop_not_a_failure() -> None:
    # api_server.py (0.6 - 0.9) signal_handler on SIGTERM during start-up: raise KeyboardInterrupt("terminated")
    log = (
        f"{_h('INFO', '10:00:00', 'api_server.py:1')}vLLM API server version 0.9.1\n"
        "Traceback (most recent call last):\n"
        '  File "/v/api_server.py", line 1, in signal_handler\n'
        '    raise KeyboardInterrupt("terminated")\n'
        "KeyboardInterrupt: terminated\n"
    )
    snap = parse_log_text(log)
    assert snap.outcome == "stopped" and snap.failure is None and snap.served_seconds is None
    # A Ctrl-C ("KeyboardInterrupt" alone) is not that handler: no verdict either way from it.
    assert parse_log_text(log.replace("KeyboardInterrupt: terminated", "KeyboardInterrupt")).outcome != "stopped"


def test_a_pydantic_detail_line_alone_is_a_config_error() -> None:
    # pydantic-core: "{msg} [type={error_type}, input_value={input}, input_type={type}]" (ModelConfig's ValueError)
    line = "Value error, User-specified max_model_len (9000) is greater than the derived max_model_len (max_position_embeddings=4096). [type=value_error, input_value=ArgsKwargs((), {'model': 'm'}), input_type=ArgsKwargs]\n"
    snap = parse_log_text(line)
    assert snap.failure is not None and (snap.failure.kind, snap.failure.stage) == ("config_error", "config")
    assert snap.failure.message.startswith("Value error, User-specified max_model_len")


def test_an_ipython_traceback_header_names_the_exception() -> None:
    # IPython ultratb: f"{etype:<{width}}Traceback (most recent call last)", the message only at the end.
    log = (
        "INFO 07-25 07:12:24 llm_engine.py:60] Initializing an LLM engine with config: model='m', tensor_parallel_size=1, seed=0)\n"
        "---------------------------------------------------------------------------\n"
        "RepositoryNotFoundError                   Traceback (most recent call last)\n"
        "Cell In[3], line 1\n"
    )
    snap = parse_log_text(log)
    assert snap.failure is not None and snap.failure.kind == "model_not_found"
    assert snap.failure.message.startswith("RepositoryNotFoundError")


def test_an_engine_cause_logged_after_the_death_still_wins() -> None:
    # Interleaved streams: the client's "died unexpectedly" can come before the EngineCore's own traceback.
    crash = (
        f"{_API} {_h('ERROR', '13:00:00', 'core_client.py:1')}Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.\n"
        f"{_EC} {_h('ERROR', '13:00:00', 'core.py:1')}RuntimeError: CUDA error: an illegal memory access was encountered\n"
        f"{_API} {_h('ERROR', '13:00:00', 'async_llm.py:1')}vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.\n"
    )
    snap = parse_log_text(READY + crash)
    assert snap.failure is not None and snap.failure.stage == "serving"
    assert "illegal memory access" in snap.failure.message
