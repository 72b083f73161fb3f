"""Failure diagnosis: which kind of startup failure a log line shows, and what a person should do.

Signatures come from vLLM's ``raise``/``logger.error`` format strings across 0.6 → 0.33 (see the
reference's §6) plus torch/NCCL/Ray/uvicorn texts. They are matched on the *message* (prefix and
header removed), most specific first. A kind's natural stage (placement for Ray placement errors,
compile for Inductor errors, ...) overrides the stage that happened to be running.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sparktui.domain.logs.keywords import KeywordFinder
from sparktui.domain.logs.patterns import word

FAILURE_KINDS = (
    "placement_timeout",
    "no_gpu_on_node",
    "ip_mismatch",
    "nccl",
    "oom",
    "kv_cache_insufficient",
    "free_memory_low",
    "compile",
    "model_not_found",
    "unsupported_architecture",
    "kernel_unsupported",
    "config_error",
    "port_in_use",
    "worker_died",
    "engine_timeout",
    "driver_mismatch",
    "attention_backend",
    "triton_ptxas",
    "jit_build",
    "ray_fatal",
    "unknown",
)


# argparse exits with "%(prog)s: error: %(message)s" (prog is e.g. "vllm serve" or "api_server.py").
ARGPARSE_ERROR = r"^[\w.\-]+(?: [\w.\-]+){0,3}: error: \S"
_ARGPARSE = re.compile(ARGPARSE_ERROR)
# pydantic's ValidationError puts the cause on an indented detail line after the exception line:
# "  Value error, <message> [type=value_error, input_value=..., input_type=...]" (vLLM 0.10+ configs are
# pydantic dataclasses, so a ValueError raised while building ModelConfig arrives this way).
PYDANTIC_DETAIL = ("Value error, ", "Assertion failed, ")
# pydantic-core's error line, "{msg} [type={type}, input_value={value}, input_type={type}]": the exception
# however the header above it was lost (a pasted detail line alone still says what failed).
_PYDANTIC_LINE = re.compile(r"(?:Value error|Assertion failed), .*\[type=\w+, input_value=")
# Re-raises that say the cause is above ("Worker failed with error '...', please check the stack trace
# above for the root cause", "Engine core initialization failed. See root cause above.", EngineDeadError's
# "EngineCore encountered an issue. See stack trace (above) for the root cause."): never the root cause
# while an earlier line explains it.
_WRAPPER = re.compile(r"(?:root cause|stack trace) \(?above\)?")


@dataclass(frozen=True, slots=True)
class Signature:
    kind: str
    keyword: str  # cheap pre-check: must be a substring of the message
    pattern: re.Pattern[str] | None = None


def _sig(kind: str, keyword: str, pattern: str | None = None) -> Signature:
    return Signature(kind, keyword, re.compile(pattern) if pattern else None)


# Ray lost a worker actor: its ActorDiedError ("The actor died unexpectedly ..."), or, when Ray cannot reach
# an actor whose node went away (Ray stopped there, link down), ActorUnavailableError, whose gRPC text names
# the address it tried ("... last error: UNKNOWN: ipv4:A:port: ..."). A worker_died of these has its own hint.
_RAY_ACTOR_LOST = ("ActorDiedError", "ActorUnavailableError", "The actor died")

# Order matters: the first signature that matches wins.
SIGNATURES: tuple[Signature, ...] = (
    _sig("port_in_use", "Address already in use"),
    _sig("port_in_use", "[Errno 98]"),
    _sig("placement_timeout", "Cannot provide a placement group"),
    _sig("ip_mismatch", "No available node types can fulfill",
         r"fulfill (?:resource|placement group) requests?.*'node:"),
    _sig("placement_timeout", "No available node types can fulfill"),
    _sig("ip_mismatch", "is not included in a placement group"),
    _sig("ip_mismatch", "Every node should have a unique IP address"),
    _sig("no_gpu_on_node", "Ray does not allocate any"),
    _sig("no_gpu_on_node", "has no ", r"Current node has no \w+ available"),
    _sig("no_gpu_on_node", "No CUDA GPUs are available"),
    _sig("no_gpu_on_node", "Failed to infer device type"),
    _sig("kv_cache_insufficient", "To serve at least one request with the model"),
    _sig("kv_cache_insufficient", "No available memory for the cache blocks"),
    _sig("kv_cache_insufficient", "stored in KV cache"),
    _sig("kv_cache_insufficient", "KV cache is needed, which is larger than"),
    _sig("free_memory_low", "on startup is less than desired"),
    _sig("oom", "out of memory"),
    _sig("oom", "OutOfMemoryError"),
    _sig("oom", "killed due to memory pressure"),  # Ray's OOM killer (host memory)
    _sig("nccl", "NCCL error"),
    _sig("nccl", "DistBackendError"),
    _sig("nccl", "DistNetworkError"),
    _sig("nccl", "DistStoreError"),  # torch rendezvous: "1/2 clients joined"
    _sig("nccl", "Failed to load NCCL library"),
    _sig("nccl", "nccl", word("nccl") + r"(?:SystemError|InternalError|UnhandledCudaError|RemoteError)\b"),
    # PyTorch c10d ProcessGroupNCCL.cpp (LOG(ERROR) behind a glog header, "[rank3]:[E219 ...]"):
    # "[Rank %d] Watchdog caught collective operation timeout: WorkNCCL(...) ran for %d milliseconds before
    # timing out.", "... Exception (either an error or timeout) detected by watchdog at work: %d, ...",
    # "ProcessGroupNCCL's watchdog got stuck for %d seconds ...", "Process group watchdog thread terminated
    # with exception: ...", "Some NCCL operations have failed or timed out. ...", "NCCL communicator was
    # aborted on rank %d."
    _sig("nccl", "Watchdog caught collective operation timeout"),
    _sig("nccl", "detected by watchdog"),
    _sig("nccl", "watchdog got stuck"),
    _sig("nccl", "watchdog thread terminated with exception"),
    _sig("nccl", "Some NCCL operations have failed or timed out"),
    _sig("nccl", "NCCL communicator was aborted"),
    _sig("engine_timeout", "Timed out waiting for engine core"),
    # Triton compiles each kernel's PTX with the ptxas it bundles (or TRITON_PTXAS_PATH); one older than the
    # GPU rejects its architecture: ptxas's "ptxas fatal   : Value '%s' is not defined for option 'gpu-name'",
    # which Triton raises as triton.runtime.errors.PTXASError ("PTXAS error: Internal Triton PTX codegen
    # error" + "`ptxas` stderr:" + ptxas's lines). Before "compile": Inductor re-raises it inside its own
    # errors.
    _sig("triton_ptxas", "is not defined for option 'gpu-name'"),
    _sig("triton_ptxas", "PTXASError"),
    # A JIT build of a CUDA extension at start-up (FlashInfer's kernels, torch.utils.cpp_extension): ninja's
    # "ninja: build stopped: subcommand failed.", FlashInfer's jit/cpp_ext.py "RuntimeError: Ninja build
    # failed." (0.2.x+) and torch's cpp_extension "RuntimeError: Error building extension '%s'".
    _sig("jit_build", "subcommand failed", r"ninja: build stopped: subcommand failed"),
    _sig("jit_build", "Ninja build failed"),
    _sig("jit_build", "Error building extension"),
    _sig("compile", "vLLM failed to compile the model"),
    _sig("compile", "BackendCompilerFailed"),
    _sig("compile", "InductorError"),
    _sig("compile", "Triton compilation failed"),
    _sig("compile", "Failed to run autotuning"),
    _sig("compile", "torch._dynamo.exc"),
    # The attention backend selector (platforms/cuda.py get_attn_backend_cls, 0.11+): "Selected backend %s is
    # not valid for this configuration. Reason: %s" (--attention-backend / VLLM_ATTENTION_BACKEND given) and
    # "No valid attention backend found for %s with %s. Reasons: %s." (none fits); attention/selector.py
    # (<= 0.10): "Invalid attention backend: '%s'. Valid backends are: %s". Before kernel_unsupported: the
    # reasons may say "... not supported on this device".
    _sig("attention_backend", "No valid attention backend found"),
    _sig("attention_backend", "is not valid for this configuration",
         r"Selected backend \S+ is not valid for this configuration"),
    _sig("attention_backend", "Invalid attention backend"),
    _sig("kernel_unsupported", "Failed to find a kernel that can implement"),
    _sig("kernel_unsupported", "no kernel image is available"),
    _sig("kernel_unsupported", "not supported on this", r"not supported on this (?:GPU|device|platform)"),
    _sig("kernel_unsupported", "No compiled cutlass"),
    # Triton's OutOfResources: "out of resource: {name}, Required: {required}, Hardware limit: {limit}.
    # Reducing block sizes or `num_stages` may help." (class triton.runtime.errors.OutOfResources)
    _sig("kernel_unsupported", "out of resource: "),
    _sig("kernel_unsupported", "OutOfResources"),
    # HIP's hipErrorInvalidKernelFile / hipErrorNoBinaryForGpu ("HIP error: invalid kernel file",
    # "no kernel image is available" on ROCm too) and CUDA's cudaErrorInvalidDeviceFunction.
    _sig("kernel_unsupported", "invalid kernel file"),
    _sig("kernel_unsupported", "invalid device function"),
    # CUDA_ERROR_INVALID_IMAGE / cudaErrorInvalidKernelImage: "device kernel image is invalid" (a cubin built
    # for another architecture, as Triton reports it: "Triton Error [CUDA]: device kernel image is invalid").
    _sig("kernel_unsupported", "kernel image is invalid"),
    # CUDA runtime vs driver: cudaErrorSystemDriverMismatch 803 ("system has unsupported display driver /
    # cuda driver combination"), cudaErrorCompatNotSupportedOnDevice 804 ("forward compatibility was attempted
    # on non supported HW"), cudaErrorInsufficientDriver 35 ("CUDA driver version is insufficient for CUDA
    # runtime version"), torch's "The NVIDIA driver on your system is too old (found version %d)."
    _sig("driver_mismatch", "unsupported display driver / cuda driver combination"),
    _sig("driver_mismatch", "Error 803"),
    _sig("driver_mismatch", "forward compatibility was attempted on non supported HW"),
    _sig("driver_mismatch", "CUDA driver version is insufficient"),
    _sig("driver_mismatch", "driver on your system is too old"),
    # Ray's RAY_CHECK / RAY_LOG(FATAL) (src/ray/util/logging.cc): "Check failed: %s" at the fatal level, then
    # Ray aborts the process (its "*** SIGABRT received at time=%d ***" follows).
    _sig("ray_fatal", "Check failed", r"^Check failed\b|\] [\w./-]+:\d+: Check failed\b"),
    _sig("unsupported_architecture", "are not supported for now"),
    _sig("unsupported_architecture", "Error in inspecting model architecture"),
    _sig("unsupported_architecture", "Cannot find model module"),
    _sig("unsupported_architecture", "failed to be inspected"),
    _sig("unsupported_architecture", "does not recognize this architecture"),
    _sig("model_not_found", "Invalid repository ID or local directory"),
    _sig("model_not_found", "RepositoryNotFoundError"),
    _sig("model_not_found", "GatedRepoError"),
    _sig("model_not_found", "gated repo"),
    _sig("model_not_found", "LocalEntryNotFoundError"),
    _sig("model_not_found", "Repo id must"),
    _sig("model_not_found", "is not a valid model identifier"),
    _sig("model_not_found", "does not appear to have a file named config.json"),
    _sig("worker_died", "died unexpectedly"),
    *(_sig("worker_died", keyword) for keyword in _RAY_ACTOR_LOST),
    _sig("worker_died", "EngineDeadError"),
    _sig("worker_died", "worker died or was killed"),
    # V0 multiproc_worker_utils: "Worker %s pid %s died, exit code: %s" (a negative code is the signal).
    _sig("worker_died", "died, exit code", word("Worker") + r" \S+ pid \d+ died, exit code"),
    # A crash in native code: CPython's faulthandler ("Fatal Python error: %s"), the shell's report.
    _sig("worker_died", "Fatal Python error"),
    _sig("worker_died", "Segmentation fault"),
    # Ray's failure signal handler in a worker (absl's, through src/ray/util/logging.cc): "*** SIGSEGV
    # received at time=%d on cpu %d ***" (then "PC: @ ..." frames); Ray's prefix names the worker's node.
    _sig("worker_died", "SIGSEGV received"),
    _sig("config_error", "validation error for"),
    _sig("config_error", "Value error, ", r"\[type=value_error, input_value="),  # pydantic's detail line
    _sig("config_error", "unrecognized arguments"),
    _sig("config_error", "error: argument"),
    # argparse's ``ArgumentParser.error``: "%(prog)s: error: %(message)s" (``vllm serve: error: ...``).
    _sig("config_error", ": error: ", ARGPARSE_ERROR),
)

# Lines that say "startup failed" without saying why: they make a failure certain, but the root cause
# is elsewhere (earlier in a worker/EngineCore traceback).
_MARKERS = re.compile(
    r"EngineCore failed to start|Engine core initialization failed|Engine process failed to start"
    r"|Application startup failed|WorkerProc (?:failed to start|hit an exception)"
    r"|Error executing method|EngineCore encountered a fatal error|Ray workers have not started"
    r"|Worker \d+ failed to initialize|RayWorkerProc failed|RayTaskError|Frontend process failed"
    r"|died unexpectedly|EngineDeadError|worker died or was killed|killed due to memory pressure"
    r"|Worker failed with error|Fatal Python error|Segmentation fault|SIGSEGV received"
)
# A Python exception line: ``ValueError: ...``, ``torch._inductor.exc.InductorError: ...``,
# ``ray.exceptions.RayTaskError(ValueError): ...``, uvicorn/autoscaler ``Error: ...``.
_EXCEPTION = re.compile(
    r"(?:[A-Za-z_][\w.]*)?(?:Error|Exception|Exit|Interrupt)(?:\([\w.]*\))?: \S"
    # A qualified class whose name says nothing: ``triton.runtime.errors.OutOfResources: out of resource``,
    # ``torch._dynamo.exc.Unsupported: ...`` (traceback.format_exception_only: "module.QualName: message").
    r"|[a-z_][\w]*(?:\.[a-z_][\w]*)+\.[A-Z]\w*: \S"
    # IPython / Jupyter (ultratb) head a traceback with the class padded to a column: "LocalEntryNotFoundError
    # <spaces> Traceback (most recent call last)" (the message comes last, often cut off a paste).
    r"|[A-Za-z_][\w.]*(?:Error|Exception)\s{2,}Traceback \(most recent call last\)"
)
_CONFIG_EXCEPTION = re.compile(r"(?:[\w.]*\.)?(?:ValueError|TypeError|KeyError|NotImplementedError|"
                               r"ValidationError|AssertionError)\b")
# Errors that end a serving engine (after "ready" only these flip the outcome).
# c10d's watchdog takes the process down on a collective timeout ("Watchdog caught collective operation
# timeout: ...", then "To avoid data inconsistency, we are taking the entire process down."): fatal too.
FATAL_AFTER_READY = re.compile(r"died unexpectedly|EngineDeadError|EngineCore encountered a fatal error"
                               r"|Engine core proc \S+ died|ActorDiedError"
                               r"|Watchdog caught collective operation timeout"
                               r"|taking the entire process down")

_DISK_FULL = ("Disk quota", "No space left")

KIND_STAGE = {
    "placement_timeout": "placement",
    "ip_mismatch": "placement",
    "no_gpu_on_node": "placement",
    "kv_cache_insufficient": "kv_cache",
    "compile": "compile",
    "config_error": "config",
    "model_not_found": "config",
    "unsupported_architecture": "config",
    # The attention backend is chosen while the model is built (load_model -> Attention.__init__).
    "attention_backend": "weights",
    # Triton and FlashInfer build a kernel on its first call: the profile run that sizes the KV cache is
    # where a start first calls them (unless torch.compile or a warm-up did: the running stage then).
    "triton_ptxas": "kv_cache",
    "jit_build": "kv_cache",
    # Ray's core worker links the engine to its workers; a fatal check with no stage under way is there.
    "ray_fatal": "distributed",
}
# Kinds whose natural stage is only a default: the running stage wins when there is one.
_STAGE_IF_NONE = {"model_not_found", "unsupported_architecture", "port_in_use", "attention_backend",
                  "triton_ptxas", "jit_build", "ray_fatal"}
# A missing GPU is a placement failure when Ray says so ("Ray does not allocate any GPUs on the driver
# node", "Current node has no GPU available. current_node_resource=..."); without Ray it shows in an mp
# worker's init_device ("No CUDA GPUs are available") or the API server's platform detection ("Failed to
# infer device type"): wherever the log is.
_RAY_PLACEMENT_WORDS = re.compile(r"\bRay\b|current_node_resource|placement group|driver node")


# NCCL reports a CUDA call that failed under it: "NCCL error ...: unhandled cuda error (run with
# NCCL_DEBUG=INFO for details)" / "ncclUnhandledCudaError: Call to CUDA function failed.", then "Last error:"
# and NCCL's "Cuda failure '%s'" with cudaGetErrorString. The CUDA error is the cause: these kinds replace
# the nccl one.
_NCCL_CUDA_SYMPTOM = re.compile(r"unhandled cuda error|ncclUnhandledCudaError", re.I)
_CUDA_CAUSES = frozenset({"driver_mismatch", "oom", "kernel_unsupported"})


# A worker's death is what the parent process sees; the worker's own lines (printed before or, buffered,
# after it) give the cause.
SYMPTOM_KINDS = frozenset({"worker_died"})


def refines(kind: str | None, old_kind: str, old_message: str) -> bool:
    """A later line names the cause of an earlier failure that was only its symptom."""
    if kind is None or kind == old_kind:
        return False
    if old_kind in SYMPTOM_KINDS:
        return kind not in SYMPTOM_KINDS
    return kind in _CUDA_CAUSES and old_kind == "nccl" and _NCCL_CUDA_SYMPTOM.search(old_message) is not None


# Which signatures' keywords a message holds, in one pass (79 ``in`` tests were most of what an error
# line cost).
_SIGNATURE_FINDER = KeywordFinder(sig.keyword for sig in SIGNATURES)


def classify(message: str, stage: str | None = None) -> str | None:
    """The specific failure kind a message shows, or None: the first signature, in table order, whose
    keyword the message holds and whose pattern (if any) it matches. ``stage`` is the stage under way: a
    full disk is a compile failure while compiling (the Inductor cache), not while downloading weights."""
    found = _SIGNATURE_FINDER.find(message)
    if found:
        for sig in SIGNATURES:
            if sig.keyword in found and (sig.pattern is None or sig.pattern.search(message)):
                return sig.kind
    if stage == "compile" and any(word in message for word in _DISK_FULL):
        return "compile"
    return None


def is_marker(message: str) -> bool:
    return _MARKERS.search(message) is not None


def is_exception_line(message: str) -> bool:
    text = message.lstrip()
    return (_EXCEPTION.match(text) is not None or _ARGPARSE.match(text) is not None
            or _PYDANTIC_LINE.match(text) is not None)


def is_wrapper(message: str) -> bool:
    """A re-raise that points at an earlier root cause."""
    return _WRAPPER.search(message) is not None


def is_pydantic_detail(message: str) -> bool:
    return message.lstrip().startswith(PYDANTIC_DETAIL)


def is_config_exception(message: str) -> bool:
    return _CONFIG_EXCEPTION.match(message.lstrip()) is not None


# F5: "Error executing method 'load_model'" names the worker call that failed, hence the stage.
_METHOD = re.compile(r"Error executing method '?(\w+)")
_METHOD_STAGE = {
    "init_device": "distributed",
    "init_worker": "distributed",
    "load_model": "weights",
    "determine_available_memory": "kv_cache",
    "determine_num_available_blocks": "kv_cache",
    "get_kv_cache_spec": "kv_cache",
    "initialize_from_config": "kv_cache",
    "initialize_cache": "kv_cache",
    "compile_or_warm_up_model": "cuda_graphs",
}


def method_stage(message: str) -> str | None:
    m = _METHOD.search(message)
    return _METHOD_STAGE.get(m.group(1)) if m else None


#: The stage of a failure nothing points at (a pasted snippet: no stage ran, no frame names one).
UNKNOWN_STAGE = "unknown"


def failure_stage(kind: str, running: str | None, message: str = "") -> str:
    if kind == "no_gpu_on_node" and running is not None and not _RAY_PLACEMENT_WORDS.search(message):
        return running
    natural = KIND_STAGE.get(kind)
    if natural is not None and kind not in _STAGE_IF_NONE:
        return natural
    return running or natural or UNKNOWN_STAGE


# A traceback frame, CPython's format ``  File "%s", line %d, in %s``: the function names what was running.
FRAME = re.compile(r'^\s*File "[^"]*", line \d+, in (?P<func>[\w<>]+)')
# vLLM's worker and model-runner methods by stage (gpu_worker.py, gpu_model_runner.py, worker.py (V0),
# model_loader/*), and torch.cuda.graphs' capture. A keyword per name lets the bulk reader find raw frames.
FRAME_STAGE = {
    "init_device": "distributed", "init_worker_distributed_environment": "distributed",
    "init_distributed_environment": "distributed", "initialize_model_parallel": "distributed",
    "ensure_model_parallel_initialized": "distributed",
    "load_model": "weights", "get_model": "weights", "load_weights": "weights", "initialize_model": "weights",
    "download_model": "weights", "process_weights_after_loading": "weights",
    "determine_available_memory": "kv_cache", "determine_num_available_blocks": "kv_cache",
    "profile_run": "kv_cache", "profile_cudagraph_memory": "kv_cache", "get_kv_cache_spec": "kv_cache",
    "initialize_kv_cache": "kv_cache", "initialize_cache": "kv_cache", "_initialize_kv_caches": "kv_cache",
    "compile_or_warm_up_model": "cuda_graphs", "capture_model": "cuda_graphs",
    # V1 compiles inside the first dummy run of profile_run: Inductor's own frames (torch/_inductor/
    # compile_fx.py) put an error there in compile, not in the KV-cache sizing around it.
    "compile_fx": "compile", "compile_fx_inner": "compile", "_compile_fx_inner": "compile",
    "fx_codegen_and_compile": "compile",
    # compile_or_warm_up_model's kernel warm-up (model_executor/warmup/kernel_warmup.py) is the engine's
    # "warmup model" step, not a CUDA-graph capture (it runs under --enforce-eager too).
    "kernel_warmup": "engine",
    "_capture_cudagraphs": "cuda_graphs", "capture_begin": "cuda_graphs", "capture_end": "cuda_graphs",
}
# Memory profiling may capture graphs to measure them (0.18+ profile_cudagraph_memory): a capture frame
# inside one of these is still the KV-cache stage.
_PROFILING_FRAMES = frozenset({"determine_available_memory", "determine_num_available_blocks", "profile_run",
                               "profile_cudagraph_memory"})
FRAME_KEYWORDS: tuple[str, ...] = tuple(f", in {func}" for func in FRAME_STAGE)


def frame_func(message: str) -> str | None:
    m = FRAME.match(message)
    return m.group("func") if m else None


def frames_stage(funcs: list[str]) -> str | None:
    """The stage a traceback's frames (outermost first) point at: the innermost frame vLLM names."""
    stage: str | None = None
    profiling = False
    for func in funcs:
        st = FRAME_STAGE.get(func)
        if st is None:
            continue
        if func in _PROFILING_FRAMES:
            profiling = True
        stage = "kv_cache" if profiling and st == "cuda_graphs" else st
    return stage


