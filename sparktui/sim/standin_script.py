"""What the stand-in engine prints, and when: a recorded vLLM log turned into a paced replay plan.

Pure code (no Ray, no I/O): the stand-in process (`vllm_standin`) executes the plan. Kept apart so the
rewriting, pacing and failure wording can be unit-tested without a cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from sparktui.sim.recording import VERSION_STATEMENT, RecordedLine

# Recorded gaps longer than this (a 90-minute download, a 3-minute weight load) are shortened before
# scaling, so the replay keeps the shape of the start-up instead of spending the whole pace on one gap.
MAX_RECORDED_GAP_SECONDS = 30.0

_RAY_CONNECT = re.compile(
    r"Connecting to existing Ray cluster|Connected to Ray cluster|Started a local Ray instance"
)
_PG_CREATE = re.compile(r"No current placement group found|Using the existing placement group")
_DIST = re.compile(r"NCCL|nccl|world_size=|in world size|\[Gloo\]")
_WEIGHTS_START = re.compile(r"Starting to load model|Loading model from scratch")
_WEIGHTS_END = re.compile(r"Model loading took|Loading model weights took|Loading weights took")
_KV = re.compile(
    r"Memory profiling takes|Available KV cache memory|# \w+ blocks:|KV cache size:"
    r"|Profiling CUDA graph memory"
)
_ENGINE_INIT = re.compile(r"Initializing an? (?:V[01] )?LLM engine")
_READY = re.compile(r"Application startup complete\.")
_ROUTE = re.compile(r"Route: |Available routes are|Starting vLLM (?:API )?server")

_VLLM_STAMP = re.compile(r"\b(DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d ")
_RAY_STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}")
_VLLM_PROC = re.compile(r"\((APIServer|ApiServer_\d+|EngineCore(?:_\w+)?) pid=\d+\)")
_API_PREFIX = re.compile(r"^(\(APIServer pid=\d+\) )")
_MODEL_INIT = re.compile(r"with config: model='([^']+)'")
_MODEL_LOAD = re.compile(r"Starting to load model (\S+?)\.\.\.")
_SERVED = re.compile(r"'served_model_name': \['([^']+)'")
_BLOCKS = re.compile(
    r"# (?:cuda|GPU) blocks: (\d+)|num_gpu_blocks is: (\d+)|GPU KV cache size: ([\d,]+) tokens"
)
_MAX_LEN = re.compile(r"max_seq_len=(\d+)")


@dataclass(frozen=True)
class Anchors:
    """Indices into the recorded lines where the stand-in does something real (or fails)."""

    pg_create: int
    dist: int | None
    weights_start: int | None
    weights_end: int | None
    kv: int | None
    ready: int | None
    end: int
    """One past the last start-up line replayed (the ready line, or the end of the capture)."""


@dataclass(frozen=True)
class Dialect:
    version: str
    v1: bool
    api_prefix: str
    """vLLM's process prefix on API-server lines in this version's output ("(APIServer pid=N) " or "")."""
    engine_prefix: str
    recorded_model: str | None
    recorded_served_name: str | None
    recorded_max_len: int | None
    recorded_gpu_blocks: int | None = None


def find_anchors(lines: list[RecordedLine]) -> Anchors:
    def first(pattern: re.Pattern[str], start: int = 0) -> int | None:
        for i in range(start, len(lines)):
            if pattern.search(lines[i].text):
                return i
        return None

    pg = first(_PG_CREATE)
    if pg is None:
        connect = first(_RAY_CONNECT)
        first_worker = next((i for i, line in enumerate(lines) if line.role == "worker"), None)
        engine_init = first(_ENGINE_INIT)
        if connect is not None:
            pg = connect
        elif first_worker is not None:
            pg = first_worker
        else:
            # A capture without Ray (mp executor): vLLM with Ray would create the group right after the
            # engine core starts.
            pg = engine_init + 1 if engine_init is not None else 0
    ready = first(_READY)
    if ready is None:
        # Captures without uvicorn's lines (vLLM ≥0.31 prints them unprefixed to stderr): the API is up
        # after the last route line; the stand-in prints uvicorn's lines itself there.
        routes = [i for i, line in enumerate(lines) if _ROUTE.search(line.text)]
        end = routes[-1] + 1 if routes else len(lines)
    else:
        end = ready + 1
    weights_start = first(_WEIGHTS_START, pg)
    return Anchors(
        pg_create=pg,
        dist=first(_DIST, pg),
        weights_start=weights_start,
        weights_end=first(_WEIGHTS_END, weights_start) if weights_start is not None else None,
        kv=first(_KV, pg),
        ready=ready,
        end=end,
    )


def detect_dialect(lines: list[RecordedLine]) -> Dialect:
    version = "0.0.0"
    model = served = None
    max_len = None
    v1 = True
    api_prefix = engine_prefix = ""
    for line in lines:
        text = line.text
        if version == "0.0.0" and (m := VERSION_STATEMENT.search(text)):
            version = m.group(1)
        if "Initializing a V0 LLM engine" in text or "Initializing an LLM engine" in text:
            v1 = False
        if model is None and (m := _MODEL_INIT.search(text) or _MODEL_LOAD.search(text)):
            model = m.group(1)
        if served is None and (m := _SERVED.search(text)):
            served = m.group(1)
        if max_len is None and (m := _MAX_LEN.search(text)):
            max_len = int(m.group(1))
        if not api_prefix and (m := _API_PREFIX.match(text)):
            api_prefix = "(APIServer pid={pid}) "
        if not engine_prefix and (m := re.match(r"^\((EngineCore(?:_\w+)?) pid=\d+\) ", text)):
            engine_prefix = f"({m.group(1)} pid={{pid}}) "
    blocks = next((_blocks(m) for line in lines if (m := _BLOCKS.search(line.text))), None)
    return Dialect(version, v1, api_prefix, engine_prefix, model, served, max_len, blocks)


def _blocks(m: re.Match[str]) -> int:
    if m.group(3):
        return int(m.group(3).replace(",", "")) // 16  # tokens / vLLM's default block size
    return int(m.group(1) or m.group(2))


def compressed_offsets(lines: list[RecordedLine], start: int, end: int, total_seconds: float) -> list[float]:
    """Replay offsets (seconds from ``lines[start]``) for ``lines[start:end]`` that sum to ``total_seconds``.

    Keeps the relative gaps between the recorded timestamps, after capping each gap at
    MAX_RECORDED_GAP_SECONDS.
    """
    if end <= start:
        return []
    gaps = _capped_gaps(lines, start, end)
    span = sum(gaps)
    scale = total_seconds / span if span > 0 else 0.0
    out, acc = [], 0.0
    for gap in gaps:
        acc += gap * scale
        out.append(acc)
    return out


def _capped_gaps(lines: list[RecordedLine], start: int, end: int) -> list[float]:
    gaps = [0.0]
    for i in range(start + 1, end):
        gap = lines[i].offset_seconds - lines[i - 1].offset_seconds
        gaps.append(min(max(gap, 0.0), MAX_RECORDED_GAP_SECONDS))
    return gaps


def capped_span(lines: list[RecordedLine], start: int, end: int) -> float:
    """The recorded seconds ``compressed_offsets`` spreads over its total (each gap capped)."""
    return sum(_capped_gaps(lines, start, end)) if end > start else 0.0


@dataclass
class Rewriter:
    """Makes a recorded line say what this run is: configured model, sizes, address, pid, "now"."""

    dialect: Dialect
    model: str
    served_name: str
    tensor_parallel: int
    pipeline_parallel: int
    host: str | None
    port: int
    pid: int
    max_model_len: int | None
    #: The version the image's vLLM reports (``standin_image``): the recording's version lines say it.
    version: str | None = None

    def __call__(self, text: str, now: datetime | None = None) -> str:
        now = now or datetime.now()
        d = self.dialect
        if self.version and self.version != d.version and d.version in text:
            text = VERSION_STATEMENT.sub(self._say_version, text)
        if d.recorded_model and d.recorded_model != self.model:
            text = text.replace(d.recorded_model, self.model)
        if d.recorded_served_name and d.recorded_served_name != self.served_name:
            text = text.replace(f"'{d.recorded_served_name}'", f"'{self.served_name}'")
        world = self.tensor_parallel * self.pipeline_parallel
        text = re.sub(r"tensor_parallel_size=\d+", f"tensor_parallel_size={self.tensor_parallel}", text)
        text = re.sub(r"'tensor_parallel_size': \d+", f"'tensor_parallel_size': {self.tensor_parallel}", text)
        text = re.sub(r"pipeline_parallel_size=\d+", f"pipeline_parallel_size={self.pipeline_parallel}", text)
        text = re.sub(
            r"'pipeline_parallel_size': \d+", f"'pipeline_parallel_size': {self.pipeline_parallel}", text
        )
        text = re.sub(r"in world size \d+", f"in world size {world}", text)
        text = re.sub(r"\bworld_size=\d+", f"world_size={world}", text)
        if self.max_model_len is not None:
            text = re.sub(r"max_seq_len=\d+", f"max_seq_len={self.max_model_len}", text)
            text = re.sub(r"Using max model len \d+", f"Using max model len {self.max_model_len}", text)
        text = re.sub(
            r"Namespace\(host=[^,]+, port=\d+", f"Namespace(host={self.host!r}, port={self.port}", text
        )
        text = re.sub(r"'port': \d+", f"'port': {self.port}", text)
        if "Starting vLLM" in text:
            text = re.sub(r"https?://\S+:\d+", f"http://{self.host or '0.0.0.0'}:{self.port}", text)
        text = _VLLM_PROC.sub(lambda m: f"({m.group(1)} pid={self.pid})", text)
        text = re.sub(r"Started server process \[\d+\]", f"Started server process [{self.pid}]", text)
        text = _VLLM_STAMP.sub(lambda m: f"{m.group(1)} {now:%m-%d %H:%M:%S} ", text, count=1)
        text = _RAY_STAMP.sub(f"{now:%Y-%m-%d %H:%M:%S},{now.microsecond // 1000:03d}", text, count=1)
        return text

    def _say_version(self, m: re.Match[str]) -> str:
        """A version line of the recording's vLLM, saying the image's version instead."""
        if m.group(1) != self.dialect.version or not self.version:
            return m.group(0)
        return m.group(0)[: m.start(1) - m.start(0)] + self.version


def pg_create_line(d: Dialect) -> str:
    where = "ray_utils.py:417" if d.v1 else "ray_utils.py:335"
    return stamp(
        "INFO", where, "No current placement group found. Creating a new placement group.", d.engine_prefix
    )


def is_pg_create(line: RecordedLine) -> bool:
    return bool(_PG_CREATE.search(line.text))


def is_ray_connect(line: RecordedLine) -> bool:
    """Ray's own connect lines: the real ray.init() prints them, so the replay skips the recorded ones."""
    return bool(_RAY_CONNECT.search(line.text))


