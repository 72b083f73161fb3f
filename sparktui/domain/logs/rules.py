"""Startup rules: which message means which stage event, written from vLLM's format strings by version.

Each rule has a *keyword* (a literal substring that every message the rule can match contains) and an
optional regex. The keyword is the fast path: a message is only tried against the regexes of the
rules whose keyword it contains, and a bulk reader first finds candidate lines with ``str.find`` on
whole blocks of text (see :mod:`.stages`). Version ranges are in the comments; the reference is the
project's ``vllm-log-lines.md`` (§3 stage table, §8 regex set).

Events:
  start      the stage is under way            progress   it moved (optionally with done/total)
  done       finished (printed once, by the EngineCore or API server)
  node_done  finished on one node (printed per node or rank: wait for every expected node)
  fact       facts only                        skip       ``--enforce-eager``: compile + cuda_graphs
  ready      uvicorn "Application startup complete"
  serving    evidence of serving (access log, stats line) for captures without uvicorn's startup lines
Special handlers are named after the data they parse (``config``, ``args``, ``ranks``, ``pg_wait``, ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from sparktui.domain.logs import failures as fl
from sparktui.domain.logs.keywords import KeywordFinder
from sparktui.domain.logs.nccl import KEYWORDS as NCCL_KEYWORDS
from sparktui.domain.logs.patterns import word
from sparktui.domain.logs.spec_decode import KEYWORDS as SPEC_DECODE_KEYWORDS

# The stage names live in one import-free module; re-exported here for the parser's modules.
from sparktui.domain.stage_names import STAGE_INDEX as STAGE_INDEX
from sparktui.domain.stage_names import STAGE_LABELS as STAGE_LABELS
from sparktui.domain.stage_names import STAGES as STAGES

# (regex group, fact key, "int" | "float" | "str", which value wins when several lines give one:
#  "first" | "last" | "max" (per-node figures: the slowest node) | "min" (capacity: the tightest node))
FactSpec = tuple[str, str, str, str]


class RuleEvent(StrEnum):
    """What a rule's message means for its stage (the events above); the stage machine has one handler each
    (``sparktui.domain.logs.stages``). A ``StrEnum``: each value is the event's name above."""

    START = "start"
    PROGRESS = "progress"
    DONE = "done"
    NODE_DONE = "node_done"
    FACT = "fact"
    SKIP = "skip"
    READY = "ready"
    SERVING = "serving"
    STOPPED = "stopped"
    # Special handlers, named after the data they parse.
    CONFIG = "config"
    ARGS = "args"
    RANKS = "ranks"
    PG_WAIT = "pg_wait"
    PG_NODE = "pg_node"
    PREFETCH = "prefetch"
    COMPILED = "compiled"
    CACHE_HIT = "cache_hit"
    UVICORN_URL = "uvicorn_url"


#: Short for the rules table below.
E = RuleEvent


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    keyword: str
    pattern: re.Pattern[str] | None
    stage: str | None
    event: RuleEvent
    facts: tuple[FactSpec, ...] = ()


def _r(name: str, keyword: str, pattern: str | None, stage: str | None, event: RuleEvent,
       *facts: FactSpec) -> Rule:
    return Rule(name, keyword, re.compile(pattern) if pattern else None, stage, event, tuple(facts))


_NUM = r"(?P<{}>-?\d[\d,]*(?:\.\d+)?)"


def _n(group: str) -> str:
    return _NUM.format(group)