_NODE_BUNDLE = re.compile(r"'node:([^']+)'")
# The address of a Ray actor in Ray's errors: ActorDiedError lists "ip: A", gRPC's failure "ipv4:A:port".
_ACTOR_ADDRESS = re.compile(r"\bip: (\d{1,3}(?:\.\d{1,3}){3})\b|\bipv4:(\d{1,3}(?:\.\d{1,3}){3}):")
_GPU_BUNDLE = re.compile(r"'(GPU|NPU)': ([\d.]+)")

_HINTS = {
    "placement_timeout": (
        "Ray could not reserve {need}GPU bundles for vLLM's placement group. Run `ray status` on the "
        "head: how many GPUs does Ray see in total (vLLM needs {need_or}of them)? Is the worker node's "
        "Ray container up and joined? Does VLLM_HOST_IP on each node match the IP Ray registered for "
        "that node (`ray list nodes`)?"
    ),
    "ip_mismatch": (
        "Ray cannot place the bundle pinned to {where}: no Ray node with that IP has a free GPU. Make "
        "VLLM_HOST_IP (and ray start --node-ip-address) on each node the address Ray shows in "
        "`ray list nodes`, and check that Ray sees a GPU on the head node (`ray status`)."
    ),
    "no_gpu_on_node": (
        "The node running the engine has no {dev} that Ray can give to vLLM{seen}. Check that "
        "`ray status` shows the GPUs of every node (start Ray inside the GPU container, --num-gpus) and "
        "that `vllm serve` runs on a node with a GPU."
    ),
    "ip_mismatch_same_ip": (
        "Two Ray nodes registered the same IP address, so vLLM cannot tell them apart. Start Ray on each "
        "node with that node's own address (ray start --node-ip-address) and set VLLM_HOST_IP to the same "
        "address on each node; check `ray list nodes`."
    ),
    "oom_ray_monitor": (
        "Ray's memory monitor killed a worker because the node ran low on memory during {stage}. On "
        "unified-memory Sparks GPU and host memory are one pool: lower --gpu-memory-utilization, drop the "
        "page cache (echo 3 > /proc/sys/vm/drop_caches), stop other processes, or raise Ray's threshold "
        "(RAY_memory_usage_threshold) on that node."
    ),
    "no_gpu_visible": (
        "No GPU is visible to vLLM here. Check that the container runs with the GPU (--gpus all / the "
        "nvidia runtime), CUDA_VISIBLE_DEVICES, and that nvidia-smi works inside it."
    ),
    "nccl": (
        "NCCL failed between the ranks. Check that NCCL_SOCKET_IFNAME / NCCL_IB_HCA name the RoCE link "
        "on every node, that the nodes reach each other on it, that both run the same NCCL, and rerun "
        "with NCCL_DEBUG=INFO to see the failing call."
    ),
    "oom": (
        "Out of GPU memory during {stage}. Lower --gpu-memory-utilization, --max-model-len or "
        "--max-num-seqs{eager}; on unified-memory Sparks drop the page cache "
        "(echo 3 > /proc/sys/vm/drop_caches) and stop other GPU processes first."
    ),
    "kv_cache_insufficient": (
        "The memory left after the weights is too small for one request at this max length. Raise "
        "--gpu-memory-utilization or lower --max-model-len (the message gives vLLM's estimate of the "
        "largest length that fits)."
    ),
    "free_memory_low": (
        "Less GPU memory was free at startup than --gpu-memory-utilization asks for. Something else "
        "holds it (another vLLM, a stale container, page cache on unified memory): stop it, drop "
        "caches, or lower --gpu-memory-utilization."
    ),
    "compile_disk": (
        "torch.compile could not write its cache: the disk is full or over quota. Free space, or point "
        "VLLM_CACHE_ROOT (and TORCHINDUCTOR_CACHE_DIR) at a larger disk; --enforce-eager skips "
        "compilation."
    ),
    "compile": (
        "torch.compile / Inductor failed. Remove ~/.cache/vllm/torch_compile_cache (a corrupt "
        "artifact is the usual cause) and retry, or start with --enforce-eager to skip compilation."
    ),
    "model_not_found": (
        "vLLM cannot find the model. Check the model path or Hugging Face repo id, that the model "
        "directory is mounted into the container on every node, and HF_TOKEN for gated repos."
    ),
    "unsupported_architecture": (
        "This vLLM build cannot load the model's architecture. Use a newer vLLM image (or the one "
        "the model card names), and check --trust-remote-code and the architectures in config.json."
    ),
    "kernel_unsupported": (
        "No kernel in this vLLM build implements the model's quantization on this GPU (GB10 is "
        "sm_121). Use an image built for this GPU, another quantization of the model, or the switch "
        "the message suggests."
    ),
    "kernel_unsupported_smem": (
        "A Triton kernel asked for more shared memory per block than this GPU has (the message gives "
        "both). GB10 (sm_121, like other consumer Blackwell parts) has far less than an H100/B200, so "
        "kernels tuned for those do not fit: use an image whose kernels are tuned for sm_121, another "
        "attention/MoE backend, or a smaller block size / num_stages where the model allows it."
    ),
    "kernel_unsupported_arch": (
        "This build has no GPU code for this GPU's architecture (GB10 is sm_121, compute capability "
        "12.1). Use a vLLM/PyTorch image compiled for it (TORCH_CUDA_ARCH_LIST with 12.1, CUDA 12.9+), "
        "not one built only for sm_80/sm_90/sm_100."
    ),
    "kernel_unsupported_hip": (
        "The ROCm build has no kernels for this GPU's gfx target. Use a ROCm image built for this GPU "
        "(PYTORCH_ROCM_ARCH), or set HSA_OVERRIDE_GFX_VERSION only if the GPU is a close relative."
    ),
    "driver_mismatch": (
        "The CUDA runtime in the image and the host's NVIDIA driver do not fit (CUDA error 803/804: the "
        "image needs a newer driver, or its forward-compatibility libraries do not support this GPU). "
        "`nvidia-smi` on the host shows the highest CUDA version its driver supports: use an image "
        "built for it (on DGX Spark, GB10/sm_121, one made for the DGX OS driver) or update the driver."
    ),
    "config_error": (
        "vLLM rejected the configuration before the engine started. Fix the flag or value the "
        "message names."
    ),
    "port_in_use": (
        "The API port is already taken (an earlier vLLM still running?). Stop it or change the "
        "serving port."
    ),
    "worker_died": (
        "A vLLM worker process died{on}. Look at the lines just before for its cause (OOM killer, "
        "segfault, NCCL abort); on {that_node} check `dmesg` and "
        "/tmp/ray/session_latest/logs/worker-*.err."
    ),
    "attention_backend": (
        "No attention backend in this vLLM supports this model on this GPU with these settings (the "
        "message lists each backend's reasons). Do not force one: drop --attention-backend / "
        "VLLM_ATTENTION_BACKEND and let vLLM choose, and check --kv-cache-dtype and --block-size, the usual "
        "cause on GB10 (sm_121), where fewer backends exist than on H100/B200; or use a newer vLLM image."
    ),
    "attention_backend_selected": (
        "The attention backend you selected (--attention-backend / VLLM_ATTENTION_BACKEND) does not "
        "support this GPU, model or dtype (the reason is in the message). Remove the setting and let vLLM "
        "choose, or pick a backend that supports it (on GB10, sm_121: FLASHINFER or TRITON_ATTN)."
    ),
    "triton_ptxas": (
        "Triton's ptxas is too old for this GPU's architecture (GB10 is sm_121a; the ptxas that Triton "
        "3.5 and older bundle does not know it), so no Triton kernel can be built. Set "
        "TRITON_PTXAS_PATH to CUDA 13's ptxas (e.g. /usr/local/cuda/bin/ptxas) in the container on every "
        "node, or use an image whose Triton knows sm_121."
    ),
    "jit_build": (
        "A kernel library (FlashInfer) compiles CUDA kernels at start-up (JIT) and the build failed; "
        "the ninja/nvcc lines before it say why. Check that the image has a CUDA toolkit (nvcc) new "
        "enough for this GPU (GB10, sm_121, needs CUDA 12.9 or newer) and room in ~/.cache/flashinfer, "
        "use an image with FlashInfer's kernels prebuilt for sm_121 (flashinfer-jit-cache), or avoid "
        "the kernel (another --attention-backend, VLLM_USE_FLASHINFER_SAMPLER=0)."
    ),
    "ray_fatal": (
        "Ray aborted a vLLM process{on} on a failed internal check (RAY_CHECK): that process, and with it "
        "the engine, is gone. It usually follows a lost Ray node or GCS connection, or Ray versions that "
        "differ between nodes: run `ray status`, check that every node runs the same image, read "
        "/tmp/ray/session_latest/logs/ on {that_node}, then restart the engine."
    ),
    "worker_died_ray": (
        "Ray lost a vLLM worker actor{on}: its node stopped answering Ray (Ray stopped or restarted "
        "there, the node left the cluster, the link between the nodes dropped, or the worker was "
        "killed). Run `ray status` on the head; on that node check that its Ray container is up, "
        "`dmesg` for the OOM killer, and /tmp/ray/session_latest/logs/raylet.out."
    ),
    "engine_timeout": (
        "The API server gave up waiting for the engine (VLLM_ENGINE_READY_TIMEOUT_S, 600 s by "
        "default), usually because weights are still loading: raise the timeout or pre-download the "
        "weights to a local disk."
    ),
    "unknown_disk": "A disk is full or over quota. Free space on the volume the message names and restart.",
    "unknown": (
        "vLLM failed{during}; the message is the first error line. Read the lines around it "
        "in the log."
    ),
}