_RANK = re.compile(r"\brank (\d+) in world size|\bworld_size=\d+ rank=(\d+)")


def rank_beyond(line: RecordedLine, world: int) -> bool:
    """A recorded rank-assignment line for a rank >= ``world`` (the recording ran more ranks)."""
    m = _RANK.search(line.text)
    return m is not None and int(m.group(1) or m.group(2)) >= world


def stamp(level: str, where: str, message: str, prefix: str = "", now: datetime | None = None) -> str:
    """A vLLM log record: ``[prefix]LEVEL MM-DD hh:mm:ss [file.py:N] message``."""
    now = now or datetime.now()
    return f"{prefix}{level} {now:%m-%d %H:%M:%S} [{where}] {message}"


def uvicorn(message: str, prefix: str = "", level: str = "INFO") -> str:
    return f"{prefix}{(level + ':').ljust(9)} {message}"


# ---------------------------------------------------------------------------------------------------
# Failure wording (reference: vllm-log-lines.md §6). Only the message strings are vLLM's; traceback
# frames are abbreviated.


def pg_wait_line(d: Dialect, waited: int, specs: str) -> str:
    where = "ray_utils.py:278" if d.v1 else "ray_utils.py:214"
    return stamp(
        "INFO",
        where,
        f"Waiting for creating a placement group of specs for {waited} seconds. specs={specs}. "
        "Check `ray status` and `ray list nodes` to see if you have enough resources, and make sure "
        "the IP addresses used by ray cluster are the same as VLLM_HOST_IP environment variable "
        "specified in each node if you are running on a multi-node.",
        _engine_prefix(d),
    )


