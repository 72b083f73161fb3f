"""Synthetic vLLM startup logs, written from vLLM's format strings by version (not from recorded logs).

The held-back real logs check that the parser generalises; these logs do the same job in the repo. Every
line below is built from a format string in the project's reference (``vllm-log-lines.md``: §1 record
format, §2 process prefixes, §3 stage table, §4 Ray forwarding and dedup, §5 tqdm at byte level, §6
failure signatures, §7 version cheat-sheet), rendered for the version of each scenario:

* record header: ``LEVEL MM-DD hh:mm:ss file.py:N] `` (<= 0.7.3), ``[file.py:N]`` (0.8+);
* process prefixes by version: none on API/EngineCore lines <= 0.10.0, ``APIServer`` / ``EngineCore_0``
  (0.10.1), ``EngineCore_DP0`` (0.10.2-0.17), ``EngineCore`` (0.18+); always ANSI-coloured <= 0.11;
  from 0.31 the prefix belongs to the log format, so bars, uvicorn and raw tracebacks are unprefixed;
* Ray-forwarded worker lines ``(RayWorkerWrapper pid=W[, ip=X])`` (legacy executor, V0 rank 0 in the
  engine process), ``(RayWorkerProc pid=W, ip=X) (Worker_TP1 pid=W)`` (RayExecutorV2, 0.21+), Ray's
  ``\\x1b[36m`` colour, dedup: a copy from another node arrives late, ``[repeated Nx across cluster]``;
* multi-line records (``NewLineFormatter``: ``\\r\\n`` + header), tqdm shard bars (one line per update,
  each starting with ``\\r``) and CUDA-graph bars (every update on one physical line, ``\\r``-separated);
* launchers: plain, ``docker logs -t``, Slurm ``srun -l`` (``0: ``), CRLF files.

``python -m tests.synthetic_vllm_logs`` rewrites ``tests/data/synthetic-logs/`` (the logs and
``manifest.json``); ``tests/test_log_generalise.py`` checks the files are current and asserts the
expectations, which are written here by hand from what vLLM does, never from the parser's output.
"""

# Log lines are data: their literals stay whole so each reads as the format string it renders.
# ruff: noqa: E501
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

OUT = Path(__file__).parent / "data" / "synthetic-logs"
# VLLM_LOGGING_LEVEL=DEBUG: ``fileinfo`` becomes the path under vllm/ (logging_utils/formatter.py, 0.10.2+).
DEBUG_PATHS = {
    "core.py:101": "v1/engine/core.py:101", "core.py:210": "v1/engine/core.py:210",
    "gpu_model_runner.py:2602": "v1/worker/gpu_model_runner.py:2602",
    "gpu_model_runner.py:5187": "v1/worker/gpu_model_runner.py:5187",
    "kv_cache_utils.py:1087": "v1/core/kv_cache_utils.py:1087",
    "kv_cache_utils.py:1091": "v1/core/kv_cache_utils.py:1091",
    "default_loader.py:291": "model_executor/model_loader/default_loader.py:291",
    "api_server.py:602": "entrypoints/openai/api_server.py:602",
}

MODEL = "Qwen/Qwen3-32B"
HEAD_IP, NODE2_IP = "10.0.0.1", "10.0.0.2"
ANSI_VLLM = ("\x1b[1;36m", "\x1b[0;0m")  # <= 0.11: the stdout patch always colours its prefix
ANSI_RAY = ("\x1b[36m", "\x1b[0m")
DEDUP_NOTE = (
    " (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log deduplication, or see "
    "https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html#log-deduplication "
    "for more options.)"
)