_NO_ARCH_CODE = ("no kernel image", "invalid device function", "kernel image is invalid")


def hint_for(kind: str, message: str, stage: str, facts: dict[str, object], node: str | None = None) -> str:
    """A sentence a person can act on, with the numbers the log gives. ``node``: the node the failure names
    (:func:`failure_node`), if any."""
    tp = facts.get("tensor_parallel_size")
    pp = facts.get("pipeline_parallel_size") or 1
    need = f"{tp * pp} " if isinstance(tp, int) and isinstance(pp, int) else ""
    bundle = _NODE_BUNDLE.search(message)
    seen = ", ".join(f"{k}: {v}" for k, v in _GPU_BUNDLE.findall(message))
    disk = any(word in message for word in _DISK_FULL)
    key = kind
    if kind in ("compile", "unknown") and disk:
        key = f"{kind}_disk"
    elif kind == "ip_mismatch" and "unique IP address" in message:
        key = "ip_mismatch_same_ip"
    elif kind == "worker_died" and any(text in message for text in _RAY_ACTOR_LOST):
        key = "worker_died_ray"
    elif kind == "oom" and ("memory pressure" in message or "running low on memory" in message):
        key = "oom_ray_monitor"
    elif kind == "no_gpu_on_node" and not _RAY_PLACEMENT_WORDS.search(message):
        key = "no_gpu_visible"
    elif kind == "kernel_unsupported":
        if "out of resource" in message or "OutOfResources" in message:
            key = "kernel_unsupported_smem"
        elif "HIP" in message or "hip" in message or "invalid kernel file" in message:
            key = "kernel_unsupported_hip"
        elif any(text in message for text in _NO_ARCH_CODE):
            key = "kernel_unsupported_arch"
    elif kind == "attention_backend" and "Selected backend" in message:
        key = "attention_backend_selected"
    template = _HINTS.get(key, _HINTS["unknown"])
    hint = template.format(
        need=need,
        need_or=need or "TP x PP ",
        where=f"node:{bundle.group(1)}" if bundle else "the driver's node",
        dev="NPU" if "NPU" in message else "GPU",
        seen=f" (Ray lists {seen} there, so the resource name does not match)" if seen else "",
        stage=stage,
        on=f" on {node}" if node else _actor_on(message),
        that_node=node or "the node it ran on",
        during=f" during {stage}" if stage != UNKNOWN_STAGE else "",
        eager=", or use --enforce-eager to skip CUDA-graph memory" if stage == "cuda_graphs" else "",
    )
    detail = continuation_detail(message)
    if detail and key != "worker_died_ray":  # Ray's context lines: the hint already names the address
        hint += f" vLLM says: {detail}"
    return hint