def pg_timeout_message(specs: str, timeout: int) -> str:
    return (
        f"Cannot provide a placement group of placement_group_specs={specs} within {timeout} seconds. "
        "See `ray status` and `ray list nodes` to make sure the cluster has enough resources."
    )


def oom_message(d: Dialect, max_len: int) -> str:
    if d.v1:
        typo = "models's" if version_tuple(d.version) < (0, 22) else "model's"
        needed = max(1.0, max_len / 10922.0)
        return (
            f"To serve at least one request with the {typo} max seq len ({max_len}), "
            f"({needed:.2f} GiB KV cache is needed, which is larger than the available KV cache memory "
            f"(1.71 GiB). Based on the available memory, the estimated maximum model length is "
            f"{int(max_len * 1.71 / needed)}. Try increasing `gpu_memory_utilization` or decreasing "
            "`max_model_len` when initializing the engine."
        )
    return (
        f"The model's max seq len ({max_len}) is larger than the maximum number of tokens that can be "
        "stored in KV cache (2400). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
        "when initializing the engine."
    )


NCCL_MESSAGE = "NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"


def worker_method_error(d: Dialect, method: str, exc_type: str, message: str) -> list[str]:
    """What a Ray worker prints when a collective_rpc method fails (F5); Ray adds its own prefix."""
    where = "worker_base.py:620"
    head = stamp(
        "ERROR",
        where,
        f"Error executing method {method!r}. This might cause deadlock in distributed execution.",
    )
    frames = [
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/worker/worker_base.py", line 612, '
        "in execute_method",
        "    return run_method(self, method, args, kwargs)",
        f"{exc_type}: {message}",
    ]
    return [head] + [stamp("ERROR", where, f) for f in frames]