def vtuple(version: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in version.split("+", 1)[0].split("."):
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        out.append(int(digits))
        if digits != part:
            break
    return tuple(out)


@dataclass
class Spec:
    name: str
    version: str
    executor: str = "ray"  # "ray" (V1 legacy or RayExecutorV2 by version), "ray_v0", "mp", "mp_v0"
    tp: int = 2
    gpus_per_node: int = 1
    eager: bool = False
    cache_hit: bool = False
    launcher: str = "plain"  # plain | docker | slurm
    crlf: bool = False
    ray_color: bool = True
    fork_nested: bool = False  # EngineCore forked from the API server: (APIServer) (EngineCore_0) nesting
    logo: bool = True
    color_level: bool = False  # VLLM_LOGGING_COLOR=1 (0.12+): coloured level word and prefix
    debug_paths: bool = False  # VLLM_LOGGING_LEVEL=DEBUG (0.10.2+): fileinfo is a relative path
    logging_prefix: str = ""  # VLLM_LOGGING_PREFIX (0.7.3+), free text before the level
    ray_fragments: bool = False  # Ray's log monitor relays a long bar line in pieces, each with its prefix
    node2_clock: float = 0.0  # seconds node 2's clock (its containers' TZ) differs from the head's
    start: datetime = datetime(2026, 4, 8, 23, 30, 0)
    json_format: bool = False  # 0.32+ --logging-config formatter json (pythonjsonlogger)
    description: str = ""
    expect: dict[str, Any] = field(default_factory=dict)


class Log:
    """Renders records the way the given vLLM version prints them."""

    def __init__(self, spec: Spec) -> None:
        self.s = spec
        self.v = vtuple(spec.version)
        self.lines: list[str] = []
        self.t = spec.start
        self.api_pid, self.ec_pid = 4101, 4388
        self.ranks = list(range(spec.tp))
        self.worker_pid = {r: 5200 + r * 37 for r in self.ranks}
        self.v0 = spec.executor in ("ray_v0", "mp_v0")
        self.ray = spec.executor in ("ray", "ray_v0")
        self.nodes = 1 if not self.ray else max(1, spec.tp // spec.gpus_per_node)
        self.delayed: list[tuple[str, Any, str, str, str, str]] = []

    # --- who prints ----------------------------------------------------------------------------------
    def node_of(self, rank: int) -> str | None:
        if not self.ray:
            return None
        return None if rank // self.s.gpus_per_node == 0 else NODE2_IP

    def vp(self, name: str, pid: int) -> str:
        if self.v <= (0, 11, 99):
            return f"{ANSI_VLLM[0]}({name} pid={pid}){ANSI_VLLM[1]} "
        if self.s.color_level:
            return f"\x1b[0;36m({name} pid={pid})\x1b[0;0m "
        return f"({name} pid={pid}) "

    def patched(self) -> bool:
        """<= 0.30: the prefix is written by a stdout patch, so it lands on every physical line."""
        return self.v < (0, 31)

    def api_prefix(self, record: bool) -> str:
        if self.v < (0, 10, 1):
            return ""
        if self.patched() or record:
            return self.vp("APIServer", self.api_pid)
        return ""

    def ec_name(self) -> str | None:
        if self.v0 or self.v < (0, 10, 1):
            return None
        if self.v < (0, 10, 2):
            return "EngineCore_0"
        if self.v < (0, 18):
            return "EngineCore_DP0"
        return "EngineCore"

    def ec_prefix(self, record: bool) -> str:
        name = self.ec_name()
        if name is None or not (self.patched() or record):
            return ""
        outer = self.vp("APIServer", self.api_pid) if self.s.fork_nested else ""
        return outer + self.vp(name, self.ec_pid)

    def worker_name(self, rank: int) -> str:
        if self.v0:
            return "VllmWorkerProcess"
        if self.v < (0, 10, 1):
            return f"VllmWorker rank={rank}"
        if self.v < (0, 10, 2):
            return f"VllmWorker TP{rank}"
        return f"Worker_TP{rank}"

    def worker_prefix(self, rank: int, record: bool) -> str:
        pid = self.worker_pid[rank]
        if self.s.executor == "mp_v0":
            return "" if rank == 0 else self.vp("VllmWorkerProcess", pid)
        if self.s.executor == "mp":
            return self.vp(self.worker_name(rank), pid) if (self.patched() or record) else ""
        # Ray: the driver (EngineCore, or the V0 engine) prints the forwarded line.
        if self.s.executor == "ray_v0" and rank == 0:
            return ""  # V0: rank 0 runs inside the engine process
        ip = self.node_of(rank)
        actor = "RayWorkerProc" if self.v >= (0, 21) else "RayWorkerWrapper"
        ray = f"({actor} pid={pid}{f', ip={ip}' if ip else ''})"
        if self.s.ray_color:
            ray = ANSI_RAY[0] + ray + ANSI_RAY[1]
        inner = ""
        if actor == "RayWorkerProc" and (self.patched() or record):
            inner = self.vp(f"Worker_TP{rank}", pid)
        return self.ec_prefix(record=False) + ray + " " + inner

    def prefix(self, who: Any, record: bool) -> str:
        if who == "api":
            return self.api_prefix(record)
        if who == "ec":
            return self.ec_prefix(record)
        return self.worker_prefix(who, record)

    # --- emitting ------------------------------------------------------------------------------------
    def tick(self, seconds: float) -> None:
        self.t += timedelta(seconds=seconds)

    def header(self, level: str, where: str, who: Any = None) -> str:
        t = self.t
        if self.s.node2_clock and isinstance(who, int) and self.node_of(who) is not None:
            t += timedelta(seconds=self.s.node2_clock)
        ts = t.strftime("%m-%d %H:%M:%S")
        if self.s.debug_paths and where in DEBUG_PATHS:
            where = DEBUG_PATHS[where]
        if self.s.color_level:
            colour = {"INFO": "32", "WARNING": "33", "ERROR": "31", "DEBUG": "37"}.get(level, "0")
            level = f"\x1b[{colour}m{level}\x1b[0m"
            ts = f"\x1b[2m{ts}\x1b[0m"
        pre = self.s.logging_prefix if self.v < (0, 31) else ""  # 0.31+: before the process prefix
        return f"{pre}{level} {ts} {where}] " if self.v < (0, 8) else f"{pre}{level} {ts} [{where}] "

    def log(self, who: Any, level: str, where: str, msg: str, *, repeat: int = 0) -> None:
        """A vLLM logger record; a multi-line message repeats the header on every line (``\\r\\n``)."""
        pre, head = self.prefix(who, True), self.header(level, where, who)
        if self.v >= (0, 31) and self.s.logging_prefix:
            # f"{VLLM_LOGGING_PREFIX}(%(vllm_process_name)s pid=%(process)d) %(levelname)s ...": the free
            # text comes first, after any Ray prefix of a forwarded record.
            own = self.vp(self.worker_name(who), self.worker_pid[who]) if isinstance(who, int) else pre
            if own and pre.endswith(own):
                pre = pre[: -len(own)] + self.s.logging_prefix + own
            else:
                pre = self.s.logging_prefix + pre
        if self.s.json_format:
            self.lines.append(self.json_record(who, level, where, msg))
            return
        parts = msg.split("\n")
        for i, part in enumerate(parts):
            line = pre + head + part
            if i == len(parts) - 1 and repeat:
                line += f"\x1b[32m [repeated {repeat}x across cluster]{DEDUP_NOTE}\x1b[0m"
            self.lines.append(line + ("\r" if i < len(parts) - 1 else ""))

    def json_record(self, who: Any, level: str, where: str, msg: str) -> str:
        """"%(asctime)s %(levelname)s %(name)s %(processName)s %(process)d %(message)s" through
        pythonjsonlogger: one JSON object per record (newlines escaped); Ray still prefixes forwarded lines."""
        if who == "api":
            proc, pid, pre = "MainProcess", self.api_pid, ""
        elif who == "ec":
            proc, pid, pre = "EngineCore", self.ec_pid, ""
        else:
            proc, pid = "MainProcess", self.worker_pid[who]
            pre = self.worker_prefix(who, record=False)
        stamp = self.t.strftime("%Y-%m-%d %H:%M:%S") + ",417"
        module = "vllm." + where.split(".py", 1)[0].replace("/", ".")
        record: dict[str, Any] = {"asctime": stamp, "levelname": level, "name": module, "processName": proc,
                                  "process": pid, "message": msg.split("\n", 1)[0]}
        if "\n" in msg:  # logger.exception: the traceback is the record's exc_info
            record["exc_info"] = msg.split("\n", 1)[1]
        return pre + json.dumps(record, ensure_ascii=False)

    def info(self, who: Any, where: str, msg: str) -> None:
        self.log(who, "INFO", where, msg)

    def later(self, who: Any, level: str, where: str, msg: str) -> None:
        """Ray dedup: another node's copy of a line already printed comes out with the next batch."""
        self.delayed.append((self.header(level, where, who), who, msg))

    def flush_later(self) -> None:
        for head, who, msg in self.delayed:
            self.lines.append(self.prefix(who, True) + head + msg)
        self.delayed.clear()

    def raw(self, who: Any, text: str) -> None:
        """Text written straight to stdout/stderr (tracebacks, uvicorn, tqdm, native libraries)."""
        pre = self.prefix(who, False)
        for part in text.split("\n"):
            self.lines.append(pre + part)

    def ray_cpp(self, who: Any, level: str, where: str, msg: str) -> None:
        """Ray's C++ logger in a process (src/ray/util/logging.cc): "[%Y-%m-%d %H:%M:%S,%e %L %P %t] " and
        RAY_CHECK's "file.cc:N: "; ``level`` is spdlog's letter (C for Ray's FATAL)."""
        pid = self.ec_pid if who == "ec" else self.api_pid if who == "api" else self.worker_pid[who]
        stamp = self.t.strftime("%Y-%m-%d %H:%M:%S") + ",417"
        self.raw(who, f"[{stamp} {level} {pid} {pid + 31}] {where}: {msg}")

    def uvicorn(self, msg: str, level: str = "INFO") -> None:
        self.raw("api", f"{level + ':':<9} {msg}")

    def ray_log(self, level: str, where: str, msg: str) -> None:
        stamp = self.t.strftime("%Y-%m-%d %H:%M:%S") + ",417"
        self.raw("ec" if not self.v0 else "api", f"{stamp}\t{level} {where} -- {msg}")

    def shard_bar(self, rank: int, total: int, upto: int | None = None, desc: str = "") -> None:
        desc = desc or "Loading safetensors checkpoint shards"
        pre = self.prefix(rank, False)
        last = total if upto is None else upto
        for n in range(0, last + 1):
            rate = "?it/s" if n == 0 else " 1.52it/s"
            eta = "?" if n == 0 else f"00:{(total - n) * 2:02d}"
            self.lines.append(
                f"{pre}\r{desc}: {100 * n / total:3.0f}% Completed | {n}/{total} "
                f"[00:{n * 2:02d}<{eta}, {rate}]"
            )
            self.tick(0.6)
        if upto is None:
            self.lines.append(f"{pre}\r{desc}: 100% Completed | {total}/{total} [00:{total * 2:02d}<00:00,  1.52it/s]")
            self.lines.append(pre)  # tqdm's close(): one more newline, a prefix-only line

    def graph_bar(self, rank: int, desc: str, total: int, upto: int | None = None,
                  glued: str | None = None) -> None:
        """tqdm's default format: every refresh on one physical line, ``\\r``-separated."""
        pre = self.prefix(rank, False)
        segs = []
        last = total if upto is None else upto
        for n in range(0, last + 1):
            frac = n / total
            full = int(frac * 10)
            partial = "▏▎▍▌▋▊▉"[int((frac * 10 - full) * 7)] if full < 10 and frac * 10 - full >= 1 / 7 else ""
            bar = ("█" * full + partial).ljust(10)
            rate = "?it/s" if n == 0 else "33.44it/s"
            eta = "?" if n == 0 else "00:00"
            segs.append(f"\r{desc}: {100 * frac:3.0f}%|{bar}| {n}/{total} [00:01<{eta}, {rate}]")
        if self.s.ray_fragments and self.ray and len(segs) > 4:
            # Ray's log monitor readline()s the worker's log; at EOF it may get a partial line, and every
            # piece is printed with its own prefix.
            cut = len(segs) // 2
            self.lines.append(pre + "".join(segs[:cut]))
            segs = segs[cut:]
        line = pre + "".join(segs)
        if glued is not None:
            line += glued
            self.lines.append(line)
        elif upto is None:
            self.lines.append(line)
        else:
            self.lines.append(line)  # cut mid-capture (the log ends or the capture died)

    def render(self) -> bytes:
        lines = self.lines
        if self.s.launcher == "docker":
            base = self.s.start
            out = []
            for i, line in enumerate(lines):
                stamp = (base + timedelta(milliseconds=37 * i)).strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"
                out.append(f"{stamp} {line}")
            lines = out
        elif self.s.launcher == "slurm":
            lines = [f"0: {line}" for line in lines]
        nl = "\r\n" if self.s.crlf else "\n"
        return (nl.join(lines) + nl).encode("utf-8")


# --- stages, each as the version prints it ---------------------------------------------------------

def s0_version(L: Log) -> None:
    v, ver = L.v, L.s.version
    if v <= (0, 11, 99):  # INFO 0.7.3-0.11, DEBUG from 0.12
        L.info("api", "__init__.py:241" if v >= (0, 8) else "__init__.py:60", "Automatically detected platform cuda.")
    if v >= (0, 15) and L.s.logo:
        L.info("api", "utils.py:292",
               "\n       █     █     █▄   ▄█\n ▄▄ ▄█ █     █     █ ▀▄▀ █  version " + ver
               + "\n  █▄█▀ █     █     █     █  model   " + MODEL + "\n   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀\n")
    elif v >= (0, 15):
        L.info("api", "utils.py:296", f"vLLM server version {ver}, serving model {MODEL}")
    else:
        L.info("api", "api_server.py:1882" if v >= (0, 9) else "api_server.py:585", f"vLLM API server version {ver}")
    backend = "ray" if L.ray else "mp"
    eager = ", 'enforce_eager': True" if L.s.eager else ""
    if v < (0, 9, 2):
        L.info("api", "api_server.py:586",
               f"args: Namespace(subparser='serve', model_tag='{MODEL}', config='', host=None, port=8000, "
               f"model='{MODEL}', tokenizer=None, tensor_parallel_size={L.s.tp}, pipeline_parallel_size=1, "
               f"distributed_executor_backend='{backend}', enforce_eager={L.s.eager}, max_model_len=32768, "
               "gpu_memory_utilization=0.9, dispatch_function=<function ServeSubcommand.cmd at 0x7f3c2b1e4d30>)")
    else:
        L.info("api", "utils.py:233",
               f"non-default args: {{'model_tag': '{MODEL}', 'host': '0.0.0.0', 'model': '{MODEL}', "
               f"'max_model_len': 32768, 'distributed_executor_backend': '{backend}', "
               f"'tensor_parallel_size': {L.s.tp}, 'gpu_memory_utilization': 0.85{eager}}}")
    L.tick(4)


def s1_config(L: Log) -> None:
    v = L.v
    if v >= (0, 10, 1):
        L.info("api", "model.py:531", "Resolved architecture: Qwen3ForCausalLM")
    if v >= (0, 9, 2):
        L.info("api", "model.py:1554", "Using max model len 32768")
    L.info("api", "scheduler.py:222", "Chunked prefill is enabled with max_num_batched_tokens=8192.")
    if L.s.eager and v >= (0, 17):
        L.log("api", "WARNING", "vllm.py:698", "Enforce eager set, disabling torch.compile and CUDAGraphs. "
              "This is equivalent to setting -cc.mode=none -cc.cudagraph_mode=none")
    if L.s.eager and v >= (0, 10, 1):
        L.info("api", "vllm.py:718", "Cudagraph is disabled under eager mode")
    L.tick(2)
    cfg = (f"model='{MODEL}', speculative_config=None, tokenizer='{MODEL}', skip_tokenizer_init=False, "
           "tokenizer_mode=auto, revision=None, trust_remote_code=False, dtype=torch.bfloat16, "
           "max_seq_len=32768, download_dir=None, load_format=auto, "
           f"tensor_parallel_size={L.s.tp}, pipeline_parallel_size=1")
    if v >= (0, 12):
        cfg += ", data_parallel_size=1"
    cfg += (f", disable_custom_all_reduce=False, quantization=None, enforce_eager={L.s.eager}, "
            "kv_cache_dtype=auto, device_config=cuda, seed=0, served_model_name=" + MODEL
            + ", enable_prefix_caching=True, compilation_config={'level': 3}")
    if L.v0:
        if v < (0, 7):
            L.info("api", "llm_engine.py:249", f"Initializing an LLM engine (v{L.s.version}) with config: {cfg}, "
                   "use_v2_block_manager=True, num_scheduler_steps=1, chunked_prefill_enabled=False")
        else:
            L.info("api", "llm_engine.py:234", f"Initializing a V0 LLM engine (v{L.s.version}) with config: "
                   f"{cfg}, use_cached_outputs=True, ")
    else:
        L.info("ec", "core.py:61" if v < (0, 12) else "core.py:101",
               f"Initializing a V1 LLM engine (v{L.s.version}) with config: {cfg}")
        if (0, 9, 2) <= v <= (0, 11, 99):
            L.info("ec", "core.py:648", "Waiting for init message from front-end.")
    L.tick(3)


def s2_placement(L: Log, waits: tuple[int, ...] = (), placed: bool = True) -> None:
    if not L.ray:
        return
    v = L.v
    L.ray_log("INFO", "worker.py:1636", f"Connecting to existing Ray cluster at address: {HEAD_IP}:6379...")
    L.ray_log("INFO", "worker.py:1812", "Connected to Ray cluster. View the dashboard at "
              "\x1b[1m\x1b[32mhttp://127.0.0.1:8265 \x1b[39m\x1b[22m")
    who = "api" if L.v0 else "ec"
    if v >= (0, 12):
        L.log(who, "WARNING", "ray_utils.py:352",
              f"Tensor parallel size ({L.s.tp}) exceeds available GPUs ({L.s.gpus_per_node}). This may result "
              "in Ray placement group allocation failures. Consider reducing tensor_parallel_size to "
              f"{L.s.gpus_per_node} or less, or ensure your Ray cluster has {L.s.tp} GPUs available.")
    if v >= (0, 8, 5):
        L.info(who, "ray_utils.py:417", "No current placement group found. Creating a new placement group.")
    specs = "[{'node:" + HEAD_IP + "': 0.001, 'GPU': 1.0}" + ", {'GPU': 1.0}" * (L.s.tp - 1) + "]"
    prev = 0
    for w in waits:  # elapsed seconds as vLLM prints them (the wait doubles: 10, 30, 70, 150, ...)
        L.tick(w - prev)
        prev = w
        tail = (" Check `ray status` and `ray list nodes` to see if you have enough resources, and make sure "
                "the IP addresses used by ray cluster are the same as VLLM_HOST_IP environment variable "
                "specified in each node if you are running on a multi-node.")
        L.info(who, "ray_utils.py:267", f"Waiting for creating a placement group of specs for {w} seconds. "
               f"specs={specs}.{tail}")
    if not placed:
        return
    for node_id in ("9b520231c0d4e1f3a6", "4f1e0c77ab2d9e8810")[: L.nodes]:
        L.log(who, "WARNING", "ray_utils.py:228",
              f"tensor_parallel_size={L.s.tp} is bigger than a reserved number of GPUs "
              f"({L.s.gpus_per_node} GPUs) in a node {node_id}. Tensor parallel workers can be spread out "
              "to 2+ nodes which can degrade the performance unless you have fast interconnect across "
              "nodes, like Infiniband. To resolve this issue, make sure you have more than "
              f"{L.s.tp} GPUs available at each node.")
    if v >= (0, 17):
        L.info(who, "ray_env.py:65", "Env var prefixes to copy: ['HF_', 'HUGGING_FACE_', 'LMCACHE_', 'NCCL_', "
               "'UCX_', 'VLLM_']")
    L.tick(5)


def _rank_line(L: Log, r: int) -> str:
    v, ws = L.v, L.s.tp
    if v < (0, 9):
        tail = f"DP rank 0, PP rank 0, TP rank {r}"
    elif v < (0, 12):
        tail = f"DP rank 0, PP rank 0, TP rank {r}, EP rank {r}"
    elif v < (0, 17):
        tail = f"DP rank 0, PP rank 0, PCP rank 0, TP rank {r}, EP rank {r}"
    elif v < (0, 30):
        tail = f"DP rank 0, PP rank 0, PCP rank 0, TP rank {r}, EP rank {r}, EPLB rank {r}"
    else:
        tail = f"DP rank 0, PP rank 0, PCP rank 0, TP rank {r}, ETP rank {r}, EP rank {r}, EPLB rank {r}"
    return f"rank {r} in world size {ws} is assigned as {tail}"


def s3_distributed(L: Log, *, nccl: str = "2.27.3") -> None:
    v = L.v
    if L.ray and L.s.executor == "ray" and v >= (0, 12):
        # A fresh Ray worker prints import-time warnings before its actor name is known.
        L.raw("ec", f"({'pid'}={L.worker_pid[L.ranks[-1]] + 1}, ip={NODE2_IP}) /usr/local/lib/python3.12/"
              "dist-packages/torch/cuda/__init__.py:63: FutureWarning: The pynvml package is deprecated. "
              "Please install nvidia-ml-py instead.")
    for r in L.ranks:
        if v >= (0, 12):
            L.info(r, "parallel_state.py:1402",
                   f"world_size={L.s.tp} rank={r} local_rank={r % L.s.gpus_per_node} "
                   f"distributed_init_method=tcp://{HEAD_IP}:43523 backend=nccl")
    L.tick(2)
    for r in L.ranks:
        if v <= (0, 11, 99):
            L.info(r, "utils.py:784", "Found nccl from library libnccl.so.2")
        if r == 0 or not L.ray or L.node_of(r) is None:
            L.info(r, "pynccl.py:70" if v >= (0, 8) else "pynccl.py:63", f"vLLM is using nccl=={nccl}")
        else:
            L.later(r, "INFO", "pynccl.py:70", f"vLLM is using nccl=={nccl}")
    if v <= (0, 26) and L.ray:
        L.log(0, "WARNING", "custom_all_reduce.py:69",
              "Custom allreduce is disabled because this process group spans across nodes.")
    L.raw(0, f"[Gloo] Rank 0 is connected to {L.s.tp - 1} peer ranks. Expected number of connected peer ranks "
          f"is : {L.s.tp - 1}")
    L.flush_later()
    if v >= (0, 8):
        for r in L.ranks:
            L.info(r, "parallel_state.py:1325", _rank_line(L, r))
    L.tick(3)


def s4_weights(L: Log, *, shards: int = 4, gib: tuple[float, float] = (30.57, 30.57), secs: float = 41.2,
               node2_late: bool = False, node2: bool = True, repeat: int = 0) -> None:
    v = L.v
    first_rank_only = v >= (0, 12)
    for r in L.ranks if not first_rank_only else [0]:
        L.info(r, "gpu_model_runner.py:2602" if not L.v0 else "model_runner.py:1072",
               f"Starting to load model {MODEL}...")
        if (0, 9, 2) <= v <= (0, 11, 99) and not L.v0:
            L.info(r, "gpu_model_runner.py:2634", "Loading model from scratch...")
        if v <= (0, 11, 99):
            L.info(r, "weight_utils.py:252" if v >= (0, 8) else "weight_utils.py:243",
                   "Using model weights format ['*.safetensors']")
    L.tick(2)
    L.shard_bar(0, shards)
    L.tick(1)

    def done_msg(g: float, s: float) -> tuple[str, str]:
        if v < (0, 8):
            return "model_runner.py:1077", f"Loading model weights took {g:.4f} GB"
        if v < (0, 12):
            return "gpu_model_runner.py:2653", f"Model loading took {g:.4f} GiB and {s:.6f} seconds"
        if v < (0, 14):
            return "gpu_model_runner.py:3341", f"Model loading took {g:.4f} GiB memory and {s:.6f} seconds"
        return "gpu_model_runner.py:5187", f"Model loading took {round(g, 2)} GiB memory and {s:.6f} seconds"

    # Which ranks print the "done" line: every rank <= 0.11, one per node 0.12+ (info_once, scope local).
    printers = _per_node(L)
    for idx, r in enumerate(printers):
        g = gib[0] if L.node_of(r) is None else gib[1]
        s = secs + 0.7 * idx
        if v >= (0, 8, 5):
            L.info(r, "default_loader.py:291" if v >= (0, 9) else "loader.py:447", f"Loading weights took {s - 4:.2f} seconds")
        where, msg = done_msg(g, s)
        if idx == 0 or not L.ray or L.node_of(r) is None:
            L.info(r, where, msg)
        elif repeat:
            continue
        elif node2 and not node2_late:
            L.tick(1)
            L.info(r, where, msg)
        elif node2:
            L.later(r, "INFO", where, msg)
    if repeat:
        last = printers[-1]
        where, msg = done_msg(gib[1], secs + 2.1)
        L.log(last, "INFO", where, msg, repeat=repeat)
    L.tick(2)


def s5_compile(L: Log) -> None:
    v = L.v
    if L.s.eager or L.v0:
        return
    printers = _per_node(L)
    tag = "[backbone] " if v >= (0, 32) else ""
    for r in printers:
        L.info(r, "backends.py:548", f"{tag}Using cache directory: /root/.cache/vllm/torch_compile_cache/"
               f"d5d16c444c/rank_{r}_0/backbone for vLLM's torch.compile")
    L.flush_later()
    if v >= (0, 32):
        for r in printers:
            L.info(r, "monitor.py:40", f"{tag}Starting torch.compile")
    L.tick(6)
    for r in printers:
        L.info(r, "backends.py:708", f"{tag}Dynamo bytecode transform time: 6.07 s")
    L.tick(3)
    if v < (0, 10):
        rng_cache, rng_comp, rng_hit = "shape None", "general shape", "shape None"
    elif v < (0, 14):
        rng_cache, rng_comp, rng_hit = "shape None", "dynamic shape", "dynamic shape"
    else:
        rng_cache = rng_comp = rng_hit = "compile range (1, 8192)"
    for r in printers:
        if L.s.cache_hit:
            L.info(r, "backends.py:292", f"{tag}Directly load the compiled graph(s) for {rng_hit} from the cache, "
                   "took 5.958 s")
        else:
            L.info(r, "backends.py:378", f"{tag}Cache the graph of {rng_cache} for later use")
    if not L.s.cache_hit:
        L.tick(29)
        for r in printers:
            L.info(r, "backends.py:393", f"{tag}Compiling a graph for {rng_comp} takes 29.67 s")
    total = 12.1 if L.s.cache_hit else 36.2
    verb = "takes" if v < (0, 18) else "took"
    for r in printers:
        L.info(r, "monitor.py:34" if v < (0, 18) else "monitor.py:53", f"{tag}torch.compile {verb} {total:.2f} s in total")
    L.tick(40)
    if v >= (0, 18):
        for r in printers:
            L.info(r, "monitor.py:81", "Initial profiling/warmup run took 21.40 s")
    L.tick(1)


def _per_node(L: Log) -> list[int]:
    """Ranks that print a per-worker line: every rank <= 0.11, the first rank of each node 0.12+."""
    if L.v <= (0, 11, 99):
        return L.ranks
    if not L.ray:
        return [0]
    return [r for r in L.ranks if r % L.s.gpus_per_node == 0]


def s6_kv(L: Log, *, kv_gib: tuple[float, float] = (48.31, 47.90), tokens: int = 395_488,
          conc: float = 12.07, device: str = "GPU") -> None:
    v = L.v
    printers = _per_node(L) if not L.v0 else L.ranks
    if L.v0 and v >= (0, 7, 3):
        for r in printers:
            L.info(r, "worker.py:269",
                   "Memory profiling takes 1.46 seconds\nthe current vLLM instance can use total_gpu_memory "
                   "(79.14GiB) x gpu_memory_utilization (0.90) = 71.23GiB\nmodel weights take 30.57GiB; "
                   "non_torch_memory takes 0.45GiB; PyTorch activation peak memory takes 4.20GiB; the rest "
                   f"of the memory reserved for KV Cache is {kv_gib[0]:.2f}GiB.")
    if v >= (0, 21) and not L.s.eager and not L.v0:
        for r in printers:
            L.info(r, "gpu_model_runner.py:6534", "Profiling CUDA graph memory: PIECEWISE=51 (largest=512), FULL=35 (largest=256)")
            L.info(r, "gpu_model_runner.py:6143", "Estimated CUDA graph memory: 1.10 GiB total")
    if v >= (0, 9, 2) and not L.v0:
        for r in printers:
            g = kv_gib[0] if L.node_of(r) is None else kv_gib[1]
            L.info(r, "gpu_worker.py:298", f"Available KV cache memory: {g:.2f} GiB" if v < (0, 14)
                   else f"Available KV cache memory: {round(g, 2)} GiB")
    L.tick(1)
    tok = f"{tokens:,}"
    if L.v0:
        blocks = tokens // 16
        who = "api"
        if v < (0, 7):
            L.info(who, "distributed_gpu_executor.py:57", f"# GPU blocks: {blocks}, # CPU blocks: 2048")
        else:
            L.info(who, "executor_base.py:111", f"# cuda blocks: {blocks}, # CPU blocks: 2048")
            L.info(who, "executor_base.py:116", f"Maximum concurrency for 32768 tokens per request: {conc:.2f}x")
    elif v < (0, 28):
        L.info("ec", "kv_cache_utils.py:1087", f"GPU KV cache size: {tok} tokens")
        L.info("ec", "kv_cache_utils.py:1091", f"Maximum concurrency for 32,768 tokens per request: {conc:.2f}x")
    else:
        L.info("ec", "kv_cache_utils.py:1147",
               f"{device if v >= (0, 30) else 'GPU'} KV cache size: {tok} tokens, Maximum concurrency for 32,768 "
               f"tokens per request: {conc:.2f}x")
    L.tick(1)


def s7_graphs(L: Log, *, glued: str | None = None, upto: int | None = None) -> None:
    v = L.v
    if L.s.eager:
        return
    if L.v0:
        if v < (0, 7):
            L.info(0, "model_runner.py:1400",
                   "Capturing the model for CUDA graphs. This may lead to unexpected consequences if the model "
                   "is not static. To run the model in eager mode, set 'enforce_eager=True' or use "
                   "'--enforce-eager' in the CLI.")
            L.info(0, "model_runner.py:1404",
                   "CUDA graphs can take additional 1~3 GiB memory per GPU. If you are running out of memory, "
                   "consider decreasing `gpu_memory_utilization` or switching to eager mode. You can also "
                   "reduce the `max_num_seqs` as needed to decrease memory usage.")
            L.tick(12)
        else:
            L.info(0, "model_runner.py:1434",
                   "Capturing cudagraphs for decoding. This may lead to unexpected consequences if the model "
                   "is not static. To run the model in eager mode, set 'enforce_eager=True' or use "
                   "'--enforce-eager' in the CLI. If out-of-memory error occurs during cudagraph capture, "
                   "consider decreasing `gpu_memory_utilization` or switching to eager mode. You can also "
                   "reduce the `max_num_seqs` as needed to decrease memory usage.")
            L.graph_bar(0, "Capturing CUDA graph shapes", 35)
            L.tick(12)
    elif v < (0, 9, 2):
        L.tick(10)  # V1 0.8: no bar, only the "finished" line
    elif v < (0, 10, 1):
        L.graph_bar(0, "Capturing CUDA graph shapes", 67, upto=upto, glued=glued)
    elif v >= (0, 33):
        L.graph_bar(0, "Capturing CUDA graphs (PIECEWISE)", 51, glued=glued)
        L.graph_bar(0, "Capturing CUDA graphs (FULL)", 35, upto=upto)
    else:
        L.graph_bar(0, "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)", 51, glued=glued)
        L.graph_bar(0, "Capturing CUDA graphs (decode, FULL)", 35, upto=upto)
    if upto is not None:
        return
    L.tick(3)
    printers = _per_node(L) if not L.v0 else L.ranks
    for r in printers:
        if L.v0 and v < (0, 7):
            L.info(r, "model_runner.py:1528", "Graph capturing finished in 12 secs.")
        else:
            L.info(r, "gpu_model_runner.py:3480" if not L.v0 else "model_runner.py:1562",
                   "Graph capturing finished in 12 secs, took 1.10 GiB")
    if v >= (0, 33):
        L.info(0, "gpu_worker.py:512", "CUDA graph pool memory: 1.05 GiB (actual), 1.10 GiB (estimated), "
               "difference: 0.05 GiB (4.5%).")
    L.tick(1)


def s8_engine(L: Log, total: float = 180.52) -> None:
    v = L.v
    if v < (0, 7, 3):
        return
    who = "api" if L.v0 else "ec"
    where = "llm_engine.py:431" if L.v0 else "core.py:210"
    if v < (0, 20):
        L.info(who, where, f"init engine (profile, create kv cache, warmup model) took {total:.2f} seconds")
    elif L.s.eager:
        L.info(who, where, f"init engine (profile, create kv cache, warmup model) took {total:.2f} s")
    else:
        L.info(who, where, f"init engine (profile, create kv cache, warmup model) took {total:.2f} s "
               "(compilation: 36.20 s)")
    L.tick(1)


def s9_api(L: Log, *, stats: bool = True) -> None:
    v = L.v
    if (0, 9, 2) <= v <= (0, 11, 99) and not L.v0:
        L.info("api", "loggers.py:147", "Engine 000: vllm cache_config_info with initialization after "
               "num_gpu_blocks is: 24718")
    if (0, 10, 1) <= v <= (0, 11, 99):
        L.info("api", "api_server.py:1639", "Supported_tasks: ['generate']")
    elif v >= (0, 12):
        L.info("api", "api_server.py:676", "Supported tasks: ['generate']")
    if (0, 7, 3) <= v < (0, 9):
        L.info("api", "api_server.py:1024", "Starting vLLM API server on http://0.0.0.0:8000")
    elif (0, 9) <= v < (0, 18):
        L.info("api", "api_server.py:1333", "Starting vLLM API server 0 on http://0.0.0.0:8000")
    elif v >= (0, 18):
        L.info("api", "api_server.py:602", "Starting vLLM server on http://0.0.0.0:8000")
    L.info("api", "launcher.py:37" if v >= (0, 8) else "launcher.py:19", "Available routes are:")
    for route, methods in (("/openapi.json", "HEAD, GET"), ("/health", "GET"), ("/v1/chat/completions", "POST")):
        L.info("api", "launcher.py:46" if v >= (0, 8) else "launcher.py:27", f"Route: {route}, Methods: {methods}")
    L.uvicorn(f"Started server process [{L.api_pid}]")
    L.uvicorn("Waiting for application startup.")
    L.uvicorn("Application startup complete.")
    if v < (0, 7):
        L.uvicorn("Uvicorn running on socket ('0.0.0.0', 8000) (Press CTRL+C to quit)")
    if stats:
        L.tick(30)
        L.uvicorn('10.0.0.7:52114 - "POST /v1/chat/completions HTTP/1.1" 200 OK')
        msg = "Avg prompt throughput: 120.4 tokens/s, Avg generation throughput: 31.2 tokens/s, Running: 1 reqs, "
        if L.v0:
            L.info("api", "metrics.py:455", msg + "Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.4%, "
                   "CPU KV cache usage: 0.0%.")
        else:
            L.info("api", "loggers.py:271", "Engine 000: " + msg + "Waiting: 0 reqs, GPU KV cache usage: 0.4%, "
                   "Prefix cache hit rate: 0.0%")


def happy(L: Log, *, waits: tuple[int, ...] = (), node2_late: bool = False, repeat: int = 0,
          glued: str | None = None) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L, waits)
    s3_distributed(L)
    s4_weights(L, node2_late=node2_late, repeat=repeat)
    s5_compile(L)
    s6_kv(L)
    s7_graphs(L, glued=glued)
    s8_engine(L)
    s9_api(L)


# --- failure blocks ---------------------------------------------------------------------------------

def tb_lines(frames: list[tuple[str, int, str, str]], exc: str) -> str:
    out = ["Traceback (most recent call last):"]
    for path, line, func, code in frames:
        out.append(f'  File "/usr/local/lib/python3.12/dist-packages/vllm/{path}", line {line}, in {func}')
        out.append(f"    {code}")
    out.append(exc)
    return "\n".join(out)


ENGINE_FRAMES = [
    ("v1/engine/core.py", 699, "run_engine_core", "engine_core = EngineCoreProc(*args, **kwargs)"),
    ("v1/engine/core.py", 498, "__init__", "super().__init__(vllm_config, executor_class, log_stats,"),
    ("v1/engine/core.py", 83, "__init__", "self.model_executor = executor_class(vllm_config)"),
]


def engine_core_failed(L: Log, frames: list[tuple[str, int, str, str]], exc: str) -> None:
    """V1 (0.8.5+): EC logs the exception (every line with the ERROR header), the process prints it raw,
    then the API server raises F2."""
    L.log("ec", "ERROR", "core.py:708", "EngineCore failed to start.\n" + tb_lines(ENGINE_FRAMES + frames, exc))
    name = L.ec_name() or "EngineCore_0"
    L.raw("ec", f"Process {name}:\n" + tb_lines(
        [("../multiprocessing/process.py", 314, "_bootstrap", "self.run()"), *ENGINE_FRAMES, *frames], exc))
    L.tick(2)
    api_exc = (f"RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): "
               f"{{'{name}': 1}}" if L.v >= (0, 9, 2) else
               "RuntimeError: Engine core initialization failed. See root cause above.")
    L.raw("api", tb_lines([
        ("entrypoints/openai/api_server.py", 1920, "run_server", "await run_server_worker(listen_address, sock, args)"),
        ("v1/engine/utils.py", 799, "wait_for_engine_startup", "raise RuntimeError("),
    ], api_exc))


def ray_worker_failed(L: Log, rank: int, method: str, frames: list[tuple[str, int, str, str]], exc: str) -> None:
    """Legacy Ray executor: the worker logs F5 (Ray-forwarded), the driver sees a RayTaskError."""
    L.log(rank, "ERROR", "worker_base.py:620", f"Error executing method '{method}'. This might cause deadlock "
          "in distributed execution.\n" + tb_lines(frames, exc))
    L.tick(1)
    exc_name = exc.split(":", 1)[0].rsplit(".", 1)[-1]
    ip = L.node_of(rank) or HEAD_IP
    rte = (f"ray.exceptions.RayTaskError({exc_name}): ray::RayWorkerWrapper.execute_method() "
           f"(pid={L.worker_pid[rank]}, ip={ip}, actor_id=7440b1f2c6e0aa51b9e3f5a701000000, "
           "repr=<vllm.v1.executor.ray_utils.RayWorkerWrapper object at 0xf7bf9b64a120>)")
    engine_core_failed(L, [("v1/executor/ray_distributed_executor.py", 512, "_run_workers",
                            "ray_worker_outputs = ray.get(ray_worker_outputs)")],
                       rte + "\n" + tb_lines(frames, exc).split("\n", 1)[1])


def mp_worker_failed(L: Log, rank: int, frames: list[tuple[str, int, str, str]], exc: str,
                     during_init: bool = True) -> None:
    """mp executor (F7): the worker logs "WorkerProc failed to start." / "hit an exception", the EC
    re-raises."""
    head = "WorkerProc failed to start." if during_init else "WorkerProc hit an exception."
    L.log(rank, "ERROR", "multiproc_executor.py:597", head + "\n" + tb_lines(frames, exc))
    L.tick(1)
    short = exc.split(": ", 1)[1] if ": " in exc else exc
    engine_core_failed(L, [("v1/executor/multiproc_executor.py", 267, "collective_rpc",
                            "raise RuntimeError(")],
                       f"RuntimeError: Worker failed with error '{short}', please check the stack trace above "
                       "for the root cause")


# --- scenarios --------------------------------------------------------------------------------------

def stages(**kw: str) -> dict[str, str]:
    return kw


HAPPY_STAGES = stages(config="done", placement="done", distributed="done", weights="done", compile="done",
                      kv_cache="done", cuda_graphs="done", engine="done", api="done")


def _with(base: dict[str, str], **kw: str) -> dict[str, str]:
    out = dict(base)
    out.update(kw)
    return out


Scenario = tuple[Spec, Callable[[Log], None]]
SCENARIOS: list[Scenario] = []


def scenario(spec: Spec) -> Callable[[Callable[[Log], None]], Callable[[Log], None]]:
    def deco(fn: Callable[[Log], None]) -> Callable[[Log], None]:
        SCENARIOS.append((spec, fn))
        return fn
    return deco


# ---- happy paths, one or more per version family --------------------------------------------------

@scenario(Spec("happy_v0.6.3_v0-ray_plain", "0.6.3.post1", executor="ray_v0",
               description="V0 0.6: bracket-less header, rank 0 in the engine process, Ray worker lines "
               "with ip=, no 'Starting vLLM API server' line, uvicorn 'running on socket'; no 'init engine took' line "
               "either, so the engine stage is the stretch from graph capture to the API server",
               expect=dict(outcome="ready", vllm_release="0.6.3.post1",
                           facts=dict(tensor_parallel_size=2, weights_gib=30.57, api_url="http://0.0.0.0:8000",
                                      cuda_graphs_seconds=12.0, nccl_version="2.27.3"),
                           nodes=["head", NODE2_IP],
                           progress=dict(cuda_graphs=[2, 2]),
                           stages=_with(HAPPY_STAGES, compile="skipped"))))
def _v06(L: Log) -> None:
    happy(L)


@scenario(Spec("happy_v0.7.3_v0-ray_docker", "0.7.3", executor="ray_v0", launcher="docker",
               description="V0 0.7.3 under docker logs -t: 3-line memory-profiling record (\\r\\n + header), "
               "# cuda blocks, CUDA graph shapes bar",
               expect=dict(outcome="ready", vllm_release="0.7.3",
                           facts=dict(tensor_parallel_size=2, weights_gib=30.57, kv_cache_gib=48.31,
                                      max_concurrency=12.07, engine_seconds=180.52,
                                      api_url="http://0.0.0.0:8000"),
                           progress=dict(cuda_graphs=[35, 35]),
                           stages=_with(HAPPY_STAGES, compile="skipped"))))
def _v073(L: Log) -> None:
    happy(L)


@scenario(Spec("happy_v0.8.5_v1-ray_slurm", "0.8.5.post1", launcher="slurm",
               description="V1 0.8.5 under srun -l: unprefixed EngineCore, every rank a RayWorkerWrapper "
               "actor, 'Model loading took X GiB and Y seconds', no CUDA-graph bar",
               expect=dict(outcome="ready", vllm_release="0.8.5.post1",
                           facts=dict(tensor_parallel_size=2, weights_gib=30.57, weights_seconds=41.9,
                                      kv_cache_tokens=395488, max_concurrency=12.07,
                                      cuda_graphs_seconds=12.0, cuda_graphs_gib=1.1, engine_seconds=180.52,
                                      api_url="http://0.0.0.0:8000"),
                           nodes=["head", NODE2_IP],
                           stages=HAPPY_STAGES)))
def _v085(L: Log) -> None:
    happy(L)


@scenario(Spec("happy_v0.9.2_v1-mp-tp2_plain", "0.9.2", executor="mp",
               description="V1 0.9.2 single node mp: (VllmWorker rank=N pid=…) prefixes, "
               "'Starting vLLM API server 0 on', CUDA graph shapes bar",
               expect=dict(outcome="ready", vllm_release="0.9.2",
                           facts=dict(tensor_parallel_size=2, weights_gib=30.57, kv_cache_gib=48.31,
                                      kv_cache_tokens=395488, api_url="http://0.0.0.0:8000"),
                           progress=dict(cuda_graphs=[67, 67]),
                           stages=_with(HAPPY_STAGES, placement="skipped"))))
def _v092(L: Log) -> None:
    happy(L)


@scenario(Spec("happy_v0.10.1.1_v1-mp-fork-nested_plain", "0.10.1.1", executor="mp", fork_nested=True,
               description="0.10.1.1 mp: (APIServer pid) (EngineCore_0 pid) nesting from a forked engine, "
               "(VllmWorker TP1 pid) workers, ANSI prefixes in the file",
               expect=dict(outcome="ready", vllm_release="0.10.1.1",
                           facts=dict(tensor_parallel_size=2, kv_cache_tokens=395488, max_concurrency=12.07,
                                      api_url="http://0.0.0.0:8000"),
                           stages=_with(HAPPY_STAGES, placement="skipped"))))
def _v01011(L: Log) -> None:
    happy(L)


@scenario(Spec("happy_v0.10.2_v1-ray_plain", "0.10.2",
               description="0.10.2 Ray: (EngineCore_DP0) (RayWorkerWrapper …, ip=…) nesting, ANSI prefixes, "
               "the other node's 'Model loading took' delivered late by Ray dedup (after compile began)",
               expect=dict(outcome="ready", vllm_release="0.10.2",
                           facts=dict(tensor_parallel_size=2, weights_gib=31.02, kv_cache_gib=47.9,
                                      kv_cache_tokens=395488, api_url="http://0.0.0.0:8000",
                                      compile_seconds=36.2),
                           nodes=["head", NODE2_IP],
                           stages=HAPPY_STAGES)))
def _v0102(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    s3_distributed(L)
    s4_weights(L, gib=(30.57, 31.02), node2_late=True)
    s5_compile(L)
    s6_kv(L)
    s7_graphs(L)
    s8_engine(L)
    s9_api(L)


@scenario(Spec("happy_v0.11.0_v1-ray-tp4-2x2_plain", "0.11.0", tp=4, gpus_per_node=2,
               description="0.11.0 TP=4 on 2 nodes x 2 GPUs: every rank prints 'Model loading took', Ray folds "
               "three copies into one line with [repeated 3x across cluster]",
               expect=dict(outcome="ready", vllm_release="0.11.0",
                           facts=dict(tensor_parallel_size=4, weights_gib=30.57, api_url="http://0.0.0.0:8000"),
                           nodes=["head", NODE2_IP],
                           stages=HAPPY_STAGES)))
def _v0110(L: Log) -> None:
    happy(L, repeat=3)


@scenario(Spec("happy_v0.12.0_v1-ray-eager_plain", "0.12.0", eager=True, ray_color=False,
               description="0.12.0 --enforce-eager: 'Cudagraph is disabled under eager mode', enforce_eager=True "
               "in the engine config; compile and CUDA graphs skipped; RAY_COLOR_PREFIX=0",
               expect=dict(outcome="ready", vllm_release="0.12.0",
                           facts=dict(tensor_parallel_size=2, enforce_eager=True, weights_gib=30.57,
                                      kv_cache_tokens=395488, api_url="http://0.0.0.0:8000"),
                           stages=_with(HAPPY_STAGES, compile="skipped", cuda_graphs="skipped"))))
def _v0120(L: Log) -> None:
    happy(L)


@scenario(Spec("happy_v0.17.1rc1_v1-ray-cachehit_crlf", "0.17.1rc1.dev25+g1a629ce0d", cache_hit=True, crlf=True,
               description="0.17.1rc1 dev build, CRLF file: logo banner, placement-group waits (10 s, 30 s) "
               "before placing, compile-cache hit (nothing compiled)",
               expect=dict(outcome="ready", vllm_release="0.17.1rc1",
                           facts=dict(tensor_parallel_size=2, weights_gib=30.57, kv_cache_tokens=395488,
                                      max_concurrency=12.07, api_url="http://0.0.0.0:8000",
                                      compile_cache_hit=True, placement_wait_seconds=30),
                           model=MODEL,
                           stages=_with(HAPPY_STAGES, compile="skipped"))))
def _v0171(L: Log) -> None:
    happy(L, waits=(10, 30))


@scenario(Spec("happy_v0.19.1_v1-ray_docker", "0.19.1", launcher="docker",
               description="0.19.1: (EngineCore pid) (RayWorkerWrapper pid, ip), 'torch.compile took', "
               "'Initial profiling/warmup run took', 'Starting vLLM server on'",
               expect=dict(outcome="ready", vllm_release="0.19.1",
                           facts=dict(tensor_parallel_size=2, compile_seconds=36.2, engine_seconds=180.52,
                                      api_url="http://0.0.0.0:8000", weights_gib=30.57),
                           nodes=["head", NODE2_IP],
                           stages=HAPPY_STAGES)))
def _v0191(L: Log) -> None:
    happy(L)


@scenario(Spec("happy_v0.20.2_v1-mp-tp2_plain", "0.20.2", executor="mp",
               description="0.20.2 mp: (Worker_TP1 pid) workers, init engine '... took N s (compilation: M s)'",
               expect=dict(outcome="ready", vllm_release="0.20.2",
                           facts=dict(tensor_parallel_size=2, engine_seconds=180.52, api_url="http://0.0.0.0:8000"),
                           stages=_with(HAPPY_STAGES, placement="skipped"))))
def _v0202(L: Log) -> None:
    happy(L)


@scenario(Spec("happy_v0.23.0_v1-rayv2_plain", "0.23.0",
               description="0.23.0 RayExecutorV2: (EngineCore pid) (RayWorkerProc pid, ip) (Worker_TP1 pid) "
               "three-level prefixes, CUDA-graph memory profiling lines",
               expect=dict(outcome="ready", vllm_release="0.23.0",
                           facts=dict(tensor_parallel_size=2, weights_gib=30.57, kv_cache_gib=47.9,
                                      cuda_graphs_gib=1.1, api_url="http://0.0.0.0:8000"),
                           nodes=["head", NODE2_IP],
                           stages=HAPPY_STAGES)))
def _v0230(L: Log) -> None:
    happy(L)


@scenario(Spec("happy_v0.28.0_v1-rayv2_docker", "0.28.0", launcher="docker",
               description="0.28.0: KV size and concurrency merged into one line",
               expect=dict(outcome="ready", vllm_release="0.28.0",
                           facts=dict(tensor_parallel_size=2, kv_cache_tokens=395488, max_concurrency=12.07,
                                      api_url="http://0.0.0.0:8000"),
                           stages=HAPPY_STAGES)))
def _v0280(L: Log) -> None:
    happy(L)


GLUED = "(EngineCore pid=4388) INFO 04-08 23:36:12 [gpu_worker.py:404] Free memory after capture: 3.12 GiB"


@scenario(Spec("happy_v0.31.0_v1-rayv2_plain", "0.31.0",
               description="0.31.0: prefix moved into the log format; Ray lines (RayWorkerProc …) (Worker_TP1 …) "
               "with no EngineCore layer; bars and uvicorn unprefixed; a log record glued after a bar",
               expect=dict(outcome="ready", vllm_release="0.31.0",
                           facts=dict(tensor_parallel_size=2, kv_cache_tokens=395488, max_concurrency=12.07,
                                      api_url="http://0.0.0.0:8000", weights_gib=30.57),
                           nodes=["head", NODE2_IP],
                           progress=dict(cuda_graphs=[35, 35]),
                           stages=HAPPY_STAGES)))
def _v0310(L: Log) -> None:
    happy(L, glued=GLUED)


@scenario(Spec("happy_v0.32.0_v1-mp-tp2_slurm", "0.32.0", executor="mp", launcher="slurm",
               description="0.32.0 mp under srun -l: 'Starting torch.compile', '[backbone] ' tags on compile "
               "lines, unprefixed bars",
               expect=dict(outcome="ready", vllm_release="0.32.0",
                           facts=dict(tensor_parallel_size=2, compile_seconds=36.2, api_url="http://0.0.0.0:8000"),
                           stages=_with(HAPPY_STAGES, placement="skipped"))))
def _v0320(L: Log) -> None:
    happy(L)


@scenario(Spec("happy_v0.33.0_v1-rayv2-eager_plain", "0.33.0", eager=True, logo=False,
               description="0.33.0 --enforce-eager: 'Enforce eager set, disabling torch.compile and CUDAGraphs', "
               "no logo (VLLM_DISABLE_LOG_LOGO): 'vLLM server version X, serving model M'",
               expect=dict(outcome="ready", vllm_release="0.33.0", model=MODEL,
                           facts=dict(tensor_parallel_size=2, enforce_eager=True, engine_seconds=180.52,
                                      api_url="http://0.0.0.0:8000"),
                           stages=_with(HAPPY_STAGES, compile="skipped", cuda_graphs="skipped"))))
def _v0330(L: Log) -> None:
    happy(L)


@scenario(Spec("happy_v0.33.0_v1-rayv2_plain", "0.33.0",
               description="0.33.0: Model Runner V2 bars 'Capturing CUDA graphs (PIECEWISE)' / '(FULL)'",
               expect=dict(outcome="ready", vllm_release="0.33.0",
                           facts=dict(tensor_parallel_size=2, cuda_graphs_seconds=12.0, api_url="http://0.0.0.0:8000"),
                           progress=dict(cuda_graphs=[35, 35]),
                           stages=HAPPY_STAGES)))
def _v0330b(L: Log) -> None:
    happy(L)


# ---- incomplete: multi-node per-node stages, hangs ------------------------------------------------

@scenario(Spec("incomplete_v0.17.1_weights-waiting-for-node2_plain", "0.17.1",
               description="TP=2 over two nodes: the head's 'Model loading took' is in, the other node's is not "
               "(yet): weights must still be running",
               expect=dict(outcome="incomplete", vllm_release="0.17.1", current="weights",
                           facts=dict(tensor_parallel_size=2),
                           stages=stages(config="done", placement="done", distributed="done", weights="running",
                                         compile="pending", kv_cache="pending", cuda_graphs="pending",
                                         engine="pending", api="pending"))))
def _inc_node2(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    s3_distributed(L)
    s4_weights(L, node2=False)


@scenario(Spec("incomplete_v0.22.1_hang-after-load-start_plain", "0.22.1",
               description="hang: weights started, no shard progress, only shm_broadcast heartbeats",
               expect=dict(outcome="incomplete", vllm_release="0.22.1", current="weights",
                           stages=stages(config="done", placement="done", distributed="done", weights="running",
                                         compile="pending"))))
def _inc_hang(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    s3_distributed(L)
    L.info(0, "gpu_model_runner.py:4735", f"Starting to load model {MODEL}...")
    for _ in range(3):
        L.tick(60)
        L.info("ec", "shm_broadcast.py:681", "No available shared memory broadcast block found in 60 seconds. "
               "This typically happens when some processes are hanging or doing some time-consuming work "
               "(e.g. compilation, weight/kv cache quantization).")


@scenario(Spec("incomplete_v0.14.1_mid-capture_plain", "0.14.1", executor="mp",
               description="mp capture in progress: the CUDA-graph bar's updates so far (no newline yet)",
               expect=dict(outcome="incomplete", vllm_release="0.14.1", current="cuda_graphs",
                           progress=dict(cuda_graphs=[20, 51]),
                           stages=stages(kv_cache="done", cuda_graphs="running", engine="pending"))))
def _inc_capture(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s3_distributed(L)
    s4_weights(L)
    s5_compile(L)
    s6_kv(L)
    L.graph_bar(0, "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)", 51, upto=20)


# ---- failures: every kind ---------------------------------------------------------------------------

@scenario(Spec("fail_placement_timeout_v0.17.1_ray_plain", "0.17.1",
               description="F8: placement-group waits at 10..2550 s, then ValueError 'Cannot provide a placement "
               "group ... within 1800 seconds'",
               expect=dict(outcome="failed", failure_kind="placement_timeout", failure_stage="placement",
                           root_cause="ValueError: Cannot provide a placement group",
                           facts=dict(tensor_parallel_size=2, placement_wait_seconds=2550),
                           stages=stages(config="done", placement="failed", distributed="pending"))))
def _f_pg(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L, waits=(10, 30, 70, 150, 310, 630, 1270, 2550), placed=False)
    pg_timeout(L)


def pg_timeout(L: Log) -> None:
    """F8: 0.8.5+ 'Cannot provide a placement group of placement_group_specs=…'; 0.12+ with more than one
    GPU required, 'Cannot provide a placement group requiring N GPUs (…)' plus two advice lines."""
    specs = "[{'node:" + HEAD_IP + "': 0.001, 'GPU': 1.0}" + ", {'GPU': 1.0}" * (L.s.tp - 1) + "]"
    if L.v >= (0, 12) and L.s.tp > 1:
        exc = (f"ValueError: Cannot provide a placement group requiring {float(L.s.tp)} GPUs "
               f"(placement_group_specs={specs}) within 1800 seconds.\n"
               "Tensor parallel size may exceed available GPUs in your cluster. Check resources with `ray "
               "status` and `ray list nodes`.\n"
               "If running on K8s with limited GPUs, consider reducing --tensor-parallel-size to match "
               "available GPU resources.")
    else:
        exc = (f"ValueError: Cannot provide a placement group of placement_group_specs={specs} within 1800 "
               "seconds. See `ray status` and `ray list nodes` to make sure the cluster has enough resources.")
    engine_core_failed(L, [("v1/executor/ray_utils.py", 282, "_wait_until_pg_ready", "raise ValueError(")], exc)


@scenario(Spec("fail_no_gpu_on_node_v0.9.2_ray_plain", "0.9.2",
               description="F10 (<= 0.11): 'Ray does not allocate any GPUs on the driver node'",
               expect=dict(outcome="failed", failure_kind="no_gpu_on_node", failure_stage="placement",
                           root_cause="Ray does not allocate any GPUs on the driver node",
                           stages=stages(config="done", placement="failed"))))
def _f_nogpu(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    engine_core_failed(L, [("v1/executor/ray_distributed_executor.py", 257, "_init_workers_ray", "raise ValueError(")],
                       f"ValueError: Ray does not allocate any GPUs on the driver node.Driver IP: {HEAD_IP}, worker "
                       f"IPs: {NODE2_IP}.Consider adjusting the Ray placement group or running the driver on a "
                       "GPU node.")


@scenario(Spec("fail_no_gpu_on_node_v0.24.0_rayv2_slurm", "0.24.0", launcher="slurm",
               description="F10: 'Current node has no GPU available. current_node_resource=…'",
               expect=dict(outcome="failed", failure_kind="no_gpu_on_node", failure_stage="placement",
                           root_cause="Current node has no GPU available",
                           stages=stages(config="done", placement="failed"))))
def _f_nogpu2(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    L.ray_log("INFO", "worker.py:1636", f"Connecting to existing Ray cluster at address: {HEAD_IP}:6379...")
    L.info("ec", "ray_utils.py:417", "No current placement group found. Creating a new placement group.")
    engine_core_failed(L, [("v1/executor/ray_utils.py", 401, "initialize_ray_cluster", "raise ValueError(")],
                       "ValueError: Current node has no GPU available. current_node_resource={'CPU': 20.0, "
                       "'memory': 102400000000.0, 'node:" + HEAD_IP + "': 1.0, 'object_store_memory': "
                       "2000000000.0}. vLLM engine cannot start without GPU. Make sure you have at least 1 GPU "
                       "available in a node current_node_id='9b520231c0d4e1f3a6' current_ip='" + HEAD_IP + "'.")


@scenario(Spec("fail_ip_mismatch_v0.12.0_ray-autoscaler_plain", "0.12.0",
               description="F9: PG waits interleaved with Ray autoscaler 'No available node types can fulfill "
               "resource request {'node:<ip>': 0.001, ...}' (driver IP unknown to Ray)",
               expect=dict(outcome="failed", failure_kind="ip_mismatch", failure_stage="placement",
                           root_cause="No available node types can fulfill resource request",
                           stages=stages(config="done", placement="failed", distributed="pending"))))
def _f_ip(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L, waits=(10,), placed=False)
    L.raw("ec", "(autoscaler +15s) Tip: use `ray status` to view detailed cluster status. To disable these "
          "messages, set RAY_SCHEDULER_EVENTS=0.")
    L.raw("ec", "(autoscaler +15s) Error: No available node types can fulfill resource request {'node:10.0.0.9': "
          "0.001, 'GPU': 1.0}. Add suitable node types to this cluster to resolve this issue.")
    L.tick(20)
    L.info("ec", "ray_utils.py:267", "Waiting for creating a placement group of specs for 30 seconds. "
           "specs=[{'node:10.0.0.9': 0.001, 'GPU': 1.0}, {'GPU': 1.0}]. Check `ray status` and `ray list "
           "nodes` to see if you have enough resources, and make sure the IP addresses used by ray cluster are "
           "the same as VLLM_HOST_IP environment variable specified in each node if you are running on a "
           "multi-node.")


@scenario(Spec("fail_ip_mismatch_v0.26.0_ray-unique-ip_plain", "0.26.0",
               description="F10: 'Every node should have a unique IP address' (both nodes registered one IP)",
               expect=dict(outcome="failed", failure_kind="ip_mismatch", failure_stage="placement",
                           root_cause="Every node should have a unique IP address",
                           hint="registered the same IP address",
                           stages=stages(config="done", placement="failed"))))
def _f_ip2(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    engine_core_failed(L, [("v1/executor/ray_executor.py", 233, "_init_workers_ray", "raise RuntimeError(")],
                       "RuntimeError: Every node should have a unique IP address. Got 2 nodes with node ids "
                       "['9b520231c0d4e1f3a6', '4f1e0c77ab2d9e8810'] and 1 unique IP addresses {'" + HEAD_IP
                       + "'}. Please check your network configuration. If you set `VLLM_HOST_IP` environment "
                       "variable, make sure it is unique for each node.")


@scenario(Spec("fail_nccl_v0.12.0_ray_docker", "0.12.0", launcher="docker",
               description="F11 via F4/F5: worker init_device raises 'NCCL error: unhandled system error', "
               "driver gets RayTaskError(RuntimeError)",
               expect=dict(outcome="failed", failure_kind="nccl", failure_stage="distributed",
                           root_cause="NCCL error: unhandled system error",
                           stages=stages(placement="done", distributed="failed", weights="pending"))))
def _f_nccl(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    for r in L.ranks:
        L.info(r, "parallel_state.py:1402", f"world_size=2 rank={r} local_rank=0 distributed_init_method="
               f"tcp://{HEAD_IP}:43523 backend=nccl")
    L.tick(30)
    ray_worker_failed(L, 1, "init_device", [
        ("v1/worker/gpu_worker.py", 201, "init_device", "init_worker_distributed_environment(self.vllm_config,"),
        ("distributed/parallel_state.py", 1195, "initialize_model_parallel", "_TP = init_model_parallel_group("),
        ("distributed/device_communicators/pynccl_wrapper.py", 312, "NCCL_CHECK", "raise RuntimeError(f\"NCCL error: {error_str}\")"),
    ], "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)")


@scenario(Spec("fail_oom_v0.21.0_mp-cudagraphs_plain", "0.21.0", executor="mp",
               description="F16 in CUDA-graph capture (mp): 'WorkerProc hit an exception' with "
               "torch.OutOfMemoryError, EC 'Worker failed with error ...'",
               expect=dict(outcome="failed", failure_kind="oom", failure_stage="cuda_graphs",
                           root_cause="torch.OutOfMemoryError: CUDA out of memory",
                           stages=stages(kv_cache="done", cuda_graphs="failed", engine="pending"))))
def _f_oom(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s3_distributed(L)
    s4_weights(L)
    s5_compile(L)
    s6_kv(L)
    L.graph_bar(0, "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)", 51, upto=20)
    mp_worker_failed(L, 0, [
        ("v1/worker/gpu_model_runner.py", 4211, "capture_model", "self._capture_cudagraphs("),
        ("../torch/cuda/graphs.py", 186, "__exit__", "self.cuda_graph.capture_end()"),
    ], "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "119.70 GiB of which 812.00 MiB is free. Including non-PyTorch memory, this process has 110.31 GiB memory "
       "in use.", during_init=False)


@scenario(Spec("fail_kv_cache_insufficient_v0.22.1_rayv2_plain", "0.22.1",
               description="F12 (0.22+ spelling \"model's\"): KV cache needed > available",
               expect=dict(outcome="failed", failure_kind="kv_cache_insufficient", failure_stage="kv_cache",
                           root_cause="To serve at least one request with the model's max seq len (131072)",
                           stages=stages(weights="done", kv_cache="failed"))))
def _f_kv(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    s3_distributed(L)
    s4_weights(L)
    s5_compile(L)
    L.info(0, "gpu_worker.py:298", "Available KV cache memory: 4.2 GiB")
    L.info(1, "gpu_worker.py:298", "Available KV cache memory: 4.1 GiB")
    engine_core_failed(L, [("v1/core/kv_cache_utils.py", 686, "check_enough_kv_cache_memory", "raise ValueError(")],
                       "ValueError: To serve at least one request with the model's max seq len (131072), (16.00 "
                       "GiB KV cache is needed, which is larger than the available KV cache memory (4.10 GiB). "
                       "Based on the available memory, the estimated maximum model length is 33584. Try "
                       "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
                       "engine.")


@scenario(Spec("fail_kv_cache_insufficient_v0.7.3_v0-ray_plain", "0.7.3", executor="ray_v0",
               description="F14 (V0): max seq len larger than the tokens the KV cache can hold; V0 terminal "
               "'Engine process failed to start'",
               expect=dict(outcome="failed", failure_kind="kv_cache_insufficient", failure_stage="kv_cache",
                           root_cause="is larger than the maximum number of tokens that can be stored in KV cache",
                           stages=stages(weights="done", kv_cache="failed"))))
def _f_kv0(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    s3_distributed(L)
    s4_weights(L)
    s6_kv(L, kv_gib=(0.6, 0.6), tokens=2400, conc=0.07)
    L.log("api", "ERROR", "engine.py:389",
          "The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV "
          "cache (2400). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing "
          "the engine.\n" + tb_lines([("engine/llm_engine.py", 442, "_initialize_kv_caches",
                                       "self.model_executor.initialize_cache(num_gpu_blocks, num_cpu_blocks)"),
                                      ("worker/worker.py", 553, "raise_if_cache_size_invalid", "raise ValueError(")],
                                     "ValueError: The model's max seq len (32768) is larger than the maximum number "
                                     "of tokens that can be stored in KV cache (2400). Try increasing "
                                     "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
                                     "engine."))
    L.raw("api", tb_lines([("entrypoints/openai/api_server.py", 230, "build_async_engine_client_from_engine_args",
                            "raise RuntimeError(")],
                          "RuntimeError: Engine process failed to start. See stack trace for the root cause."))


@scenario(Spec("fail_free_memory_low_v0.14.1_ray_plain", "0.14.1",
               description="F15: free memory at startup below --gpu-memory-utilization (worker init_device)",
               expect=dict(outcome="failed", failure_kind="free_memory_low", failure_stage="distributed",
                           root_cause="Free memory on device cuda:0 (10.2/119.7 GiB) on startup is less than",
                           stages=stages(placement="done", distributed="failed", weights="pending"))))
def _f_free(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    ray_worker_failed(L, 1, "init_device", [
        ("v1/worker/gpu_worker.py", 233, "init_device", "self.requested_memory = request_memory(init_snapshot,"),
        ("v1/worker/utils.py", 87, "request_memory", "raise ValueError("),
    ], "ValueError: Free memory on device cuda:0 (10.2/119.7 GiB) on startup is less than desired GPU memory "
       "utilization (0.85, 101.74 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
       "processes.")


@scenario(Spec("fail_compile_v0.18.1_mp_plain", "0.18.1", executor="mp",
               description="F17: 'vLLM failed to compile the model' during torch.compile (mp)",
               expect=dict(outcome="failed", failure_kind="compile", failure_stage="compile",
                           root_cause="vLLM failed to compile the model",
                           stages=stages(weights="done", compile="failed", kv_cache="pending"))))
def _f_compile(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s3_distributed(L)
    s4_weights(L)
    L.info(0, "backends.py:548", "Using cache directory: /root/.cache/vllm/torch_compile_cache/d5d16c444c/rank_0_0/"
           "backbone for vLLM's torch.compile")
    L.info(0, "backends.py:708", "Dynamo bytecode transform time: 6.07 s")
    mp_worker_failed(L, 0, [
        ("v1/worker/gpu_worker.py", 301, "determine_available_memory", "self.model_runner.profile_run()"),
        ("compilation/compiler_interface.py", 566, "compile", "raise RuntimeError("),
    ], "RuntimeError: vLLM failed to compile the model. The most likely reason for this is that a previous "
       "compilation failed, leading to a corrupted compilation artifact. We recommend trying to remove "
       "~/.cache/vllm/torch_compile_cache and try again to see the real issue.")


PYDANTIC_TAIL = " [type=value_error, input_value=ArgsKwargs((), {'model': '/models/x'}), input_type=ArgsKwargs]"


@scenario(Spec("fail_model_not_found_v0.31.0_api_plain", "0.31.0",
               description="API side, before the engine: pydantic ValidationError for ModelConfig whose detail "
               "line ('  Value error, Invalid repository ID or local directory …') names the cause; 0.31+ raw "
               "traceback unprefixed",
               expect=dict(outcome="failed", failure_kind="model_not_found", failure_stage="config",
                           root_cause="Invalid repository ID or local directory specified",
                           stages=stages(config="failed", placement="pending"))))
def _f_model(L: Log) -> None:
    s0_version(L)
    L.raw("api", tb_lines([
        ("entrypoints/cli/serve.py", 122, "cmd", "uvloop.run(run_server(args))"),
        ("engine/arg_utils.py", 1240, "create_model_config", "return ModelConfig("),
        ("../pydantic/_internal/_dataclasses.py", 121, "__init__",
         "s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)"),
    ], "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
       "  Value error, Invalid repository ID or local directory specified: '/models/Qwen3-32B'.\n"
       "Please verify the following requirements:\n"
       "1. Provide a valid Hugging Face repository ID.\n"
       "2. Specify a local directory that contains a recognized configuration file." + PYDANTIC_TAIL + "\n"
       "    For further information visit https://errors.pydantic.dev/2.12/v/value_error"))


@scenario(Spec("fail_unsupported_architecture_v0.25.1_api_plain", "0.25.1",
               description="pydantic ValidationError whose detail line says the architecture is not supported",
               expect=dict(outcome="failed", failure_kind="unsupported_architecture", failure_stage="config",
                           root_cause="Model architectures ['Glm5MoeForCausalLM'] are not supported for now",
                           stages=stages(config="failed"))))
def _f_arch(L: Log) -> None:
    s0_version(L)
    L.raw("api", tb_lines([
        ("engine/arg_utils.py", 1240, "create_model_config", "return ModelConfig("),
    ], "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
       "  Value error, Model architectures ['Glm5MoeForCausalLM'] are not supported for now. Supported "
       "architectures: dict_keys(['AquilaModel', 'ArcticForCausalLM', 'Qwen3ForCausalLM'])" + PYDANTIC_TAIL + "\n"
       "    For further information visit https://errors.pydantic.dev/2.12/v/value_error"))


@scenario(Spec("fail_kernel_unsupported_v0.15.1_mp_plain", "0.15.1", executor="mp",
               description="'no kernel image is available' while processing weights after loading (mp)",
               expect=dict(outcome="failed", failure_kind="kernel_unsupported", failure_stage="weights",
                           root_cause="no kernel image is available for execution on the device",
                           stages=stages(distributed="done", weights="failed", compile="pending"))))
def _f_kernel(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s3_distributed(L)
    L.info(0, "gpu_model_runner.py:3341", f"Starting to load model {MODEL}...")
    L.shard_bar(0, 4)
    mp_worker_failed(L, 0, [
        ("model_executor/model_loader/base_loader.py", 56, "load_model", "process_weights_after_loading(model,"),
        ("model_executor/layers/quantization/fp8.py", 402, "process_weights_after_loading", "ops.scaled_fp8_quant("),
    ], "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
       "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
       "might be incorrect.")


@scenario(Spec("fail_config_error_v0.19.1_argparse_plain", "0.19.1",
               description="argparse rejects a flag before anything else is printed",
               expect=dict(outcome="failed", failure_kind="config_error", failure_stage="config",
                           root_cause="vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value",
                           stages=stages(config="failed"))))
def _f_cfg(L: Log) -> None:
    L.lines.append("usage: vllm serve [model_tag] [options]")
    L.lines.append("vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: 'two'")


@scenario(Spec("fail_config_error_v0.16.0_pydantic_plain", "0.16.0",
               description="pydantic ValidationError for ParallelConfig: the detail line is a plain config "
               "problem, so the kind stays config_error",
               expect=dict(outcome="failed", failure_kind="config_error", failure_stage="config",
                           root_cause="validation error for ParallelConfig",
                           stages=stages(config="failed"))))
def _f_cfg2(L: Log) -> None:
    s0_version(L)
    L.raw("api", tb_lines([
        ("engine/arg_utils.py", 1510, "create_engine_config", "parallel_config = ParallelConfig("),
    ], "pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig\n"
       "  Value error, pipeline_parallel_size must be a positive integer, got 0." + PYDANTIC_TAIL + "\n"
       "    For further information visit https://errors.pydantic.dev/2.12/v/value_error"))


@scenario(Spec("fail_port_in_use_v0.18.1_api_docker", "0.18.1", launcher="docker",
               description="F20: vLLM binds the API socket before starting the engine: OSError [Errno 98]",
               expect=dict(outcome="failed", failure_kind="port_in_use", failure_stage="config",
                           root_cause="OSError: [Errno 98] Address already in use",
                           stages=stages(config="failed", placement="pending"))))
def _f_port(L: Log) -> None:
    s0_version(L)
    L.raw("api", tb_lines([
        ("entrypoints/openai/api_server.py", 1895, "run_server", "sock = setup_server(args)"),
        ("entrypoints/openai/api_server.py", 1862, "create_server_socket", "sock.bind(addr)"),
    ], "OSError: [Errno 98] Address already in use"))


@scenario(Spec("fail_worker_died_v0.23.0_rayv2_plain", "0.23.0",
               description="F6: RayExecutorV2 'RayWorkerProc rank=1 died unexpectedly' during weights",
               expect=dict(outcome="failed", failure_kind="worker_died", failure_stage="weights",
                           root_cause="died unexpectedly",
                           stages=stages(distributed="done", weights="failed"))))
def _f_died(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    s3_distributed(L)
    L.info(0, "gpu_model_runner.py:4735", f"Starting to load model {MODEL}...")
    L.shard_bar(0, 8, upto=3)
    L.tick(20)
    L.log("ec", "ERROR", "ray_executor_v2.py:318", "RayWorkerProc rank=1 died unexpectedly, shutting down executor.")
    engine_core_failed(L, [("v1/executor/ray_executor_v2.py", 402, "collective_rpc", "raise RuntimeError(")],
                       "RuntimeError: Ray workers have not started successfully.")


@scenario(Spec("fail_worker_died_v0.26.0_mp-killed_slurm", "0.26.0", executor="mp", launcher="slurm",
               description="F7 (0.26+): 'Worker proc VllmWorker-1 died unexpectedly (exit code: -9)' during KV "
               "profiling",
               expect=dict(outcome="failed", failure_kind="worker_died", failure_stage="compile",
                           root_cause="died unexpectedly (exit code: -9)",
                           stages=stages(weights="done", compile="failed"))))
def _f_died2(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s3_distributed(L)
    s4_weights(L)
    L.info(0, "backends.py:548", "Using cache directory: /root/.cache/vllm/torch_compile_cache/d5d16c444c/rank_0_0/"
           "backbone for vLLM's torch.compile")
    L.tick(40)
    L.log("ec", "ERROR", "multiproc_executor.py:241",
          "Worker proc VllmWorker-1 died unexpectedly (exit code: -9), shutting down executor.")
    engine_core_failed(L, [("v1/executor/multiproc_executor.py", 267, "collective_rpc", "raise RuntimeError(")],
                       "RuntimeError: Worker failed with error 'Worker proc VllmWorker-1 died unexpectedly', please "
                       "check the stack trace above for the root cause")


@scenario(Spec("fail_engine_timeout_v0.17.1_ray_plain", "0.17.1",
               description="F18: the API server's VLLM_ENGINE_READY_TIMEOUT_S runs out while weights load",
               expect=dict(outcome="failed", failure_kind="engine_timeout", failure_stage="weights",
                           root_cause="Timed out waiting for engine core processes to start",
                           stages=stages(distributed="done", weights="failed"))))
def _f_timeout(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    s3_distributed(L)
    L.info(0, "gpu_model_runner.py:4735", f"Starting to load model {MODEL}...")
    L.shard_bar(0, 40, upto=3)
    L.tick(600)
    L.raw("api", tb_lines([("v1/engine/core_client.py", 661, "__init__", "raise TimeoutError(")],
                          "TimeoutError: Timed out waiting for engine core processes to start. This is often caused "
                          "by slow weight loading for large models. Waited 600s (configured by "
                          "VLLM_ENGINE_READY_TIMEOUT_S). To increase the timeout, set the environment variable "
                          "VLLM_ENGINE_READY_TIMEOUT_S."))


@scenario(Spec("fail_unknown_v0.14.1_ray_plain", "0.14.1",
               description="an exception no signature knows (AttributeError in load_model): kind unknown, the "
               "root cause is the exception, not the summary lines",
               expect=dict(outcome="failed", failure_kind="unknown", failure_stage="weights",
                           root_cause="AttributeError: 'NoneType' object has no attribute 'shape'",
                           stages=stages(distributed="done", weights="failed"))))
def _f_unknown(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    s3_distributed(L)
    L.info(0, "gpu_model_runner.py:3341", f"Starting to load model {MODEL}...")
    L.shard_bar(0, 4, upto=2)
    ray_worker_failed(L, 0, "load_model", [
        ("v1/worker/gpu_model_runner.py", 3345, "load_model", "self.model = model_loader.load_model("),
        ("model_executor/models/qwen3.py", 388, "load_weights", "param.data.copy_(loaded_weight.shape)"),
    ], "AttributeError: 'NoneType' object has no attribute 'shape'")


# ---- round 2: more shapes per family --------------------------------------------------------------

NOISE_LINES = (
    "[W408 23:31:02.232485006 socket.cpp:204] [c10d] The hostname of the client socket cannot be retrieved. err=-3",
    "/usr/local/lib/python3.12/dist-packages/torch/storage.py:414: UserWarning: TypedStorage is deprecated. It will "
    "be removed in the future and UntypedStorage will be the only storage class.",
    "spark-a:5237:5301 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0",
    "spark-a:5237:5301 [0] NCCL INFO NET/IB : Got async event : port error",
)


@scenario(Spec("happy_v0.19.1_v1-ray-noise-fragments_plain", "0.19.1", ray_fragments=True,
               description="0.19.1 Ray with benign noise (c10d glog warnings, UserWarning, NCCL INFO lines that "
               "mention errors, Ray autoscaler tips) and the CUDA-graph bar relayed by Ray in two pieces, each "
               "with its own prefix",
               expect=dict(outcome="ready", vllm_release="0.19.1",
                           facts=dict(tensor_parallel_size=2, api_url="http://0.0.0.0:8000",
                                      cuda_graphs_seconds=12.0),
                           progress=dict(cuda_graphs=[35, 35]),
                           stages=HAPPY_STAGES)))
def _v0191_noise(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    L.raw("ec", "(autoscaler +8s) Tip: use `ray status` to view detailed cluster status. To disable these messages, "
          "set RAY_SCHEDULER_EVENTS=0.")
    s3_distributed(L)
    for i, line in enumerate(NOISE_LINES):
        L.raw(i % 2, line)
    L.log(1, "WARNING", "symm_mem.py:67", "SymmMemCommunicator: Device capability 12.1 not supported, "
          "communicator is not available.")
    s4_weights(L)
    s5_compile(L)
    s6_kv(L)
    s7_graphs(L)
    s8_engine(L)
    s9_api(L)


@scenario(Spec("happy_v0.17.1-ngc_v1-ray-tp2_slurm", "0.17.1+a03ca76a.nv26.03.46967107", launcher="slurm",
               description="NGC build version string (local suffix), logo banner, srun -l labels",
               expect=dict(outcome="ready", vllm_release="0.17.1", model=MODEL,
                           facts=dict(tensor_parallel_size=2, max_concurrency=12.07, api_url="http://0.0.0.0:8000"),
                           stages=HAPPY_STAGES)))
def _v0171_ngc(L: Log) -> None:
    happy(L)


@scenario(Spec("happy_v0.10.2.dev378_v1-mp-tp2_docker", "0.10.2.dev378+g4d7fe40fc.d20250829", executor="mp",
               launcher="docker",
               description="dev build 0.10.2.dev378+g…d2025…: 'vLLM API server version', (Worker_TP1 pid) "
               "prefixes in ANSI, docker logs -t",
               expect=dict(outcome="ready", vllm_release="0.10.2",
                           facts=dict(tensor_parallel_size=2, kv_cache_tokens=395488, api_url="http://0.0.0.0:8000"),
                           stages=_with(HAPPY_STAGES, placement="skipped"))))
def _v0102_dev(L: Log) -> None:
    happy(L)


@scenario(Spec("happy_v0.20.2_v1-mp-color_plain", "0.20.2", executor="mp", color_level=True,
               description="VLLM_LOGGING_COLOR=1 (0.12+ on a TTY / forced): coloured prefix, level word and time",
               expect=dict(outcome="ready", vllm_release="0.20.2",
                           facts=dict(tensor_parallel_size=2, kv_cache_tokens=395488, engine_seconds=180.52),
                           stages=_with(HAPPY_STAGES, placement="skipped"))))
def _v0202_color(L: Log) -> None:
    happy(L)


@scenario(Spec("happy_v0.26.0_v1-mp-debug_plain", "0.26.0", executor="mp", debug_paths=True,
               description="VLLM_LOGGING_LEVEL=DEBUG: relative fileinfo paths ([v1/engine/core.py:101]) and the "
               "API's DEBUG 'Waiting for 1 local, 0 remote core engine proc(s) to start.' heartbeats",
               expect=dict(outcome="ready", vllm_release="0.26.0",
                           facts=dict(tensor_parallel_size=2, weights_gib=30.57, kv_cache_tokens=395488,
                                      api_url="http://0.0.0.0:8000"),
                           stages=_with(HAPPY_STAGES, placement="skipped"))))
def _v0260_debug(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s3_distributed(L)
    L.log("api", "DEBUG", "v1/engine/utils.py:1015", "Waiting for 1 local, 0 remote core engine proc(s) to start.")
    s4_weights(L)
    L.log("api", "DEBUG", "v1/engine/utils.py:1015", "Waiting for 1 local, 0 remote core engine proc(s) to start.")
    s5_compile(L)
    s6_kv(L)
    s7_graphs(L)
    s8_engine(L)
    s9_api(L)


@scenario(Spec("happy_v0.28.0_v1-rayv2-logprefix_plain", "0.28.0", logging_prefix="[spark-a] ",
               description="VLLM_LOGGING_PREFIX='[spark-a] ': free text between the process prefix and the level",
               expect=dict(outcome="ready", vllm_release="0.28.0",
                           facts=dict(tensor_parallel_size=2, kv_cache_tokens=395488, max_concurrency=12.07),
                           nodes=["head", NODE2_IP],
                           stages=HAPPY_STAGES)))
def _v0280_prefix(L: Log) -> None:
    happy(L)


@scenario(Spec("incomplete_v0.14.1_graphs-waiting-for-node2_plain", "0.14.1",
               description="TP=2 over two nodes, 0.12+ 'Graph capturing finished' once per node: only the head's "
               "is in, so CUDA graphs are still running",
               expect=dict(outcome="incomplete", vllm_release="0.14.1", current="cuda_graphs",
                           stages=stages(kv_cache="done", cuda_graphs="running", engine="pending"))))
def _inc_graphs(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    s3_distributed(L)
    s4_weights(L)
    s5_compile(L)
    s6_kv(L)
    L.graph_bar(0, "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)", 51)
    L.graph_bar(0, "Capturing CUDA graphs (decode, FULL)", 35)
    L.info(0, "gpu_model_runner.py:4211", "Graph capturing finished in 12 secs, took 1.10 GiB")


@scenario(Spec("incomplete_v0.33.0_placement-waiting_plain", "0.33.0",
               description="0.33 Ray: the placement group is not placed yet (waits at 10, 30, 70 s)",
               expect=dict(outcome="incomplete", vllm_release="0.33.0", current="placement",
                           progress=dict(placement=[70, 1800]),
                           stages=stages(config="done", placement="running", distributed="pending"))))
def _inc_pg(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L, waits=(10, 30, 70), placed=False)


@scenario(Spec("incomplete_v0.11.0_pasted-ray-bar_plain", "0.11.0",
               description="a terminal paste: Ray's prefix alone on a line, the shard bar on the next one "
               "(the \r moved the bar to a new line)",
               expect=dict(outcome="incomplete", vllm_release="0.11.0", current="weights",
                           progress=dict(weights=[2, 4]),
                           stages=stages(distributed="done", weights="running"))))
def _inc_paste(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    s3_distributed(L)
    L.info(0, "gpu_model_runner.py:2602", f"Starting to load model {MODEL}...")
    pre = L.prefix(0, False)
    for n in range(3):
        L.lines.append(pre)
        L.lines.append(f"Loading safetensors checkpoint shards: {25 * n:3d}% Completed | {n}/4 [00:0{n}<?, ?it/s]")


@scenario(Spec("fail_worker_died_v0.19.1_after-ready_plain", "0.19.1",
               description="F19 after ready: 'Engine core proc EngineCore died unexpectedly, shutting down client.'",
               expect=dict(outcome="failed", failure_kind="worker_died", failure_stage="serving",
                           root_cause="died unexpectedly",
                           facts=dict(api_url="http://0.0.0.0:8000"))))
def _f_after_ready(L: Log) -> None:
    happy(L)
    L.tick(300)
    L.log("api", "ERROR", "core_client.py:564", "Engine core proc EngineCore died unexpectedly, shutting down client.")


@scenario(Spec("fail_placement_timeout_v0.10.2_ray_docker", "0.10.2", launcher="docker",
               description="F8 before 0.12: 'Cannot provide a placement group of placement_group_specs=…'",
               expect=dict(outcome="failed", failure_kind="placement_timeout", failure_stage="placement",
                           root_cause="Cannot provide a placement group of placement_group_specs",
                           stages=stages(config="done", placement="failed"))))
def _f_pg_old(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L, waits=(10, 30, 70, 150, 310, 630, 1270, 2550), placed=False)
    pg_timeout(L)


@scenario(Spec("fail_nccl_v0.29.0_mp-distbackend_plain", "0.29.0", executor="mp",
               description="torch DistBackendError (NCCL) in an mp worker's init_device",
               expect=dict(outcome="failed", failure_kind="nccl", failure_stage="distributed",
                           root_cause="torch.distributed.DistBackendError: NCCL error in:",
                           stages=stages(config="done", placement="skipped", distributed="failed"))))
def _f_nccl_mp(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    for r in L.ranks:
        L.info(r, "parallel_state.py:1402", f"world_size=2 rank={r} local_rank={r} distributed_init_method="
               "tcp://127.0.0.1:43523 backend=nccl")
    mp_worker_failed(L, 1, [
        ("v1/worker/gpu_worker.py", 221, "init_device", "init_worker_distributed_environment(self.vllm_config,"),
        ("../torch/distributed/distributed_c10d.py", 4798, "barrier", "work = group.barrier(opts=opts)"),
    ], "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
       "3356, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3\n"
       "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.")


@scenario(Spec("fail_kv_cache_insufficient_v0.16.0_no-blocks_plain", "0.16.0", executor="mp",
               description="F13: 'No available memory for the cache blocks'",
               expect=dict(outcome="failed", failure_kind="kv_cache_insufficient", failure_stage="kv_cache",
                           root_cause="No available memory for the cache blocks",
                           stages=stages(compile="done", kv_cache="failed"))))
def _f_noblocks(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s3_distributed(L)
    s4_weights(L)
    s5_compile(L)
    L.info(0, "gpu_worker.py:298", "Available KV cache memory: -1.2 GiB")
    engine_core_failed(L, [("v1/core/kv_cache_utils.py", 640, "check_enough_kv_cache_memory", "raise ValueError(")],
                       "ValueError: No available memory for the cache blocks. Try increasing "
                       "`gpu_memory_utilization` when initializing the engine. See https://docs.vllm.ai/en/latest/"
                       "configuration/conserving_memory/ for more details.")


@scenario(Spec("fail_oom_v0.7.3_v0-ray-weights_plain", "0.7.3", executor="ray_v0",
               description="V0 Ray: the remote worker runs out of memory loading weights (F5 + torch OOM)",
               expect=dict(outcome="failed", failure_kind="oom", failure_stage="weights",
                           root_cause="CUDA out of memory",
                           stages=stages(distributed="done", weights="failed"))))
def _f_oom_v0(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    s3_distributed(L)
    s4_weights(L, node2=False)
    L.log(1, "ERROR", "worker_base.py:581", "Error executing method 'load_model'. This might cause deadlock in "
          "distributed execution.\n" + tb_lines([
              ("worker/worker_base.py", 573, "execute_method", "return run_method(target, method, args, kwargs)"),
              ("model_executor/model_loader/loader.py", 406, "load_model", "model = _initialize_model(vllm_config=vllm_config)"),
          ], "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.02 GiB. GPU 0 has a total capacity of "
             "79.14 GiB of which 612.00 MiB is free."))
    L.raw("api", tb_lines([("entrypoints/openai/api_server.py", 230, "build_async_engine_client_from_engine_args",
                            "raise RuntimeError(")],
                          "RuntimeError: Engine process failed to start. See stack trace for the root cause."))


@scenario(Spec("fail_compile_v0.32.0_rayv2-tagged_plain", "0.32.0",
               description="0.32 tagged compile lines, then torch._dynamo BackendCompilerFailed in a Ray V2 "
               "worker: 'RayWorkerProc failed' / 'Worker 0 failed to initialize'",
               expect=dict(outcome="failed", failure_kind="compile", failure_stage="compile",
                           root_cause="BackendCompilerFailed",
                           stages=stages(weights="done", compile="failed"))))
def _f_compile_v2(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    s3_distributed(L)
    s4_weights(L)
    for r in L.ranks:
        L.info(r, "monitor.py:40", "[backbone] Starting torch.compile")
    L.tick(20)
    exc = ("torch._dynamo.exc.BackendCompilerFailed: backend='<vllm.compilation.backends.VllmBackend object at "
           "0x7f2a1c3d5e10>' raised:\nRuntimeError: Triton Error [CUDA]: device kernel image is invalid")
    L.log(1, "ERROR", "ray_executor_v2.py:211", "RayWorkerProc failed: " + exc.split("\n")[0])
    engine_core_failed(L, [("v1/executor/ray_executor_v2.py", 236, "_init_workers", "raise RuntimeError(")],
                       "RuntimeError: Worker 1 failed to initialize: " + exc.split(": ", 1)[1].split("\n")[0])


@scenario(Spec("incomplete_v0.25.1_ray-serve-nesting_plain", "0.25.1",
               description="under Ray Serve (no vLLM API server): (ServeReplica:…) (EngineCore) (RayWorkerProc) "
               "(Worker) four levels; the engine comes up, nothing says an API server is serving",
               expect=dict(outcome="incomplete", vllm_release="0.25.1", current="api",
                           facts=dict(tensor_parallel_size=2, weights_gib=30.57, max_concurrency=12.07,
                                      engine_seconds=180.52),
                           nodes=["head", NODE2_IP],
                           stages=_with(HAPPY_STAGES, api="pending"))))
def _v0251_serve(L: Log) -> None:
    serve = "(ServeReplica:default:LLMServer:qwen-32b pid=3901) "
    s1_config(L)
    L.lines = [ln for ln in L.lines if "(APIServer" not in ln]  # the replica builds the config itself
    s2_placement(L)
    s3_distributed(L)
    s4_weights(L)
    s5_compile(L)
    s6_kv(L)
    s7_graphs(L)
    s8_engine(L)
    L.lines = [serve + ln for ln in L.lines]


@scenario(Spec("happy_v0.17.1_v1-ray-node2-utc_plain", "0.17.1", node2_clock=-7200.0,
               description="head's vllm serve on local time (UTC+2), node 2's worker container on UTC: Ray-forwarded "
               "node-2 lines carry a clock two hours behind (reference §1.1); durations must not jump by hours",
               expect=dict(outcome="ready", vllm_release="0.17.1", max_stage_seconds=200, times_start="04-08 23:",
                           facts=dict(tensor_parallel_size=2, weights_gib=30.57, api_url="http://0.0.0.0:8000"),
                           nodes=["head", NODE2_IP],
                           stages=HAPPY_STAGES)))
def _v0171_skew(L: Log) -> None:
    happy(L)


@scenario(Spec("happy_v0.12.0_v1-ray-new-year_docker", "0.12.0", launcher="docker",
               start=datetime(2026, 12, 31, 23, 59, 0),
               description="a start across midnight on Dec 31 (MM-DD without a year)",
               expect=dict(outcome="ready", vllm_release="0.12.0", max_stage_seconds=200,
                           facts=dict(tensor_parallel_size=2, engine_seconds=180.52),
                           stages=HAPPY_STAGES)))
def _v0120_newyear(L: Log) -> None:
    happy(L)



@scenario(Spec("incomplete_v0.14.1_node2-all-deduped_plain", "0.14.1",
               description="Ray dedup holds back every line node 2 printed (each has the same key as rank 0's): "
               "only the placement group's per-node warnings say there are two nodes, so weights wait for the "
               "second 'Model loading took'",
               expect=dict(outcome="incomplete", vllm_release="0.14.1", current="weights",
                           nodes=["head"],
                           stages=stages(distributed="done", weights="running", compile="pending"))))
def _inc_dedup(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    s3_distributed(L)
    s4_weights(L, node2=False)
    L.lines = [ln for ln in L.lines if f"ip={NODE2_IP}" not in ln]



@scenario(Spec("happy_v0.32.0_v1-rayv2-json_plain", "0.32.0", json_format=True,
               description="0.32 JSON log formatter: one JSON object per vLLM record; Ray still prefixes the "
               "forwarded worker records ((RayWorkerProc pid, ip) {...}); bars and uvicorn stay plain text",
               expect=dict(outcome="ready", vllm_release="0.32.0",
                           facts=dict(tensor_parallel_size=2, weights_gib=30.57, kv_cache_tokens=395488,
                                      max_concurrency=12.07, api_url="http://0.0.0.0:8000"),
                           nodes=["head", NODE2_IP],
                           progress=dict(cuda_graphs=[35, 35]),
                           stages=HAPPY_STAGES)))
def _v0320_json(L: Log) -> None:
    happy(L)



@scenario(Spec("fail_kv_cache_insufficient_v0.33.0_rayv2-json_plain", "0.33.0", json_format=True,
               description="0.33 JSON formatter: 'EngineCore failed to start.' with the traceback in exc_info; the "
               "process then prints the raw traceback, whose last line is the root cause",
               expect=dict(outcome="failed", failure_kind="kv_cache_insufficient", failure_stage="kv_cache",
                           root_cause="KV cache is needed, which is larger than the available KV cache memory",
                           nodes=["head", NODE2_IP],
                           stages=stages(weights="done", compile="done", kv_cache="failed"))))
def _f_kv_json(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    s3_distributed(L)
    s4_weights(L)
    s5_compile(L)
    L.info(0, "gpu_worker.py:298", "Available KV cache memory: 4.2 GiB")
    L.info(1, "gpu_worker.py:298", "Available KV cache memory: 4.1 GiB")
    engine_core_failed(L, [("v1/core/kv_cache_utils.py", 686, "check_enough_kv_cache_memory", "raise ValueError(")],
                       "ValueError: To serve at least one request with the model's max seq len (131072), (16.00 "
                       "GiB KV cache is needed, which is larger than the available KV cache memory (4.10 GiB). "
                       "Based on the available memory, the estimated maximum model length is 33584. Try "
                       "increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
                       "engine.")



@scenario(Spec("happy_v0.17.1_restart-after-hang_plain", "0.17.1",
               description="one log file, two starts: the first hangs in weights and is killed (no error), the "
               "second (30 min later, same log) comes up; the timeline is the second start's",
               expect=dict(outcome="ready", vllm_release="0.17.1", max_stage_seconds=200,
                           facts=dict(tensor_parallel_size=2, weights_gib=30.57, api_url="http://0.0.0.0:8000"),
                           stages=HAPPY_STAGES)))
def _restart(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    s3_distributed(L)
    L.info(0, "gpu_model_runner.py:4735", f"Starting to load model {MODEL}...")
    L.shard_bar(0, 8, upto=2)
    L.tick(1800)
    happy(L)


@scenario(Spec("fail_oom_v0.17.1_ray-oom-killer_plain", "0.17.1",
               description="unified memory: Ray's memory monitor kills node 2's worker while weights load (raylet "
               "'killed due to memory pressure (OOM)'), the driver then sees ActorDiedError: the cause is the OOM",
               expect=dict(outcome="failed", failure_kind="oom", failure_stage="weights",
                           root_cause="killed due to memory pressure (OOM)",
                           hint="Ray's memory monitor killed a worker",
                           stages=stages(distributed="done", weights="failed"))))
def _f_ray_oom(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    s3_distributed(L)
    L.info(0, "gpu_model_runner.py:4735", f"Starting to load model {MODEL}...")
    L.shard_bar(0, 8, upto=5)
    L.tick(30)
    stamp = L.t.strftime("%Y-%m-%d %H:%M:%S") + ",123"
    L.raw("ec", f"(raylet, ip={NODE2_IP}) [{stamp} E 412 412] (raylet) node_manager.cc:3157: 1 Workers (tasks / "
          "actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: "
          f"4f1e0c77ab2d9e8810, IP: {NODE2_IP}) over the last time period. To see more information about the "
          f"Workers killed on this node, use `ray logs raylet.out -ip {NODE2_IP}`")
    L.tick(2)
    engine_core_failed(L, [("v1/executor/ray_distributed_executor.py", 512, "_run_workers",
                            "ray_worker_outputs = ray.get(ray_worker_outputs)")],
                       "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
                       "\tclass_name: RayWorkerWrapper\n\tactor_id: 7440b1f2c6e0aa51b9e3f5a701000000\n\tpid: 5237\n"
                       f"\tip: {NODE2_IP}\nThe actor is dead because its worker process has died. Worker exit type: "
                       "SYSTEM_ERROR Worker exit detail: Task was killed due to the node running low on memory.")



@scenario(Spec("fail_no_gpu_on_node_v0.20.2_mp-no-cuda_plain", "0.20.2", executor="mp",
               description="no Ray: an mp worker finds no GPU in init_device ('No CUDA GPUs are available'): the "
               "failure is in the workers' start, there is no placement group",
               expect=dict(outcome="failed", failure_kind="no_gpu_on_node", failure_stage="distributed",
                           root_cause="RuntimeError: No CUDA GPUs are available",
                           hint="No GPU is visible to vLLM",
                           stages=stages(config="done", placement="skipped", distributed="failed",
                                         weights="pending"))))
def _f_nocuda(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    mp_worker_failed(L, 0, [
        ("v1/worker/gpu_worker.py", 201, "init_device", "torch.cuda.set_device(self.device)"),
        ("../torch/cuda/__init__.py", 372, "_lazy_init", "torch._C._cuda_init()"),
    ], "RuntimeError: No CUDA GPUs are available")


@scenario(Spec("fail_no_gpu_on_node_v0.26.0_api-no-device_docker", "0.26.0", launcher="docker",
               description="a container started without GPUs: platform detection fails in the API server before "
               "any engine ('Failed to infer device type')",
               expect=dict(outcome="failed", failure_kind="no_gpu_on_node", failure_stage="config",
                           root_cause="Failed to infer device type",
                           stages=stages(config="failed", placement="pending"))))
def _f_nodevice(L: Log) -> None:
    s0_version(L)
    L.raw("api", tb_lines([
        ("engine/arg_utils.py", 1480, "create_engine_config", "device_config = DeviceConfig(device=cast(Device, current_platform.device_type))"),
        ("config/device.py", 58, "__post_init__", "raise RuntimeError("),
    ], "RuntimeError: Failed to infer device type, please set the environment variable `VLLM_LOGGING_LEVEL=DEBUG` "
       "to turn on verbose logging to help debug the issue."))



@scenario(Spec("happy_v0.22.1_request-errors-after-ready_plain", "0.22.1",
               description="after ready, a bad request: the API logs an ERROR with a traceback and answers 400; "
               "the server keeps serving, so the outcome stays ready",
               expect=dict(outcome="ready", vllm_release="0.22.1",
                           facts=dict(tensor_parallel_size=2, api_url="http://0.0.0.0:8000"),
                           stages=HAPPY_STAGES)))
def _ready_then_request_error(L: Log) -> None:
    happy(L)
    L.tick(60)
    L.log("api", "ERROR", "serving_chat.py:262", "Error in preprocessing prompt inputs\n" + tb_lines([
        ("entrypoints/openai/serving_chat.py", 245, "create_chat_completion", "conversation, engine_prompts = await self._preprocess_chat("),
        ("entrypoints/openai/serving_engine.py", 1037, "_validate_input", "raise ValueError("),
    ], "ValueError: This model's maximum context length is 32768 tokens. However, your request has 40100 input "
       "tokens. Please reduce the length of the input messages."))
    L.uvicorn('10.0.0.7:52130 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request')
    L.tick(5)
    L.uvicorn('10.0.0.7:52131 - "POST /v1/chat/completions HTTP/1.1" 200 OK')



@scenario(Spec("happy_v0.31.0_v1-rayv2-logprefix_docker", "0.31.0", logging_prefix="[spark-a] ", launcher="docker",
               description="0.31+ VLLM_LOGGING_PREFIX: the free text now comes before the formatter's process "
               "prefix ('[spark-a] (EngineCore pid=…) INFO …'), after Ray's prefix on forwarded lines",
               expect=dict(outcome="ready", vllm_release="0.31.0",
                           facts=dict(tensor_parallel_size=2, weights_gib=30.57, kv_cache_tokens=395488,
                                      api_url="http://0.0.0.0:8000"),
                           nodes=["head", NODE2_IP],
                           stages=HAPPY_STAGES)))
def _v0310_prefix(L: Log) -> None:
    happy(L)



@scenario(Spec("happy_v0.30.0_v1-rayv2-hisparse_slurm", "0.30.0", launcher="slurm",
               description="0.30: '%s KV cache size' with the device word 'GPU + host' (HiSparse), ETP rank in the "
               "rank assignment line",
               expect=dict(outcome="ready", vllm_release="0.30.0",
                           facts=dict(tensor_parallel_size=2, kv_cache_tokens=1587648, max_concurrency=48.45,
                                      api_url="http://0.0.0.0:8000"),
                           stages=HAPPY_STAGES)))
def _v0300(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    s3_distributed(L)
    s4_weights(L)
    s5_compile(L)
    s6_kv(L, tokens=1_587_648, conc=48.45, device="GPU + host")
    s7_graphs(L)
    s8_engine(L)
    s9_api(L)


@scenario(Spec("happy_v0.11.0_v1-ray-cachehit_docker", "0.11.0", cache_hit=True, launcher="docker",
               description="0.11 compile-cache hit: 'Directly load the compiled graph(s) for dynamic shape from the "
               "cache, took N s', nothing compiled",
               expect=dict(outcome="ready", vllm_release="0.11.0",
                           facts=dict(tensor_parallel_size=2, compile_cache_hit=True, compile_seconds=12.1),
                           stages=_with(HAPPY_STAGES, compile="skipped"))))
def _v0110_hit(L: Log) -> None:
    happy(L)


@scenario(Spec("happy_v0.21.0_v1-rayv2-tp4-2x2-dedup_plain", "0.21.0", tp=4, gpus_per_node=2,
               description="0.21 RayExecutorV2 TP=4 on 2 nodes x 2 GPUs: the every-rank world_size line is folded "
               "by Ray ('[repeated 3x across cluster]'), once-per-node lines come from each node's first rank",
               expect=dict(outcome="ready", vllm_release="0.21.0",
                           facts=dict(tensor_parallel_size=4, world_size=4, weights_gib=30.57),
                           progress=dict(distributed=[4, 4]),
                           nodes=["head", NODE2_IP],
                           stages=HAPPY_STAGES)))
def _v0210_dedup(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    L.info(0, "parallel_state.py:1402", f"world_size=4 rank=0 local_rank=0 distributed_init_method=tcp://{HEAD_IP}:43523 "
           "backend=nccl")
    L.tick(6)
    L.log(3, "INFO", "parallel_state.py:1402", f"world_size=4 rank=3 local_rank=1 distributed_init_method=tcp://"
          f"{HEAD_IP}:43523 backend=nccl", repeat=3)
    for r in (0, 2):
        L.info(r, "pynccl.py:70", "vLLM is using nccl==2.27.3")
    L.info(0, "parallel_state.py:1325", _rank_line(L, 0))
    L.log(3, "INFO", "parallel_state.py:1325", _rank_line(L, 3), repeat=3)
    s4_weights(L)
    s5_compile(L)
    s6_kv(L)
    s7_graphs(L)
    s8_engine(L)
    s9_api(L)



@scenario(Spec("happy_v0.7.3_v0-mp-eager_plain", "0.7.3", executor="mp_v0", eager=True,
               description="V0 multiprocessing TP=2 with --enforce-eager: (VllmWorkerProcess pid) for rank 1 (ANSI), "
               "rank 0 in the engine process; no CUDA graphs, engine init closes the start",
               expect=dict(outcome="ready", vllm_release="0.7.3",
                           facts=dict(tensor_parallel_size=2, enforce_eager=True, weights_gib=30.57,
                                      kv_cache_gib=48.31, max_concurrency=12.07, engine_seconds=180.52),
                           stages=_with(HAPPY_STAGES, placement="skipped", compile="skipped",
                                        cuda_graphs="skipped"))))
def _v073_mp(L: Log) -> None:
    happy(L)



@scenario(Spec("fail_worker_died_v0.19.1_mp-segfault_plain", "0.19.1", executor="mp",
               description="an mp worker segfaults in CUDA-graph capture: CPython's faulthandler prints 'Fatal Python "
               "error: Segmentation fault' (raw, with the worker's prefix), then the EC says the worker died: the "
               "segfault is the root cause",
               expect=dict(outcome="failed", failure_kind="worker_died", failure_stage="cuda_graphs",
                           root_cause="Fatal Python error: Segmentation fault",
                           stages=stages(kv_cache="done", cuda_graphs="failed"))))
def _f_segv(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s3_distributed(L)
    s4_weights(L)
    s5_compile(L)
    s6_kv(L)
    L.graph_bar(0, "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)", 51, upto=7)
    L.raw(0, "Fatal Python error: Segmentation fault\n\nThread 0x0000ffff8c6df120 (most recent call first):\n"
          '  File "/usr/local/lib/python3.12/dist-packages/torch/cuda/graphs.py", line 186 in __exit__\n'
          '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 4211 in '
          "capture_model")
    L.tick(2)
    L.log("ec", "ERROR", "multiproc_executor.py:241",
          "Worker proc VllmWorker-0 died unexpectedly, shutting down executor.")
    engine_core_failed(L, [("v1/executor/multiproc_executor.py", 267, "collective_rpc", "raise RuntimeError(")],
                       "RuntimeError: Worker failed with error 'Worker proc VllmWorker-0 died unexpectedly', please "
                       "check the stack trace above for the root cause")



@scenario(Spec("fail_oom_v0.21.0_rayv2-memory-monitor_docker", "0.21.0", launcher="docker",
               description="unified memory at 95 %: Ray's memory monitor kills the worker task; the driver's "
               "traceback ends in ray.exceptions.OutOfMemoryError with Ray's numbers",
               expect=dict(outcome="failed", failure_kind="oom", failure_stage="weights",
                           root_cause="ray.exceptions.OutOfMemoryError: Task was killed due to the node running low",
                           hint="Ray's memory monitor killed a worker",
                           stages=stages(distributed="done", weights="failed"))))
def _f_ray_oom2(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    s3_distributed(L)
    L.info(0, "gpu_model_runner.py:4735", f"Starting to load model {MODEL}...")
    L.shard_bar(0, 8, upto=4)
    L.tick(40)
    engine_core_failed(L, [("v1/executor/ray_executor_v2.py", 402, "collective_rpc", "return ray.get(refs)")],
                       "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
                       f"Memory on the node (IP: {NODE2_IP}, ID: 4f1e0c77ab2d9e8810) where the task (actor ID: "
                       "7440b1f2c6e0aa51b9e3f5a701000000, name=RayWorkerProc.__init__, pid=5237, memory used=98.12GB) "
                       "was running was 113.76GB / 119.70GB (0.950345), which exceeds the memory usage threshold of "
                       "0.95. Ray killed this worker (ID: 9c1f) because it was the most recently scheduled task; to "
                       "see more information about memory usage on this node, use `ray logs raylet.out -ip "
                       f"{NODE2_IP}`.")



@scenario(Spec("fail_ip_mismatch_v0.33.0_autoscaler-v2_plain", "0.33.0",
               description="Ray 2.60's autoscaler v2 wording (reference F9): 'No available node types can fulfill "
               "placement group requests (detail=…): {…'node:<ip>'…}*1' with no 'Error:' in front",
               expect=dict(outcome="failed", failure_kind="ip_mismatch", failure_stage="placement",
                           root_cause="No available node types can fulfill placement group requests",
                           stages=stages(config="done", placement="failed", distributed="pending"))))
def _f_ip_v2(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L, waits=(10,), placed=False)
    L.raw("ec", "(autoscaler +12s) No available node types can fulfill placement group requests (detail=STRICT_PACK "
          "placement group 9d4c1e): {'GPU': 1.0, 'node:10.0.0.9': 0.001}*1, {'GPU': 1.0}*1. Add suitable node types "
          "to this cluster to resolve this issue.")
    L.tick(20)
    L.info("ec", "ray_utils.py:267", "Waiting for creating a placement group of specs for 30 seconds. "
           "specs=[{'node:10.0.0.9': 0.001, 'GPU': 1.0}, {'GPU': 1.0}]. Check `ray status` and `ray list "
           "nodes` to see if you have enough resources, and make sure the IP addresses used by ray cluster are "
           "the same as VLLM_HOST_IP environment variable specified in each node if you are running on a "
           "multi-node.")



@scenario(Spec("happy_v0.19.1_benign-traceback_plain", "0.19.1", executor="mp",
               description="a library prints a caught exception's traceback (traceback.print_exc) while a worker "
               "imports, and the start goes on to ready: an unexplained exception followed by progress is not a "
               "failure",
               expect=dict(outcome="ready", vllm_release="0.19.1",
                           facts=dict(tensor_parallel_size=2, api_url="http://0.0.0.0:8000"),
                           stages=_with(HAPPY_STAGES, placement="skipped"))))
def _benign_tb(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    L.raw(1, tb_lines([("../flashinfer/jit/__init__.py", 41, "<module>", "from .. import flashinfer_kernels")],
                      "ImportError: cannot import name 'flashinfer_kernels' from partially initialized module "
                      "'flashinfer' (most likely due to a circular import)").replace("/vllm/../", "/"))
    s3_distributed(L)
    s4_weights(L)
    s5_compile(L)
    s6_kv(L)
    s7_graphs(L)
    s8_engine(L)
    s9_api(L)


# ---- issue 12's failure classes ----------------------------------------------------------------------

@scenario(Spec("fail_driver_mismatch_v0.26.0_mp-error803_plain", "0.26.0", executor="mp",
               description="the image's CUDA runtime needs a newer driver: torch's cudaGetDeviceCount() error "
               "803 in the worker's init_device",
               expect=dict(outcome="failed", failure_kind="driver_mismatch", failure_stage="distributed",
                           root_cause="Error 803: system has unsupported display driver / cuda driver combination",
                           hint="sm_121", stages=stages(config="done", distributed="failed", weights="pending"))))
def _f_driver(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    mp_worker_failed(L, 0, [
        ("v1/worker/gpu_worker.py", 190, "init_device", "torch.cuda.set_device(self.device)"),
        ("../torch/cuda/__init__.py", 412, "_lazy_init", "torch._C._cuda_init()"),
    ], "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
       "NumCudaDevices() that might have already set an error? Error 803: system has unsupported display driver / "
       "cuda driver combination")


@scenario(Spec("happy_v0.33.0_stopped-by-sigterm_plain", "0.33.0",
               description="ready, served, then SIGTERM: '[shutdown] EngineCore: trigger received signal=SIGTERM', "
               "the API server's EngineDeadError and uvicorn's shutdown are the stop, not a failure",
               expect=dict(outcome="stopped", facts=dict(stop_signal="SIGTERM", served_seconds=330.0),  # 30 s to the stats line + 300
                           stages=HAPPY_STAGES)))
def _stopped(L: Log) -> None:
    happy(L)
    L.tick(300)
    L.info("ec", "core.py:1011", "[shutdown] EngineCore: trigger received signal=SIGTERM")
    L.info("ec", "core.py:1074", "[shutdown] EngineCore: start mode=abort timeout=0s")
    L.log("api", "ERROR", "async_llm.py:693", "AsyncLLM output_handler failed.")
    L.raw("api", "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace "
          "(above) for the root cause.")
    L.uvicorn("Shutting down")


@scenario(Spec("fail_kernel_unsupported_v0.26.0_triton-smem-after-ready_plain", "0.26.0", executor="mp",
               description="serves, then a Triton kernel needs more shared memory than GB10 has: "
               "'EngineCore encountered a fatal error.' + triton.runtime.errors.OutOfResources",
               expect=dict(outcome="failed", failure_kind="kernel_unsupported", failure_stage="serving",
                           root_cause="crashed after serving 2m30s", hint="sm_121")))  # stats line at +30 s, crash +120 s
def _f_smem(L: Log) -> None:
    happy(L)
    L.tick(120)
    L.log("ec", "ERROR", "core.py:1027", "EngineCore encountered a fatal error.\n" + tb_lines([
        ("v1/engine/core.py", 1018, "run_engine_core", "engine_core.run_busy_loop()"),
        ("../triton/runtime/jit.py", 419, "run", "kernel = self.compile(src, target=target, options=options.__dict__)"),
    ], "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 147456, Hardware limit: "
       "101376. Reducing block sizes or `num_stages` may help.").replace("/vllm/../", "/"))
    L.log("api", "ERROR", "core_client.py:564", "Engine core proc EngineCore died unexpectedly, shutting down client.")


# ---- issue 31's failure classes ----------------------------------------------------------------------

PROFILE_FRAMES = [
    ("v1/worker/gpu_worker.py", 290, "determine_available_memory", "self.model_runner.profile_run()"),
    ("v1/worker/gpu_model_runner.py", 3511, "profile_run", "hidden_states, last_hidden_states = self._dummy_run("),
]


@scenario(Spec("fail_attention_backend_v0.26.0_mp-selected-backend-kv-dtype_plain", "0.26.0", executor="mp",
               description="--attention-backend FLASHINFER with --kv-cache-dtype nvfp4: platforms/cuda.py's "
               "'Selected backend %s is not valid for this configuration. Reason: %s' while the model is built",
               expect=dict(outcome="failed", failure_kind="attention_backend", failure_stage="weights",
                           root_cause="is not valid for this configuration", hint="Remove the setting",
                           stages=stages(distributed="done", weights="failed"))))
def _f_attn(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s3_distributed(L)
    L.info(0, "gpu_model_runner.py:4735", f"Starting to load model {MODEL}...")
    L.tick(3)
    mp_worker_failed(L, 0, [
        ("v1/worker/gpu_worker.py", 260, "load_model", "self.model_runner.load_model(eep_scale_up=eep_scale_up)"),
        ("model_executor/model_loader/utils.py", 57, "initialize_model", "model = model_class(vllm_config=vllm_config, prefix=prefix)"),
        ("attention/layer.py", 222, "__init__", "self.attn_backend = get_attn_backend("),
        ("platforms/cuda.py", 404, "get_attn_backend_cls", "raise ValueError("),
    ], "ValueError: Selected backend AttentionBackendEnum.FLASHINFER is not valid for this configuration. Reason: "
       "['kv_cache_dtype not supported']")


@scenario(Spec("fail_triton_ptxas_v0.26.0_uniproc-sm121a_plain", "0.26.0", executor="mp", tp=1,
               description="GB10 with Triton 3.5's bundled ptxas: Triton's PTXASError ('`ptxas` stderr:' + "
               "\"ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'\") in the profile run",
               expect=dict(outcome="failed", failure_kind="triton_ptxas", failure_stage="kv_cache",
                           root_cause="PTXASError", hint="TRITON_PTXAS_PATH",
                           stages=stages(weights="done", kv_cache="failed"))))
def _f_ptxas(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s4_weights(L)
    L.tick(5)
    engine_core_failed(L, [*PROFILE_FRAMES,
                           ("../triton/backends/nvidia/compiler.py", 442, "make_cubin", 'raise PTXASError(f"{error}\\n"')],
                       "triton.runtime.errors.PTXASError: PTXAS error: Internal Triton PTX codegen error\n`ptxas` stderr:\n"
                       "ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'\n\nRepro command: "
                       "/usr/local/lib/python3.12/dist-packages/triton/backends/nvidia/bin/ptxas -lineinfo -v "
                       "--gpu-name=sm_121a /tmp/tmpkw7ug6t8.ptx -o /tmp/tmpkw7ug6t8.ptx.o")


@scenario(Spec("fail_jit_build_v0.26.0_uniproc-flashinfer-ninja_plain", "0.26.0", executor="mp", tp=1,
               description="FlashInfer JIT-builds its sampling kernel in the profile run and nvcc does not know "
               "the GPU: FlashInfer's 'RuntimeError: Ninja build failed. Ninja output:' with ninja's "
               "'ninja: build stopped: subcommand failed.'",
               expect=dict(outcome="failed", failure_kind="jit_build", failure_stage="kv_cache",
                           root_cause="Ninja build failed", hint="FlashInfer",
                           stages=stages(weights="done", kv_cache="failed"))))
def _f_ninja(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s4_weights(L)
    L.tick(9)
    engine_core_failed(L, [*PROFILE_FRAMES,
                           ("v1/sample/ops/topk_topp_sampler.py", 294, "flashinfer_sample",
                            "next_token_ids = flashinfer.sampling.top_k_top_p_sampling_from_logits("),
                           ("../flashinfer/jit/cpp_ext.py", 286, "run_ninja", "raise RuntimeError(msg) from e")],
                       "RuntimeError: Ninja build failed. Ninja output:\n[1/3] /usr/local/cuda/bin/nvcc "
                       "--generate-dependencies-with-compile -c sampling.cu -o sampling.cuda.o\nFAILED: sampling.cuda.o\n"
                       "nvcc fatal   : Unsupported gpu architecture 'compute_121a'\nninja: build stopped: subcommand failed.")


@scenario(Spec("fail_ray_fatal_v0.26.0_ray-check-failed-after-ready_plain", "0.26.0",
               description="serves, then Ray's RAY_CHECK fails in the EngineCore ('[... C pid tid] "
               "core_worker.cc:N: Check failed: ...' and Ray's SIGABRT report): the engine is gone, whatever the "
               "API server prints after it",
               expect=dict(outcome="failed", failure_kind="ray_fatal", failure_stage="serving",
                           root_cause="Check failed: ", hint="RAY_CHECK")))
def _f_ray_fatal(L: Log) -> None:
    happy(L)
    L.tick(200)
    L.ray_cpp("ec", "C", "core_worker.cc:912", "Check failed: _s.ok() Bad status: RpcError: RPC Error message: "
              "Socket closed; RPC Error details:  rpc_code: 14")
    L.ray_cpp("ec", "E", "logging.cc:440", "*** SIGABRT received at time=1775691200 on cpu 11 ***")
    L.tick(1)
    L.log("api", "ERROR", "core_client.py:564", "Engine core proc EngineCore died unexpectedly, shutting down client.")


@scenario(Spec("fail_worker_died_v0.26.0_ray-remote-segfault-nccl-init_plain", "0.26.0",
               description="the worker on node 2 segfaults while NCCL initialises; only the raylet's report "
               "('A worker died or was killed ... Worker IP address: %s ...') reaches the head: the node is named "
               "from that IP",
               expect=dict(outcome="failed", failure_kind="worker_died", failure_stage="distributed",
                           root_cause="The actor died unexpectedly", failure_node=NODE2_IP, hint=f"on {NODE2_IP}",
                           stages=stages(placement="done", distributed="failed"))))
def _f_remote_segv(L: Log) -> None:
    s0_version(L)
    s1_config(L)
    s2_placement(L)
    L.info(0, "parallel_state.py:1208", "world_size=2 rank=0 local_rank=0 distributed_init_method=tcp://"
           f"{HEAD_IP}:29500 backend=nccl")
    L.tick(4)
    L.raw("ec", "(raylet) A worker died or was killed while executing a task by an unexpected system error. To "
          "troubleshoot the problem, check the logs for the dead worker. Lease ID: 0300000079077fa3 Worker ID: "
          "389fd34f25c9d2fc Node ID: 824dbaf53959a002 Worker IP address: " + NODE2_IP + " Worker port: 10002 "
          "Worker PID: 5237 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a "
          "connection error code 2. End of file. Some common causes include: (1) the process was killed by the "
          "OOM killer due to high memory usage, (2) ray stop --force was called, or (3) the worker crashed "
          "unexpectedly due to SIGSEGV or another unexpected error.")
    L.tick(1)
    engine_core_failed(L, [("v1/executor/ray_distributed_executor.py", 512, "_run_workers",
                            "ray_worker_outputs = ray.get(ray_worker_outputs)")],
                       "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.")


def build(spec: Spec, fn: Callable[[Log], None]) -> bytes:
    log = Log(spec)
    fn(log)
    return log.render()


def manifest() -> list[dict[str, Any]]:
    out = []
    for spec, _ in SCENARIOS:
        out.append({"file": spec.name + ".log", "version": spec.version, "executor": spec.executor,
                    "launcher": spec.launcher + (" crlf" if spec.crlf else ""), "tp": spec.tp,
                    "cluster_nodes": max(1, spec.tp // spec.gpus_per_node) if spec.executor.startswith("ray") else 1,
                    "description": spec.description, "expect": spec.expect})
    return out


def readme() -> str:
    rows = ["# Synthetic vLLM startup logs", "",
            "Written by `tests/synthetic_vllm_logs.py` from vLLM's format strings by version (not copied from",
            "real logs); expectations in `manifest.json` are written by hand in that module; checked by",
            "`tests/test_log_generalise.py`. Regenerate: `.venv/bin/python -m tests.synthetic_vllm_logs`.", "",
            "| log | vLLM | executor | launcher | outcome | failure kind |", "|---|---|---|---|---|---|"]
    for entry in manifest():
        exp = entry["expect"]
        rows.append(f"| {entry['file']} | {entry['version']} | {entry['executor']} | {entry['launcher']} | "
                    f"{exp['outcome']} | {exp.get('failure_kind', '')} |")
    return "\n".join(rows) + "\n"


def write_all(out: Path = OUT) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for stale in set(out.glob("*.log")) - {out / (spec.name + ".log") for spec, _ in SCENARIOS}:
        stale.unlink()
    for spec, fn in SCENARIOS:
        (out / (spec.name + ".log")).write_bytes(build(spec, fn))
    (out / "manifest.json").write_text(json.dumps(manifest(), indent=1, ensure_ascii=False) + "\n",
                                       encoding="utf-8")
    (out / "README.md").write_text(readme(), encoding="utf-8")


if __name__ == "__main__":
    write_all()