# An IPv4 address in a failure's text: the raylet's "Worker IP address: %s", ActorDiedError's "ip: %s", a
# RayTaskError's "(pid=%d, ip=%s, ...)", the memory monitor's "(IP: %s, ID: %s)", gRPC's "ipv4:%s:%d", NCCL's
# and torch's "tcp://%s:%d". Loopback and the unspecified address name no node.
_OCTET = r"(?:25[0-5]|2[0-4]\d|1?\d?\d)"
_IPV4 = re.compile(rf"(?<![\d.])({_OCTET}(?:\.{_OCTET}){{3}})(?![\d.]*\d)")
_NO_NODE = ("0.", "127.", "255.")


# A collective fails on every rank at once: the rank that says so first is not where the fault is.
_NODE_FROM_TEXT_ONLY = frozenset({"nccl"})


def failure_node(message: str, logged_on: str | None, kind: str = "") -> str | None:
    """The node a failure happened on, as an IP: the first node address its text carries (a remote worker's
    crash report names the worker's node), else the Ray ``ip=`` of the process that logged it (None: the head,
    or a log without Ray prefixes; and for an NCCL failure, which every rank reports)."""
    if "." in message:
        for m in _IPV4.finditer(message):
            if not m.group(1).startswith(_NO_NODE):
                return m.group(1)
    return None if kind in _NODE_FROM_TEXT_ONLY else logged_on


