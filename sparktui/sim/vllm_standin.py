"""A faithful stand-in for `vllm serve … --distributed-executor-backend ray` (no GPU, no model).

    python -m sparktui.sim.vllm_standin serve MODEL --tensor-parallel-size 2 \
        --distributed-executor-backend ray --host 0.0.0.0 --port 8000 [other vLLM flags]

What is real: the Ray cluster it joins (``RAY_ADDRESS`` or ``auto``), the STRICT_SPREAD placement group
with one ``{"GPU": 1}`` bundle per rank (so a missing worker node leaves it waiting, printing vLLM's
placement-group lines, exactly as vLLM does), one ``RayWorkerWrapper`` actor per bundle, and Ray's log
forwarding: the worker lines of a recorded real vLLM start-up are printed *by those actors*, so they reach
this process's output through Ray with Ray's own ``(RayWorkerWrapper pid=…, ip=…)`` prefixes. The head
prints the recording's head lines itself. When the replay reaches uvicorn's "Application startup
complete." it serves `/health`, `/v1/models`, `/metrics` and `/v1/chat/completions` (`standin_http`).

Stand-in options (flags, or environment for launchers that pass only vLLM's flags):

  --standin-pace SECONDS        SPARKTUI_STANDIN_PACE         start-up replay length (default 60)
  --standin-fail KIND           SPARKTUI_STANDIN_FAIL         oom | nccl | crash_after_ready[:SECONDS]
                                                              | wedge_after_ready[:SECONDS] (health 200,
                                                              requests stuck, tokens stop)
  --standin-metrics-dialect D   SPARKTUI_STANDIN_METRICS      old | new metric names (default: by recording)
  --standin-recording NAME      SPARKTUI_STANDIN_RECORDING    a name from sparktui.sim.recording
  --standin-pg-timeout SECONDS  SPARKTUI_STANDIN_PG_TIMEOUT   vLLM's PG wait limit (default 1800)
  --standin-pg-wait-scale X     SPARKTUI_STANDIN_PG_WAIT_SCALE  shrink vLLM's 10,30,70,… s wait cadence
  --standin-seq                 SPARKTUI_STANDIN_SEQ=1        " [seq=N]" on every line we print, and
                                                              heartbeat lines during weight loading
  --standin-serving-logs        SPARKTUI_STANDIN_SERVING_LOGS=1  the periodic stats line even when idle
  --standin-stats-interval S    SPARKTUI_STANDIN_STATS_INTERVAL  stats line period (default 10, vLLM's)

An image's own vLLM (``sparktui.sim.standin_image``): SPARKTUI_STANDIN_VERSION (the version it reports, and
the help style of that version), SPARKTUI_STANDIN_LACKS (flags it lacks), SPARKTUI_STANDIN_SPEED (serving
speed).

Speculative decoding (``sparktui.sim.standin_spec``): with ``--speculative-config`` it counts drafts, exports
``vllm:spec_decode_*`` and prints ``SpecDecoding metrics:`` lines; SPARKTUI_STANDIN_ACCEPTANCE (the draft
model's acceptance at start), SPARKTUI_STANDIN_RUNTIME_FILE (``acceptance=…``/``speed=…`` lines, read every
stats interval and on SIGUSR2: a drop staged while serving).

SIGUSR1 while serving wedges it at once, as ``wedge_after_ready`` does (a fault injected from outside at any
moment: ``benchmarks/soak.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from sparktui.sim import standin_image as image
from sparktui.sim import standin_script as script
from sparktui.sim import standin_spec as spec
from sparktui.sim.recording import DEFAULT_RECORDING, RecordedLine, load_recording, recording_version
from sparktui.sim.standin_compile_cache import CompileCache
from sparktui.sim.standin_flags import add_ignored_vllm_flags
from sparktui.sim.standin_http import ServedModel, StandinHTTPServer
from sparktui.sim.standin_metrics import DIALECTS, Dialect, ServingMetrics
from sparktui.sim.standin_mp import Peer, Rendezvous, run_headless
from sparktui.sim.standin_mp import worker_prefix as mp_worker_prefix

SHUTDOWN_DEADLINE_SECONDS = 2.5
SEQ_HEARTBEAT_SECONDS = 0.25
MAX_ERROR_LINES = 12


class VllmArgumentParser(argparse.ArgumentParser):
    """argparse with vLLM's usage line and error shape (``vllm serve: error: …``, exit 2)."""