def engine_failure(d: Dialect, exc_type: str, message: str) -> list[str]:
    """The head's failure block: the engine's logged traceback, then the API server's terminal error."""
    if d.v1:
        prefix = _engine_prefix(d)
        where = "core.py:1108" if version_tuple(d.version) >= (0, 18) else "core.py:708"
        logged = [stamp("ERROR", where, "EngineCore failed to start.", prefix)] + [
            stamp("ERROR", where, f, prefix)
            for f in (
                "Traceback (most recent call last):",
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 1098, '
                "in run_engine_core",
                "    engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)",
                *f"{exc_type}: {message}".split("\n"),
            )
        ]
        api = d.api_prefix
        return [
            *logged,
            f"{api}Traceback (most recent call last):",
            f'{api}  File "/usr/local/bin/vllm", line 10, in <module>',
            f"{api}    sys.exit(main())",
            f"{api}RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {}",
        ]
    where = "engine.py:448"
    # vLLM's formatter repeats the record header on every line of a multi-line message.
    logged = [stamp("ERROR", where, m) for m in message.split("\n")] + [
        stamp("ERROR", where, f)
        for f in (
            "Traceback (most recent call last):",
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/engine/multiprocessing/engine.py", '
            "line 436, in run_mp_engine",
            "    engine = MQLLMEngine.from_vllm_config(",
            *f"{exc_type}: {message}".split("\n"),
        )
    ]
    return [
        *logged,
        "Process SpawnProcess-1:",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap',
        "    self.run()",
        f"{exc_type}: {message}",
        "Traceback (most recent call last):",
        '  File "<frozen runpy>", line 198, in _run_module_as_main',
        "RuntimeError: Engine process failed to start. See stack trace for the root cause.",
    ]


def crash_lines(d: Dialect) -> list[str]:
    """An engine that dies while serving: the root cause, then uvicorn shutting the API down."""
    if d.v1:
        where = "core_client.py:564"
        first = stamp(
            "ERROR",
            where,
            "Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.",
            d.api_prefix,
        )
    else:
        first = stamp(
            "ERROR",
            "engine.py:160",
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
        )
    api = d.api_prefix
    return [
        first,
        uvicorn("Shutting down", api),
        uvicorn("Waiting for application shutdown.", api),
        uvicorn("Application shutdown complete.", api),
    ]


def shutdown_lines(d: Dialect, serving: bool, pid: int, with_executor: bool) -> list[str]:
    api = d.api_prefix.format(pid=pid)
    out = []
    if serving:
        out += [
            uvicorn("Shutting down", api),
            uvicorn("Waiting for application shutdown.", api),
            uvicorn("Application shutdown complete.", api),
        ]
    if with_executor:
        out.append(
            stamp(
                "INFO",
                "ray_distributed_executor.py:127",
                "Shutting down Ray distributed executor. If you see error log from logging.cc regarding "
                "SIGTERM received, please ignore because this is the expected termination process in "
                "Ray.",
                d.engine_prefix.format(pid=pid),
            )
        )
    if serving:
        out.append(uvicorn(f"Finished server process [{pid}]", api))
    return out


def _engine_prefix(d: Dialect) -> str:
    return d.engine_prefix


def version_tuple(version: str) -> tuple[int, ...]:
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def placement_specs(d: Dialect, world: int, driver_ip: str) -> list[dict[str, float]]:
    """vLLM's bundles: one GPU each; the first pinned to the driver's node with a tiny node resource."""
    specs: list[dict[str, float]] = [{"GPU": 1.0} for _ in range(world)]
    if version_tuple(d.version) >= (0, 12):
        specs[0] = {f"node:{driver_ip}": 0.001, "GPU": 1.0}
    else:
        specs[0][f"node:{driver_ip}"] = 0.001
    return specs