def is_ray_fatal(level: str | None, source_file: str | None) -> bool:
    """A line of Ray's C++ logger at its fatal level (RAY_CHECK, RAY_LOG(FATAL)): Ray aborts the process that
    printed it. (:mod:`.line` reads Ray's ``[date time,ms C pid tid] file.cc:N:`` header into the record.)"""
    return level == "CRITICAL" and source_file is not None and ".cc:" in source_file


def _actor_on(message: str) -> str:
    m = _ACTOR_ADDRESS.search(message)
    return f" on {m.group(1) or m.group(2)}" if m else ""


# A message that announces detail on the lines after it: vLLM's "Failed to find a kernel that can implement
# the WNA16 linear layer. Reasons: \n" + "\n".join(reasons), or a sentence ending in "please set" / "set" +
# colon. Ray's ActorDiedError ("The actor died unexpectedly before finishing this task.") goes on with the
# actor's context, one "\tkey: value" line each (class_name, actor_id, pid, ip). The stage machine appends
# those lines to the message (see Timeline); the hint quotes them.
# Triton's PTXASError goes on with "`ptxas` stderr:" and ptxas's own lines (which name the architecture).
_ANNOUNCES = re.compile(r"Reasons:\s*$|[Pp]lease set\b[^.]*$|:\s*$|ActorDiedError\)?: The actor died"
                        r"|PTXASError: ")


def announces_detail(message: str) -> bool:
    return _ANNOUNCES.search(message) is not None


def continuation_detail(message: str) -> str:
    """The lines a multi-line message carried after its first line (joined by " | "), or ""."""
    if "\n" not in message:
        return ""
    return " | ".join(part.strip() for part in message.split("\n")[1:] if part.strip())