def build_parser() -> VllmArgumentParser:
    parser = VllmArgumentParser(
        prog="vllm serve",
        usage="vllm serve [model_tag] [options]",
        description="Launch a local OpenAI-compatible API server to serve LLM "
        "completions via HTTP. (sparktui stand-in engine)",
    )
    parser.add_argument("model_tag", nargs="?", help="The model tag to serve")
    parser.add_argument("--model", default=None)
    parser.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    parser.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    parser.add_argument(
        "--distributed-executor-backend", choices=["ray", "mp", "uni", "external_launcher"], default=None
    )
    parser.add_argument("--host", default=None)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name", nargs="+", default=None)
    parser.add_argument("--max-model-len", type=_human_int, default=None)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    # vLLM's own multi-node mode (no Ray): rank 0 serves, the other ranks run --headless.
    parser.add_argument("--nnodes", "-n", type=int, default=1)
    parser.add_argument("--node-rank", "-r", type=int, default=0)
    parser.add_argument("--master-addr", default="127.0.0.1")
    parser.add_argument("--master-port", type=int, default=29501)
    parser.add_argument("--headless", action="store_true")
    add_ignored_vllm_flags(parser)
    s = parser.add_argument_group("stand-in")
    s.add_argument("--standin-pace", type=float, default=_env_float("SPARKTUI_STANDIN_PACE", 60.0))
    s.add_argument("--standin-fail", default=os.environ.get("SPARKTUI_STANDIN_FAIL") or None)
    s.add_argument(
        "--standin-metrics-dialect",
        choices=DIALECTS,
        default=os.environ.get("SPARKTUI_STANDIN_METRICS") or None,
    )
    s.add_argument(
        "--standin-recording", default=os.environ.get("SPARKTUI_STANDIN_RECORDING") or DEFAULT_RECORDING
    )
    s.add_argument(
        "--standin-pg-timeout", type=float, default=_env_float("SPARKTUI_STANDIN_PG_TIMEOUT", 1800.0)
    )
    s.add_argument(
        "--standin-pg-wait-scale", type=float, default=_env_float("SPARKTUI_STANDIN_PG_WAIT_SCALE", 1.0)
    )
    s.add_argument("--standin-seq", action="store_true", default=_env_flag("SPARKTUI_STANDIN_SEQ"))
    s.add_argument(
        "--standin-serving-logs", action="store_true", default=_env_flag("SPARKTUI_STANDIN_SERVING_LOGS")
    )
    s.add_argument(
        "--standin-stats-interval", type=float, default=_env_float("SPARKTUI_STANDIN_STATS_INTERVAL", 10.0)
    )
    image.hide_lacked(parser, image.lacked_flags())
    return parser


def _human_int(value: str) -> int:
    # vLLM accepts "32768", "32k", "1M" for --max-model-len.
    v = value.strip().lower()
    mult = {"k": 1000, "m": 1_000_000}.get(v[-1:], 1)
    return int(float(v[:-1] if mult > 1 else v) * mult)


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw else default


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = build_parser()
    argv = list(argv)
    version = image.reported_version(
        recording_version(os.environ.get("SPARKTUI_STANDIN_RECORDING") or DEFAULT_RECORDING)
    )
    if argv[:1] in (["--version"], ["-v"]):
        print(version)
        raise SystemExit(0)
    if argv[:2] == ["bench", "serve"]:
        from sparktui.sim import standin_bench

        raise SystemExit(standin_bench.main(argv[2:]))
    if not argv or argv[0] != "serve":
        top = argparse.ArgumentParser(
            prog="vllm", usage="vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ..."
        )
        top.error(
            "argument subparser: invalid choice: "
            f"{argv[0] if argv else ''!r} (choose from 'chat', 'complete', 'serve', 'bench', "
            "'collect-env', 'run-batch')"
        )
    _grouped_help(parser, argv[1:], version)
    lacked = image.lacked_in(argv[1:], image.lacked_flags())
    if lacked:
        parser.error(f"unrecognized arguments: {' '.join(lacked)}")
    args, unknown = parser.parse_known_args(argv[1:])
    # Flags of newer vLLM releases the stand-in does not list are tolerated; stray short options are not.
    stray = [item for item in unknown if item.startswith("-") and not item.startswith("--")]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    args.model = args.model_tag or args.model
    if not args.model:
        parser.error("the following arguments are required: model_tag")
    if args.tensor_parallel_size < 1 or args.pipeline_parallel_size < 1:
        parser.error("argument --tensor-parallel-size/-tp: must be a positive integer")
    fail = args.standin_fail
    if fail and fail.split(":", 1)[0] not in ("oom", "nccl", "crash_after_ready", "wedge_after_ready",
                                                   "placement"):
        parser.error(
            f"argument --standin-fail: invalid choice: {fail!r} (choose from 'oom', 'nccl', "
            "'crash_after_ready[:SECONDS]', 'wedge_after_ready[:SECONDS]', 'placement')"
        )
    return args