RULES: tuple[Rule, ...] = (
    # --- config (API server, then EngineCore) -----------------------------------------------------
    _r("api_version", "vLLM API server version", r"vLLM API server version (?P<v>\S+)", "config", E.START,
       ("v", "vllm_version", "str", "first")),  # <= 0.14
    _r("logo_version", "█  version", r"version\s+(?P<v>\d+\.\d+\S*)\s*$", "config", E.START,
       ("v", "vllm_version", "str", "first")),  # logo banner, 0.15+
    _r("logo_model", "█  model", r"model\s+(?P<m>\S.*?)\s*$", "config", E.START,
       ("m", "model", "str", "first")),
    _r("plain_version", "vLLM server version",
       r"vLLM server version (?P<v>[^\s,]+), serving model (?P<m>\S+)", "config", E.START,
       ("v", "vllm_version", "str", "first"), ("m", "model", "str", "first")),
    _r("non_default_args", "non-default args:", None, "config", E.ARGS),  # 0.9.2+
    _r("namespace_args", "args: Namespace(", None, "config", E.ARGS),  # <= 0.8
    _r("architecture", "Resolved architecture:", r"Resolved architecture: (?P<a>\S+)", "config", E.START,
       ("a", "architecture", "str", "first")),
    _r("max_model_len", "Using max model len", r"Using max model len (?P<n>\d+)", "config", E.FACT,
       ("n", "max_model_len", "int", "first")),
    _r("engine_config", "LLM engine (v",
       r"Initializing an? (?:V[01] )?LLM engine \(v(?P<v>[^)]+)\) with config: (?P<cfg>.*)",
       "config", E.CONFIG),
    _r("backend", "for distributed inference", r"Defaulting to use (?P<b>\w+) for distributed inference",
       "config", E.FACT, ("b", "distributed_executor_backend", "str", "first")),
    # Hard-wrapped pastes lose the prefix on continuation lines; these keep TP/PP/eager readable anyway.
    _r("tp", "tensor_parallel_size", word("tensor_parallel_size") + r"'?\s*[=:]\s*(?P<n>\d+)",
       None, E.FACT, ("n", "tensor_parallel_size", "int", "first")),
    _r("pp", "pipeline_parallel_size", word("pipeline_parallel_size") + r"'?\s*[=:]\s*(?P<n>\d+)",
       None, E.FACT, ("n", "pipeline_parallel_size", "int", "first")),
    _r("dp", "data_parallel_size", word("data_parallel_size") + r"'?\s*[=:]\s*(?P<n>\d+)",
       None, E.FACT, ("n", "data_parallel_size", "int", "first")),
    # "enforce_eager=True" (str(VllmConfig), a whole word) or "'enforce_eager': True" (the args dict).
    _r("eager_flag", "enforce_eager",
       word("enforce_eager") + r"(?:=True\b(?!')|(?<='enforce_eager)': True)", None, E.SKIP),
    _r("eager_warning", "Enforce eager set", None, None, E.SKIP),  # 0.17+
    _r("eager_cudagraph", "Cudagraph is disabled under eager mode", None, None, E.SKIP),  # 0.10.1+
    # --- placement (Ray) --------------------------------------------------------------------------
    _r("ray_connect", "Connecting to existing Ray cluster", r"at address: (?P<a>\S+?)(?:\.\.\.)?$",
       "placement", E.START, ("a", "ray_address", "str", "first")),
    _r("ray_local", "Started a local Ray instance", None, "placement", E.START),
    _r("ray_connected", "Connected to Ray cluster", None, "placement", E.PROGRESS),
    _r("ray_ready", "Ray is already initialized", None, "placement", E.START),
    _r("pg_new", "No current placement group found", None, "placement", E.START),  # 0.8.5+
    _r("pg_existing", "Using the existing placement group", None, "placement", E.START),
    _r("pg_wait", "Waiting for creating a placement group", r"for (?P<s>\d+) seconds", "placement",
       E.PG_WAIT),
    # _verify_bundles warns once per node of the placement group: the count is the number of nodes.
    _r("pg_node", "is bigger than a reserved number of", r"in a node (?P<node>[\w-]+)", "placement",
       E.PG_NODE),
    _r("pg_short", "exceeds the total number of available", None, "placement", E.PROGRESS),
    # --- distributed (workers, NCCL) --------------------------------------------------------------
    _r("dist_init", "distributed_init_method=", r"world_size=(?P<ws>\d+) rank=(?P<r>\d+)", "distributed",
       E.RANKS),  # INFO 0.12+
    _r("rank_assigned", "in world size", r"rank (?P<r>\d+) in world size (?P<ws>\d+) is assigned",
       "distributed", E.RANKS),
    _r("vllm_nccl", "vLLM is using nccl==", r"nccl==(?P<v>\S+)", "distributed", E.START,
       ("v", "nccl_version", "str", "first")),
    _r("nccl_banner", "NCCL version ", r"NCCL version (?P<v>\d[\w.+-]*)", "distributed", E.START,
       ("v", "nccl_version", "str", "first")),
    _r("found_nccl", "Found nccl from library", None, "distributed", E.START),
    _r("gloo", "[Gloo] Rank", None, "distributed", E.START),
    _r("cross_node", "process group spans across nodes", None, "distributed", E.START),
    # --- weights ----------------------------------------------------------------------------------
    _r("load_start", "Starting to load model", r"Starting to load model (?P<m>.+?)(?:\.\.\.)?\s*$", "weights",
       E.START, ("m", "model", "str", "first")),
    _r("load_scratch", "Loading model from scratch", None, "weights", E.START),
    _r("weights_format", "Using model weights format", None, "weights", E.START),
    _r("download", "Time spent downloading weights", r": (?P<s>[\d.]+) seconds", "weights", E.PROGRESS,
       ("s", "download_seconds", "float", "max")),
    _r("prefetch", "Prefetching checkpoint files:", r"%(?<=\d%) \((?P<a>\d+)/(?P<b>\d+)\)", "weights",
       E.PREFETCH),  # 0.18+
    _r("weights_took", "Loading weights took", r"took (?P<s>[\d.]+) seconds", "weights", E.PROGRESS,
       ("s", "weights_load_seconds", "float", "max")),  # 0.8.5+
    _r("model_loading", "oading model weights took",  # V0 <= 0.7: "Loading model weights took X GB"
       rf"took {_n('g')} (?:GiB|GB)", "weights", E.NODE_DONE, ("g", "weights_gib", "float", "max")),
    _r("model_loading2", "Model loading took",  # 0.8+: "... X GiB [memory ]and Y seconds"
       rf"took {_n('g')} (?:GiB|GB)(?: memory)?(?: and {_n('s')} seconds)?", "weights", E.NODE_DONE,
       ("g", "weights_gib", "float", "max"), ("s", "weights_seconds", "float", "max")),
    # --- compile (V1; skipped by --enforce-eager) ----------------------------------------------------
    _r("compile_cache_dir", "for vLLM's torch.compile", None, "compile", E.START),
    _r("compile_disabled", "torch.compile cache is disabled", None, "compile", E.START),
    _r("compile_start", "Starting torch.compile", None, "compile", E.START),  # 0.32+
    _r("dynamo", "Dynamo bytecode transform time", None, "compile", E.PROGRESS),
    _r("compiling", "Compiling a graph for", None, "compile", E.COMPILED),
    _r("cache_graph", "Cache the graph of", None, "compile", E.PROGRESS),
    _r("cache_hit", "Directly load the compiled graph", None, "compile", E.CACHE_HIT),
    _r("aot_hit", "Directly load AOT compilation", None, "compile", E.CACHE_HIT),
    _r("compile_done", "torch.compile t", r"torch\.compile t(?:akes|ook) (?P<s>[\d.]+) s in total", "compile",
       E.NODE_DONE, ("s", "compile_seconds", "float", "max")),
    # --- KV cache (memory profiling and sizing) ---------------------------------------------------
    _r("mem_profiling", "Memory profiling takes", None, "kv_cache", E.START),  # V0
    _r("warmup_run", "Initial profiling/warmup run took", None, "kv_cache", E.START),  # 0.18+
    _r("cg_mem_profile", "Profiling CUDA graph memory", None, "kv_cache", E.START),  # 0.18+
    _r("cg_mem_estimate", "Estimated CUDA graph memory", None, "kv_cache", E.PROGRESS),
    _r("kv_available", "Available KV cache memory:", rf"memory: {_n('g')} GiB", "kv_cache", E.PROGRESS,
       ("g", "kv_cache_gib", "float", "min")),  # 0.9.2+
    _r("kv_v0", "reserved for KV Cache is", rf"KV Cache is {_n('g')} ?GiB", "kv_cache", E.PROGRESS,
       ("g", "kv_cache_gib", "float", "min")),
    _r("kv_tokens", "KV cache size:", rf"KV cache size: {_n('t')} tokens", "kv_cache", E.PROGRESS,
       ("t", "kv_cache_tokens", "int", "min")),
    _r("kv_blocks", " blocks: ", r"# (?:\w+ )?\w+ blocks: (?P<b>\d+)", "kv_cache", E.PROGRESS,
       ("b", "kv_cache_blocks", "int", "last")),
    _r("kv_concurrency", "Maximum concurrency for",
       rf"for {_n('l')} tokens per request: {_n('x')}x", "kv_cache", E.DONE,
       ("x", "max_concurrency", "float", "min")),
    # --- CUDA graphs (bars are handled from LogRecord.progress) -----------------------------------
    _r("cg_capture_v0", "Capturing cudagraphs for decoding", None, "cuda_graphs", E.START),  # 0.7.3-0.10
    _r("cg_capture_v06", "Capturing the model for CUDA graphs", None, "cuda_graphs", E.START),  # 0.6
    # The sizes (batch sizes) the engine config says it captures, and the bound on them: in
    # str(CompilationConfig) (0.9+: ``'cudagraph_capture_sizes': [1, 2, 4, ...]`` or the JSON
    # ``"cudagraph_capture_sizes":[512,504,...]`` of 0.10) and ``max_capture_size`` (<= 0.10) /
    # ``max_cudagraph_capture_size`` (0.11+). The capture's time grows with their number.
    _r("cg_sizes", "cudagraph_capture_sizes", r"cudagraph_capture_sizes['\"]?\s*[:=]\s*\[(?P<l>[\d,\s]*)\]",
       None, E.FACT, ("l", "cuda_graphs_sizes", "count", "last")),
    _r("cg_max_size", "capture_size", r"max_(?:cudagraph_)?capture_size['\"]?\s*[:=]\s*(?P<n>\d+)",
       None, E.FACT, ("n", "cuda_graphs_max_size", "int", "last")),
    _r("cg_done", "Graph capturing finished in",
       rf"in {_n('s')} secs(?:, took {_n('g')} GiB)?", "cuda_graphs", E.NODE_DONE,
       ("s", "cuda_graphs_seconds", "float", "max"), ("g", "cuda_graphs_gib", "float", "max")),
    # --- engine -----------------------------------------------------------------------------------
    _r("engine_done", "init engine (profile",
       rf"took {_n('s')} s(?:econds)?(?: \(compilation: {_n('c')} s)?", "engine", E.DONE,
       ("s", "engine_seconds", "float", "last")),
    # --- API server -------------------------------------------------------------------------------
    _r("tasks", "upported", r"^Supported[_ ]tasks", "api", E.START),
    _r("api_url", "Starting vLLM ", r"Starting vLLM (?:API )?server(?: \d+)? on (?P<u>\S+)", "api", E.START,
       ("u", "api_url", "str", "last")),
    _r("routes", "Available routes are", None, "api", E.PROGRESS),
    _r("uvicorn_started", "Started server process", None, "api", E.PROGRESS),
    _r("uvicorn_waiting", "Waiting for application startup", None, "api", E.PROGRESS),
    _r("ready", "Application startup complete", None, "api", E.READY),
    # uvicorn's "Uvicorn running on %s" (host:port or a socket); vLLM <= 0.6 prints no URL of its own.
    _r("uvicorn_url", "Uvicorn running on",
       r"Uvicorn running on (?:socket \('(?P<h>[^']*)', (?P<p>\d+)|(?P<u>https?://[^\s]+))", "api",
       E.UVICORN_URL),
    _r("access_log", ' HTTP/1.', r'"[A-Z]+ \S+ HTTP/[\d.]+" [23]\d\d', "api", E.SERVING),
    _r("stats_line", "Avg prompt throughput:", None, "api", E.SERVING),
    # --- a clean stop after ready (only read once the API is up) ---------------------------------------
    # v1/engine/core.py signal_handler: "[shutdown] EngineCore: trigger received signal=%s" (0.2x+); uvicorn's
    # "Shutting down" / "Waiting for application shutdown." / "Application shutdown complete."; vLLM's
    # launcher "Shutting down FastAPI HTTP server." (<= 0.10).
    _r("stop_signal", "[shutdown] EngineCore: trigger received signal", r"signal=(?P<sig>\w+)", None,
       E.STOPPED, ("sig", "stop_signal", "str", "first")),
    _r("stop_uvicorn", "Shutting down", r"^Shutting down(?: FastAPI HTTP server)?\.?\s*$", None, E.STOPPED),
    _r("stop_app", "application shutdown", None, None, E.STOPPED),
    _r("stop_app_done", "Application shutdown complete", None, None, E.STOPPED),
    # Slurm's slurmstepd: "*** JOB %u ON %s CANCELLED AT %s[ DUE TO TIME LIMIT|PREEMPTION|...] ***" (also
    # "*** STEP %u.%u ON ..."): the job was stopped from outside (scancel, time limit), not a crash.
    # The API server's SIGTERM handler while it starts (0.6 - 0.9 api_server.py signal_handler: "raise
    # KeyboardInterrupt("terminated")"): stopped from outside before ready, not a failure. (Ctrl-C prints a
    # bare "KeyboardInterrupt".) The one stop read before ready (STOP_BEFORE_READY).
    _r("stop_interrupt", "KeyboardInterrupt: terminated", None, None, E.STOPPED),
    _r("stop_slurm", "CANCELLED AT", r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT ", None, E.STOPPED),
)
STOP_KEYWORDS: tuple[str, ...] = tuple(r.keyword for r in RULES if r.event is RuleEvent.STOPPED)
STOP_BEFORE_READY = frozenset({"stop_interrupt"})

# Substrings that make a line worth the error path (see failures.py). Every signature keyword is in
# one of these or in the exception shape (``...Error: ``), so the bulk scan never skips a root cause.
ERROR_KEYWORDS: tuple[str, ...] = (
    "ERROR", "Error", "Exception", "CRITICAL", "failed", "died", "Dead", "fatal", "out of memory",
    "Address already in use", "Timed out", "Cannot provide a placement group", "not supported",
    "no kernel image", "has no ", "unrecognized arguments", "error: argument", ": error: ", "Value error, ",
    # Signatures that can stand on a line with no header and no "...Error:" in it: raw tracebacks'
    # "torch._dynamo.exc.BackendCompilerFailed: ..." / "torch._dynamo.exc.Unsupported: ...", Ray's raylet
    # "... killed due to memory pressure (OOM) ...", the autoscaler's "No available node types ...".
    "Failed", "_dynamo.exc", "memory pressure", "No available node types", "Fatal Python error",
    "Segmentation fault", "SIGSEGV received",
    # Exception classes whose name ends in neither Error nor Exception (triton.runtime.errors.OutOfResources),
    # c10d's watchdog (ProcessGroupNCCL.cpp), HIP/CUDA kernel and driver errors (see failures.SIGNATURES).
    "OutOfResources", "out of resource: ", "atchdog", "NCCL communicator was aborted", "Some NCCL operations",
    "invalid kernel file", "invalid device function", "kernel image is invalid", "Error 803", "driver",
    "forward compatibility",
    # A traceback starts (its frames belong to it), and the lines vLLM's "Reasons:" messages go on with.
    "Traceback (most recent call last)", "cannot implement due to", "requires capability",
    # Triton's PTXASError goes on with ptxas's own lines ("`ptxas` stderr:", "ptxas fatal   : Value
    # 'sm_121a' is not defined for option 'gpu-name'").
    "`ptxas` stderr", "is not defined for option 'gpu-name'",
    # Ray's fatal check (RAY_CHECK: "Check failed: ..."), also read while serving.
    "Check failed",
    *fl.FRAME_KEYWORDS,
)
# Progress bars: the bar text itself (a record may have lost its header).
BAR_KEYWORDS: tuple[str, ...] = (
    "checkpoint shards", "Loading safetensors", "shards:", "Capturing ", "Fetching ", "Downloading",
)

STARTUP_KEYWORDS: tuple[str, ...] = tuple(dict.fromkeys(
    [r.keyword for r in RULES] + list(ERROR_KEYWORDS) + list(BAR_KEYWORDS) + list(NCCL_KEYWORDS)
    + list(SPEC_DECODE_KEYWORDS)
))
# Once the API is up only a dying engine or a new start matters: the serving-time flood of stats,
# access-log and NCCL lines is skipped without being parsed.
SERVING_KEYWORDS: tuple[str, ...] = (
    "ERROR", "Error", "died", "Dead", "fatal", "Check failed", "LLM engine (v", "vLLM API server version",
    "█  version",
    "Uvicorn running on", "CRITICAL", "Exception", "OutOfResources", "out of resource: ", "atchdog",
    *STOP_KEYWORDS,
    # NCCL's transport lines of the API server's own ranks come late: NCCL writes through C stdio, block
    # buffered into a pipe (docker/k8s logs), so they can follow "ready" (logs 01, 02); still start-up facts.
    # The three under the one anchor "NET/" (one more pass over a serving block, not three or four).
    *(kw for kw in NCCL_KEYWORDS if "NET/" in kw),
    # Speculative decoding's stats line (every 10 s while serving): its acceptance (.spec_decode).
    *SPEC_DECODE_KEYWORDS,
)  # (no traceback frames: a crash while serving is charged to "engine", whatever the frames say)
# The keyword regexes' entry characters (sparktui.domain.logs.keywords.entries): the cheapest covers of each
# keyword set, found by benchmarks/keyword_entries.py from the real logs' character counts (the regex stops
# at every place one occurs: 8.35, 3.96 and 4.22 stops per 100 characters, where the greedy cover makes
# 11.2, 4.0 and 6.3). Only speed depends on them: a set they no longer cover is covered greedily.
STARTUP_ENTRY_CHARS = "EHLdfgoqwz"
SERVING_ENTRY_CHARS = "ELUdf█"
RULE_ENTRY_CHARS = "GHMNoz"
RESTART_RULES = frozenset({"api_version", "logo_version", "plain_version", "engine_config"})

# --- the bulk scan's anchors -----------------------------------------------------------------------------
# A bulk reader scans each block of text once per anchor (``str.find`` runs in C, ~8 GB/s), so the cost of
# the scan grows with the number of anchors, not keywords. Each keyword belongs to the first anchor here
# that is a substring of it (or is its own anchor); a line found by an anchor is then checked against that
# anchor's keywords only. Anchors are words of vLLM's, Ray's and torch's format strings shared by several
# keywords; ``anchor_groups`` proves every keyword is reachable (a keyword always contains its anchor).
SCAN_ANCHORS: tuple[str, ...] = (
    # Specific phrases first (a keyword takes the first anchor inside it): NCCL INFO floods, Ray's actor
    # prefixes, tqdm bars and config dumps hold "NCCL", "Ray", "█", "graph", "compil", "memory" everywhere.
    "ERROR", "CRITICAL", "xception", "ailed", "NET/", "vLLM", "█  ", "LLM engine", "args:", "argument",
    "_size", "ager", "Ray ", "placement group", "process group", "number of", "world size", "distributed",
    "nccl",
    "NCCL version", "NCCL operations", "NCCL communicator", "[Gloo]", "oad", "rofiling", "took",
    "torch.compile", "Compiling", "graph of", "compiled graph", "CUDA graph", "Dynamo", "KV ",
    "out of memory",
    "emory", " blocks: ", "concurrency", "apturing", "init engine", "upported", "Start", "Waiting for",
    "pplication", "routes", "Uvicorn", " HTTP/1.", "throughput", "died", "Dead", "atal", "shards", "etch",
    "ownload", "Traceback", ", in ", "atchdog", "hutting down", "shutdown", "driver", "compatib",
    "kernel image", "kernel file", "resource", "Timed out", "Address already", "has no ", "No available",
    "Segmentation", "rror", "Reasons", "capability", "Using max", "Using the", "Using model", "architecture",
)


def anchor_groups(keywords: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """anchor -> the keywords it stands for (every keyword in exactly one group, its anchor inside it)."""
    groups: dict[str, list[str]] = {}
    for kw in keywords:
        anchor = next((a for a in SCAN_ANCHORS if a in kw), kw)
        groups.setdefault(anchor, []).append(kw)
    return {a: tuple(kws) for a, kws in groups.items()}


_BY_KEYWORD: dict[str, tuple[Rule, ...]] = {}
for _rule in RULES:
    _BY_KEYWORD[_rule.keyword] = (*_BY_KEYWORD.get(_rule.keyword, ()), _rule)
RULE_KEYWORDS: tuple[str, ...] = tuple(_BY_KEYWORD)
# Which rule keywords a message holds, by one regex pass (C speed; one ``in`` per anchor was most of what a
# record cost the stage machine, and ~60 passes over a 5 KB config dump); hits are put back in table order.
_RULE_FINDER = KeywordFinder(RULE_KEYWORDS, RULE_ENTRY_CHARS)
_RULE_ORDER = {kw: i for i, kw in enumerate(RULE_KEYWORDS)}


def rules_for(message: str) -> list[tuple[Rule, re.Match[str] | None]]:
    """Every rule that matches ``message``, in table order, with its match (None for keyword-only)."""
    found = _RULE_FINDER.find(message)
    if not found:
        return []
    order = sorted(found, key=_RULE_ORDER.__getitem__) if len(found) > 1 else found
    hits: list[tuple[Rule, re.Match[str] | None]] = []
    for kw in order:
        for rule in _BY_KEYWORD[kw]:
            if rule.pattern is None:
                hits.append((rule, None))
            else:
                m = rule.pattern.search(message)
                if m is not None:
                    hits.append((rule, m))
    return hits


def convert(value: str, kind: str) -> object:
    if kind == "count":  # the items of a logged list ("1, 2, 4" -> 3)
        return sum(1 for item in value.split(",") if item.strip())
    if kind == "int":
        return int(value.replace(",", ""))
    if kind == "float":
        return float(value.replace(",", ""))
    return value


# ``key=value`` pairs of ``str(VllmConfig)`` and ``'key': value`` pairs of the non-default args dict; a config
# value alone, and what may not stand right before a config key (CONFIG_PAIR's lookbehind).
_CONFIG_VALUE = re.compile(r"'(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^,\s)]+")
CONFIG_PAIR = re.compile(rf"(?<![\w.])(\w+)=({_CONFIG_VALUE.pattern})")
ARGS_PAIR = re.compile(r"'(\w+)': ('(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^,}\s]+)")
_BEFORE_KEY = re.compile(r"[\w.]")


def config_pairs(text: str, keys: tuple[str, ...]) -> list[tuple[str, str]]:
    """The ``key=value`` pairs of ``keys`` in ``text``, in text order: CONFIG_PAIR's pairs of those keys,
    found by one ``str.find`` per key. A 4 KB ``str(VllmConfig)`` holds ~60 pairs and the stage machine
    reads a dozen: the regex spent ~90 µs trying a pair at every place of the line, the finds take a few.
    (Unlike the regex, a ``key=`` inside another pair's value counts too, as the first pair of a nested
    ``SpeculativeConfig(model=...)``: the regex takes the outer value up to the first comma; the model
    comes first in vLLM's config line, and every later nested pair the regex finds as well.)"""
    found: list[tuple[int, str, str]] = []
    find = text.find
    for key in keys:
        needle = key + "="
        at = find(needle)
        while at != -1:
            after = at + len(needle)
            if not (at and _BEFORE_KEY.match(text, at - 1)):
                m = _CONFIG_VALUE.match(text, after)
                if m is not None:
                    found.append((at, key, m.group()))
            at = find(needle, after)
    found.sort()
    return [(key, raw) for _, key, raw in found]