def _grouped_help(parser: argparse.ArgumentParser, args: Sequence[str], version: str) -> None:
    """vLLM ≥ 0.10: plain ``--help`` lists the option groups, ``--help=all`` (or ``=<group>``) every flag.
    Older versions fall through to argparse, which prints every flag for ``--help`` and refuses
    ``--help=all`` as they did."""
    if script.version_tuple(version) < image.GROUPED_HELP_SINCE:
        return
    for arg in args:
        if arg in ("-h", "--help"):
            sys.stdout.write(image.grouped_summary(parser))
            raise SystemExit(0)
        if arg.startswith("--help="):
            parser.print_help()
            raise SystemExit(0)


# ---------------------------------------------------------------------------------------------------


class LineWriter:
    """Writes whole lines atomically to a stream shared with Ray's log-forwarding thread.

    Ray prints forwarded worker output with ``print()`` (text, then newline: two writes) from its own
    thread; our lines must never land between the two. Installed as ``sys.stdout``/``sys.stderr``, it
    collects each thread's partial writes and emits complete lines under one lock.
    """

    _lock = threading.Lock()

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._partial: dict[int, str] = {}
        self.prefix = ""
        """vLLM ≤0.30 patched the engine process's stdout/stderr so that every line it wrote, Ray's
        forwarded worker lines included, started with ``(EngineCore… pid=N) ``; the same here for
        everything not written through ``write_line``."""

    def write(self, text: str) -> int:
        ident = threading.get_ident()
        with self._lock:
            buf = self._partial.get(ident, "") + text
            if "\n" in buf:
                complete, _, rest = buf.rpartition("\n")
                if self.prefix:
                    complete = "\n".join(self.prefix + line for line in complete.split("\n"))
                self._stream.write(complete + "\n")
                self._stream.flush()
                buf = rest
            self._partial[ident] = buf
        return len(text)

    def write_line(self, line: str) -> None:
        """One whole line, as is (the replayed head lines carry their own recorded prefixes)."""
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()

    def flush(self) -> None:
        with self._lock:
            self._stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._stream.fileno()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class Stopped(Exception):
    """SIGINT/SIGTERM arrived: unwind to the shutdown path."""


class WorkerLost(Exception):
    """A Ray worker actor is gone (its node died, its Ray was stopped); carries Ray's own error."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class WorkerDied(Exception):
    """A headless rank (vLLM's multi-node mp mode) went away."""


@dataclasses.dataclass
class Worker:
    send: Callable[[list[str]], None]
    node_ip: str
    pid: int
    on_driver_node: bool
    handle: Any = None


class StandinEngine:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.pid = os.getpid()
        # vLLM's torch.compile cache under VLLM_CACHE_ROOT: a cold start compiles and saves an entry, a warm
        # one replays vLLM's cache-hit lines and skips the compile time (a recording that compiles).
        self.compile_cache = CompileCache.for_start(
            load_recording(args.standin_recording),
            (args.standin_recording, args.model, args.tensor_parallel_size, args.pipeline_parallel_size,
             args.max_model_len),
        )
        self.lines = self.compile_cache.lines
        self.anchors = script.find_anchors(self.lines)
        self.pace = self.compile_cache.pace(args.standin_pace, self.anchors.end)
        dialect = script.detect_dialect(self.lines)
        self.dialect = dataclasses.replace(
            dialect,
            api_prefix=dialect.api_prefix.format(pid=self.pid),
            engine_prefix=dialect.engine_prefix.format(pid=self.pid),
        )
        self.world = args.tensor_parallel_size * args.pipeline_parallel_size
        self.served = list(args.served_model_name or [args.model])
        self.max_model_len = args.max_model_len or self.dialect.recorded_max_len or 32768
        self.rewrite = script.Rewriter(
            self.dialect,
            args.model,
            self.served[0],
            args.tensor_parallel_size,
            args.pipeline_parallel_size,
            args.host,
            args.port,
            self.pid,
            args.max_model_len,
            image.reported_version(self.dialect.version),
        )
        fail = (args.standin_fail or "").split(":", 1)
        self.fail = fail[0]
        self.fail_after = float(fail[1]) if len(fail) > 1 and fail[1] else 5.0
        metrics_dialect: Dialect = args.standin_metrics_dialect or (
            "old" if script.version_tuple(self.dialect.version) < (0, 9) else "new"
        )
        self.metrics = ServingMetrics(
            metrics_dialect,
            self.served[0],
            self.max_model_len,
            {
                "num_gpu_blocks": str(self.dialect.recorded_gpu_blocks or 25588),
                "gpu_memory_utilization": str(args.gpu_memory_utilization),
            },
        )
        # --speculative-config: drafts counted, spec_decode counters, SpecDecoding lines (standin_spec).
        k = spec.speculative_tokens(args.speculative_config)
        self.spec = None if k is None else spec.SpecDecode(k, spec.initial_acceptance())
        if self.spec is not None:
            self.metrics.enable_spec(self.spec)
        self.runtime_file = os.environ.get(spec.RUNTIME_FILE_ENV) or None
        self.stop = threading.Event()
        self.seq = 0
        self.seq_lock = threading.Lock()
        self.ray: Any = None
        self.pg: Any = None
        # vLLM's own multi-node mode (no Ray) when asked for mp or for several nodes without Ray.
        self.mp = args.distributed_executor_backend == "mp" or (
            args.nnodes > 1 and args.distributed_executor_backend != "ray"
        )
        self.rendezvous: Rendezvous | None = None
        self.peer_gone = threading.Event()
        #: SIGUSR1: wedge now (while serving).
        self.wedge_now = threading.Event()
        self.engine_error: BaseException | None = None
        self.gone_rank = 0
        self.workers: list[Worker] = []
        self.http: StandinHTTPServer | None = None
        self.serving = False
        self.started = time.monotonic()

    # -- output -------------------------------------------------------------------------------------
    def _mark(self, text: str) -> str:
        if not self.args.standin_seq:
            return text
        with self.seq_lock:
            self.seq += 1
            return f"{text} [seq={self.seq}]"

    def head(self, text: str) -> None:
        self.head_raw(self._mark(text))

    def head_raw(self, text: str) -> None:
        out = sys.stdout
        if isinstance(out, LineWriter):
            out.write_line(text)
        else:
            out.write(text + "\n")

    def to_worker(self, worker: Worker, texts: list[str]) -> None:
        # Fire and forget: the actor (or headless rank) prints. Each line is marked here, in replay order.
        worker.send([self._mark(t) for t in texts])

    # -- run ----------------------------------------------------------------------------------------
    def run(self) -> int:
        self._install_signals()
        try:
            self._bind()
            self._replay_until_pg()
            if self.mp:
                if not self._mp_rendezvous():
                    return 1
            else:
                self._connect_ray()
                if not self._place():
                    return 1
                self._start_workers()
            result = self._replay_startup()
            if result is not None:
                return result
            return self._serve()
        except Stopped:
            return self._shutdown(0 if self.serving else 1)
        except WorkerDied:
            return self._worker_died()
        except WorkerLost as lost:
            return self._worker_lost(lost.error)

    def _install_signals(self) -> None:
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGUSR1, self._on_wedge_signal)
        signal.signal(signal.SIGUSR2, lambda signum, frame: self._read_knobs())

    def _read_knobs(self) -> None:
        """The runtime file's acceptance and speed (``standin_spec``), applied to the serving speed."""
        knobs = spec.read_runtime_file(self.runtime_file)
        if self.spec is not None and "acceptance" in knobs:
            self.spec.acceptance = knobs["acceptance"]
        model = getattr(self, "model", None)
        if model is not None:
            factor = self.spec.speed_factor() if self.spec is not None else 1.0
            model.load.runtime_speed = knobs.get("speed", 1.0) * factor

    def _on_wedge_signal(self, signum: int, frame: Any) -> None:
        self.wedge_now.set()

    def _on_signal(self, signum: int, frame: Any) -> None:
        if not self.stop.is_set():
            self.stop.set()
            # Never linger: a wedged Ray call must not keep a stopped engine alive.
            killer = threading.Timer(SHUTDOWN_DEADLINE_SECONDS, lambda: os._exit(1))
            killer.daemon = True
            killer.start()
            raise Stopped

    def _sleep_until(self, deadline: float) -> None:
        while True:
            if self.peer_gone.is_set():
                raise WorkerDied
            if self.engine_error is not None:
                raise WorkerLost(self.engine_error)
            delay = deadline - time.monotonic()
            if delay <= 0 or (self.wedge_now.is_set() and self.serving):
                return
            if self.stop.wait(min(delay, 0.2)):
                raise Stopped

    # -- vLLM's multi-node mode (no Ray) ------------------------------------------------------------
    def _mp_rendezvous(self) -> bool:
        args = self.args
        self.rendezvous = Rendezvous(args.master_port)
        scale = max(args.standin_pg_wait_scale, 1e-3)
        deadline = time.monotonic() + args.standin_pg_timeout * scale
        if not self.rendezvous.wait(args.nnodes - 1, self.stop, deadline):
            if self.stop.is_set():
                raise Stopped
            joined = len(self.rendezvous.peers) + 1
            message = (
                f"Timed out after {int(args.standin_pg_timeout) + 1} seconds waiting for clients. "
                f"{joined}/{args.nnodes} clients joined."
            )
            for line in script.engine_failure(self.dialect, "torch.distributed.DistStoreError", message):
                self.head(line)
            self._release()
            return False
        version = script.version_tuple(self.dialect.version)
        tp, pp = args.tensor_parallel_size, args.pipeline_parallel_size
        per_node = max(1, self.world // args.nnodes)
        local_prefix = mp_worker_prefix(version, 1 if self.world > 1 else 0, tp, pp, self.pid + 1)

        def local_send(lines: list[str]) -> None:
            for line in lines:
                self.head_raw(local_prefix + line)

        self.workers = [Worker(local_send, "", self.pid + 1, True)]
        for peer in sorted(self.rendezvous.peers, key=lambda p: p.rank):
            prefix = mp_worker_prefix(version, peer.rank * per_node, tp, pp, peer.pid)
            self.workers.append(
                Worker(functools.partial(_send_prefixed, peer, prefix), peer.ip, peer.pid, False)
            )
            peer.watch(self._on_peer_gone)
        return True

    # -- lost Ray workers -----------------------------------------------------------------------------
    def _collective(self, timeout: float = 30.0) -> None:
        """Call every worker actor and wait for all (sliced, so signals stay prompt); raise WorkerLost."""
        error = self._workers_error(timeout, interruptible=True)
        if error is not None:
            raise WorkerLost(error)

    def _workers_error(self, timeout: float, interruptible: bool = False) -> BaseException | None:
        if self.mp or self.ray is None or not self.workers:
            return None
        ray = self.ray
        refs = [w.handle.info.remote() for w in self.workers]
        deadline = time.monotonic() + timeout
        pending = refs
        while pending and time.monotonic() < deadline:
            if interruptible and self.stop.is_set():
                raise Stopped
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=0.2)
        try:
            ray.get([r for r in refs if r not in pending])
        except Exception as exc:  # Ray's RayActorError / ActorDiedError family
            return exc
        if pending:
            return TimeoutError(f"workers did not answer within {timeout:.0f} seconds")
        return None

    def _check_engine(self) -> str | None:
        """Before each generation (HTTP thread): a lost worker kills the engine, as in vLLM."""
        if self.engine_error is None:
            self.engine_error = self._workers_error(10.0)
        return None if self.engine_error is None else str(self.engine_error).splitlines()[0]

    def _worker_lost(self, error: BaseException) -> int:
        kind = f"{type(error).__module__}.{type(error).__name__}".removeprefix("builtins.")
        # Ray appends whole state dumps to some errors; the head of the text names the actor and node.
        detail = str(error).splitlines()[:MAX_ERROR_LINES] or [""]
        if self.serving:
            if self.http is not None:
                self.http.stop()
            self.serving = False
            where = "engine.py:160" if not self.dialect.v1 else "core_client.py:564"
            self.head(script.stamp("ERROR", where, f"{kind}: {detail[0]}", self.dialect.engine_prefix))
            for extra in detail[1:]:
                self.head(script.stamp("ERROR", where, extra, self.dialect.engine_prefix))
            lines = script.crash_lines(self.dialect)[1:]
        else:
            lines = script.engine_failure(self.dialect, kind, "\n".join(detail))
        for line in lines:
            self.head(line)
        self._release()
        return 1

    def _on_peer_gone(self, peer: Peer) -> None:
        if not self.stop.is_set():
            self.gone_rank = peer.rank
            self.peer_gone.set()

    def _worker_died(self) -> int:
        if self.http is not None and self.serving:
            self.http.stop()
        message = f"Worker proc VllmWorker-{self.gone_rank} died unexpectedly, shutting down executor."
        self.head(script.stamp("ERROR", "multiproc_executor.py:149", message, self.dialect.engine_prefix))
        if self.serving:
            lines = script.crash_lines(self.dialect)[1:]
        else:
            cause = (
                f"Worker failed with error '{message}', please check the stack trace above for the root cause"
            )
            lines = script.engine_failure(self.dialect, "RuntimeError", cause)
        for line in lines:
            self.head(line)
        self.serving = False
        self._release()
        return 1

    def _bind(self) -> None:
        model = ServedModel(
            self.served,
            self.args.model,
            self.max_model_len,
            image.reported_version(self.dialect.version),
            self.metrics,
            self._access_log,
            engine_check=self._check_engine,
        )
        self.model = model
        host = self.args.host or "0.0.0.0"
        try:
            self.http = StandinHTTPServer(host, self.args.port, model)
            self.http.bind_early()
        except OSError as exc:
            self.head(f"{self.dialect.api_prefix}OSError: [Errno {exc.errno}] {exc.strerror}")
            raise SystemExit(1) from exc

    def _access_log(self, line: str) -> None:
        self.head(self.dialect.api_prefix + line)

    def _replay_until_pg(self) -> None:
        lines = self.lines[: self.anchors.pg_create]
        offsets = self._pace_offsets(0, self.anchors.pg_create)
        start = time.monotonic()
        for index, (line, at) in enumerate(zip(lines, offsets, strict=True)):
            if script.is_ray_connect(line):
                continue
            self._sleep_until(start + at)
            if line.role == "head":
                self.head(self.rewrite(line.text))
            self._compiled(index)

    def _compiled(self, index: int) -> None:
        """After the recording's last compile line: the cold start's cache entry is written."""
        if index == self.compile_cache.save_after:
            self.compile_cache.save()

    def _pace_offsets(self, begin: int, end: int) -> list[float]:
        total = script.compressed_offsets(self.lines, 0, self.anchors.end, self.pace)
        return [t - (total[begin] if begin < len(total) else 0.0) for t in total[begin:end]]

    def _connect_ray(self) -> None:
        if self.args.standin_seq:
            # Ray's de-duplication drops lines that differ only in numbers ("[seq=17]"): a sequence
            # check needs every line. (Read when Ray is imported, so set it first.)
            os.environ.setdefault("RAY_DEDUP_LOGS", "0")
        import ray

        self.ray = ray
        address = os.environ.get("RAY_ADDRESS") or "auto"
        ray.init(address=address, log_to_driver=True, logging_level=logging.INFO)
        # ray.init() installs its own SIGTERM handler (sys.exit(15)); take the signals back.
        self._install_signals()

    def _place(self) -> bool:
        from ray.util.placement_group import placement_group

        ray = self.ray
        pg_line = self.lines[self.anchors.pg_create]
        if script.is_pg_create(pg_line):
            self.head(self.rewrite(pg_line.text))
        else:
            self.head(script.pg_create_line(self.dialect))
        driver_ip = ray.util.get_node_ip_address()
        specs = script.placement_specs(self.dialect, self.world, driver_ip)
        self.pg = placement_group(specs, strategy="STRICT_SPREAD")
        ready_ref = self.pg.ready()
        began = time.monotonic()
        scale = max(self.args.standin_pg_wait_scale, 1e-3)
        timeout = self.args.standin_pg_timeout
        interval = 10.0
        # vLLM: ray.wait(timeout=interval) with the interval doubling, one INFO line per miss, and the
        # deadline only checked between waits. Waits are sliced so a signal is handled promptly.
        while (time.monotonic() - began) / scale < timeout:
            deadline = time.monotonic() + interval * scale
            while time.monotonic() < deadline:
                if self.stop.is_set():
                    raise Stopped
                ready, _ = ray.wait([ready_ref], timeout=min(0.2, max(0.0, deadline - time.monotonic())))
                if ready:
                    return True
            interval *= 2
            waited = int((time.monotonic() - began) / scale)
            self.head(script.pg_wait_line(self.dialect, waited, repr(specs)))
        ready, _ = ray.wait([ready_ref], timeout=0)
        if ready:
            return True
        for line in script.engine_failure(
            self.dialect, "ValueError", script.pg_timeout_message(repr(specs), int(timeout))
        ):
            self.head(line)
        self._release()
        return False

    def _start_workers(self) -> None:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        ray = self.ray
        actor_cls = ray.remote(num_cpus=0, num_gpus=1)(RayWorkerWrapper)
        handles = [
            actor_cls.options(
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=self.pg,
                    placement_group_capture_child_tasks=True,
                    placement_group_bundle_index=i,
                )
            ).remote()
            for i in range(self.world)
        ]
        driver_ip = ray.util.get_node_ip_address()
        infos = ray.get([h.info.remote() for h in handles])
        self.workers = [
            Worker(functools.partial(_ray_emit, h), ip, pid, ip == driver_ip, h)
            for h, (ip, pid) in zip(handles, infos, strict=True)
        ]

    def _route(self, line: RecordedLine, assignment: dict[str, Worker]) -> Worker:
        """Which of our actors prints a recorded worker line: local ones on the driver's node, remote ones
        spread over the other nodes in order of first appearance."""
        key = line.source or ""
        if key not in assignment:
            local = [w for w in self.workers if w.on_driver_node] or self.workers
            remote = [w for w in self.workers if not w.on_driver_node] or local
            pool = remote if line.remote else local
            used = sum(1 for k, w in assignment.items() if w in pool and k)
            assignment[key] = pool[used % len(pool)]
        return assignment[key]

    def _replay_startup(self) -> int | None:
        a = self.anchors
        anchor = self.lines[a.pg_create]
        # The anchor line itself was printed (placement-group line) or is Ray's (connect); else replay it.
        printed = script.is_pg_create(anchor) or script.is_ray_connect(anchor)
        begin = a.pg_create + 1 if printed else a.pg_create
        offsets = self._pace_offsets(begin, a.end)
        start = time.monotonic()
        assignment: dict[str, Worker] = {}
        last_heartbeat = start
        in_weights = False
        for index, at in zip(range(begin, a.end), offsets, strict=True):
            line = self.lines[index]
            if self.args.standin_seq and in_weights:
                # Extra lines while "loading weights", so a log follower has something to lose.
                while start + at - last_heartbeat > SEQ_HEARTBEAT_SECONDS:
                    last_heartbeat += SEQ_HEARTBEAT_SECONDS
                    self._sleep_until(last_heartbeat)
                    self.head(
                        script.stamp(
                            "INFO",
                            "standin.py:1",
                            "weight loading in progress (stand-in heartbeat)",
                            self.dialect.engine_prefix,
                        )
                    )
            self._sleep_until(start + at)
            # The schedule, not the clock, decides the heartbeats: on a loaded machine lines print late,
            # and counting from the moment they did would shrink the gaps the heartbeats fill.
            last_heartbeat = max(last_heartbeat, start + at)
            if index == a.weights_start:
                in_weights = True
            if a.weights_end is not None and index >= a.weights_end:
                in_weights = False
            if index in (a.dist, a.weights_start, a.kv):
                # vLLM drives every stage as a collective RPC on all workers: a lost worker fails it.
                self._collective()
            if self.fail == "nccl" and index == a.dist:
                return self._fail_nccl()
            if self.fail == "oom" and index == a.kv:
                return self._fail_oom()
            if script.is_ray_connect(line) or (a.ready is not None and index == a.ready):
                continue
            if script.rank_beyond(line, self.world):
                continue  # a recorded rank this smaller run does not have
            text = self.rewrite(line.text)
            if line.role == "worker":
                self.to_worker(self._route(line, assignment), [text])
            else:
                self.head(text)
            self._compiled(index)
        return None

    def _fail_nccl(self) -> int:
        remote = [w for w in self.workers if not w.on_driver_node] or self.workers
        self.to_worker(
            remote[0],
            script.worker_method_error(self.dialect, "init_device", "RuntimeError", script.NCCL_MESSAGE),
        )
        time.sleep(1.0)  # let Ray forward the worker's traceback before the head's, as in real logs
        for line in script.engine_failure(self.dialect, "RuntimeError", script.NCCL_MESSAGE):
            self.head(line)
        self._release()
        return 1

    def _fail_oom(self) -> int:
        for line in script.engine_failure(
            self.dialect, "ValueError", script.oom_message(self.dialect, self.max_model_len)
        ):
            self.head(line)
        self._release()
        return 1

    # -- serving ------------------------------------------------------------------------------------
    def _serve(self) -> int:
        api = self.dialect.api_prefix
        if self.anchors.ready is None:
            self.head(script.uvicorn(f"Started server process [{self.pid}]", api))
            self.head(script.uvicorn("Waiting for application startup.", api))
        assert self.http is not None
        self.http.start_serving()
        self.serving = True
        self.head(script.uvicorn("Application startup complete.", api))
        crash_at = time.monotonic() + self.fail_after if self.fail == "crash_after_ready" else None
        wedge_at = time.monotonic() + self.fail_after if self.fail == "wedge_after_ready" else None
        interval = max(0.1, self.args.standin_stats_interval)
        next_stats = time.monotonic() + interval
        last_prompt, last_gen = self._token_totals()
        was_busy = False
        while True:
            wake = min(t for t in (next_stats, crash_at, wedge_at) if t is not None)
            self._sleep_until(wake)
            if self.wedge_now.is_set():   # SIGUSR1: wedged now
                self.wedge_now.clear()
                if not self.metrics.wedged.is_set():
                    wedge_at = time.monotonic()
            if crash_at is not None and time.monotonic() >= crash_at:
                return self._crash()
            if wedge_at is not None and time.monotonic() >= wedge_at:
                # A wedged engine (an NCCL hang, a stuck kernel): /health answers, a request stays
                # running, no token comes out, and every new request hangs.
                self.metrics.wedge()
                wedge_at = None
            prompt, gen = self._token_totals()
            busy = prompt > last_prompt or gen > last_gen or self.metrics.running > 0
            # vLLM logs the stats line at DEBUG when this and the previous interval were idle.
            if busy or was_busy or self.args.standin_serving_logs:
                for text in self._stats_lines((prompt - last_prompt) / interval, (gen - last_gen) / interval):
                    self.head(text)
            if self.spec is not None:
                line = self.spec.take_line(interval, self.dialect.v1)
                if line is not None:
                    self.head(script.stamp("INFO", "metrics.py:120", line, self.dialect.api_prefix))
            if self.runtime_file is not None:
                self._read_knobs()
            was_busy = busy
            last_prompt, last_gen = prompt, gen
            next_stats += interval

    def _token_totals(self) -> tuple[float, float]:
        values = {s.name: s.value for m in self.metrics.registry.collect() for s in m.samples}
        return values.get("vllm:prompt_tokens_total", 0.0), values.get("vllm:generation_tokens_total", 0.0)

    def _stats_lines(self, prompt_tps: float, gen_tps: float) -> list[str]:
        running = self.metrics.running
        if self.dialect.v1:
            return [
                script.stamp(
                    "INFO",
                    "loggers.py:123",
                    f"Engine 000: Avg prompt throughput: {prompt_tps:.1f} tokens/s, Avg generation "
                    f"throughput: {gen_tps:.1f} tokens/s, Running: {running} reqs, Waiting: 0 reqs, "
                    f"GPU KV cache usage: {1.9 * running:.1f}%, Prefix cache hit rate: 0.0%",
                    self.dialect.api_prefix,
                )
            ]
        return [
            script.stamp(
                "INFO",
                "metrics.py:488",
                f"Avg prompt throughput: {prompt_tps:.1f} tokens/s, Avg generation throughput: "
                f"{gen_tps:.1f} tokens/s, Running: {running} reqs, Swapped: 0 reqs, Pending: 0 reqs, "
                f"GPU KV cache usage: {1.9 * running:.1f}%, CPU KV cache usage: 0.0%.",
            ),
            script.stamp("INFO", "metrics.py:504", "Prefix cache hit rate: GPU: 0.00%, CPU: 0.00%"),
        ]

    def _crash(self) -> int:
        if self.http is not None:
            self.http.stop()
        self.serving = False
        for line in script.crash_lines(self.dialect):
            self.head(line)
        self._release()
        return 1

    # -- teardown -----------------------------------------------------------------------------------
    def _shutdown(self, code: int) -> int:
        if self.http is not None and self.serving:
            self.http.stop()
        for line in script.shutdown_lines(self.dialect, self.serving, self.pid, bool(self.workers)):
            self.head(line)
        self._release()
        return code

    def _release(self) -> None:
        if self.http is not None:
            with contextlib.suppress(OSError):
                self.http.server_close()
        if self.rendezvous is not None:
            self.rendezvous.close()
            self.rendezvous = None
        ray = self.ray
        if ray is None:
            return
        try:
            from ray.util.placement_group import remove_placement_group

            for w in self.workers:
                if w.handle is not None:
                    ray.kill(w.handle)
            if self.pg is not None:
                remove_placement_group(self.pg)
        except Exception:  # best effort on the way out: an actor or the group may be gone with its node
            pass
        time.sleep(0.3)  # let the log monitor flush the last forwarded lines
        ray.shutdown()


def _send_prefixed(peer: Peer, prefix: str, lines: list[str]) -> None:
    peer.send([prefix + line for line in lines])


def _ray_emit(handle: Any, lines: list[str]) -> None:
    handle.emit.remote(lines)


class RayWorkerWrapper:
    """The actor class; Ray prefixes its output with this class name, as for vLLM's own workers."""

    def info(self) -> tuple[str, int]:
        import ray

        return ray.util.get_node_ip_address(), os.getpid()

    def emit(self, lines: list[str]) -> None:
        for line in lines:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()


def _headless(args: argparse.Namespace) -> int:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: stop.set())
    return run_headless(args.master_addr, args.master_port, args.node_rank, stop)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.headless or args.node_rank > 0:
        return _headless(args)
    sys.stdout = LineWriter(sys.stdout)
    sys.stderr = LineWriter(sys.stderr)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    engine = StandinEngine(args)
    if script.version_tuple(engine.dialect.version) <= (0, 30):
        sys.stdout.prefix = sys.stderr.prefix = engine.dialect.engine_prefix
    try:
        return engine.run()
    finally:
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
