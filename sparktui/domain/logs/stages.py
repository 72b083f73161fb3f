"""The init-stage machine: records in, a :class:`TimelineSnapshot` out.

Its helpers each do one job: :mod:`.scan` finds the lines of a block that can matter, :mod:`.clock` puts
node clocks on one axis, :mod:`.failure_tracker` keeps what the error lines say went wrong.

Stages run in a fixed order (:data:`~.rules.STAGES`). A stage starts on its first evidence; when a later
stage starts, earlier running ones are done and earlier ones never seen are ``skipped``. Lines for an
earlier stage never reopen it (Ray's log dedup delays copies from other nodes by 5 s or more), they
only add facts. Per-node completion lines (``Model loading took``, ``Graph capturing finished``, ...)
finish a stage once every expected node reported; a ``[repeated Nx across cluster]`` line counts as
N more reporters, because Ray only folds copies from *other* (ip, pid) sources.

Times: vLLM prints ``MM-DD hh:mm:ss`` without a year in the emitting node's clock. Durations come from
those, placed on one axis by :class:`~.clock.NodeClock` (node time zones, year rollover); lines without
a time inherit the last one. ``now`` (wall-clock seconds, as from ``time.time()``) passed by a live caller
gives times to a log that has none and drives :meth:`Timeline.stall_seconds`.
"""

from __future__ import annotations

import contextlib
import re
import time as _time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from sparktui.domain.durations import format_duration
from sparktui.domain.logs import failures as fl
from sparktui.domain.logs import nccl, spec_decode
from sparktui.domain.logs.access import count_ok_requests, count_ok_requests_bytes
from sparktui.domain.logs.clock import NodeClock
from sparktui.domain.logs.failure_tracker import TRACEBACK_NOISE, FailureTracker, Found
from sparktui.domain.logs.line import (
    LogRecord,
    inherit_prefix,
    parse_line,
    split_glued,
    strip_ansi,
)
from sparktui.domain.logs.rules import (
    ARGS_PAIR,
    RESTART_RULES,
    STAGE_INDEX,
    STAGES,
    STOP_BEFORE_READY,
    Rule,
    RuleEvent,
    config_pairs,
    convert,
    rules_for,
)
from sparktui.domain.logs.scan import (
    SERVING_GROUPS,
    STARTUP_GROUPS,
    candidate_lines,
    cr_segments,
    has_any,
    late_nccl_line,
)

OUTCOMES = ("ready", "failed", "incomplete", "stopped")
# Outcomes after which only a dying engine, a stop or a new start matters (the serving-time keyword set).
_SERVING = frozenset({"ready", "stopped"})
# Ray connection lines that launcher scripts print too: they only mean "placement" once vLLM is running.
_BEFORE_VLLM_OK = frozenset({"ray_connect", "ray_connected", "ray_local", "ray_ready"})
STATUSES = ("pending", "running", "done", "failed", "skipped")
_DISTRIBUTED = STAGE_INDEX["distributed"]
_CONFIG = STAGE_INDEX["config"]
#: The bulk scan's piece (characters): a start reaching "ready" is scanned for every start-up keyword to the
#: end of its piece, the rest of the block for the serving keywords only (a piece's own cost, a regex call or
#: 20 ``str.find`` calls, is nothing next to scanning 32 K characters).
SCAN_PIECE = 32 * 1024
# Process names of vLLM workers (reference §2.2): Ray actors (RayWorkerWrapper, RayWorkerProc), V1 mp
# workers (Worker, Worker_TP1, Worker_DP1_PP0_TP1_EP2, VllmWorker TP1, VllmWorker rank=1, VllmWorker
# PP0_TP1), V0 mp workers (VllmWorkerProcess). Other frameworks' actors ("WorkerDict") are not workers.
_WORKER_ROLE = re.compile(
    r"RayWorker(?:Wrapper|Proc)|Worker(?:_[A-Z]+\d+)*|VllmWorker(?:Process| rank=\d+| \w+)?"
)
# Process names of vLLM's engine processes: the V1 EngineCore (EngineCore, EngineCore_DP0) and the API server.
_ENGINE_ROLES = ("EngineCore", "APIServer")
# Lines that only the API server prints, once per start: seen again past the config stage, a new start.
_BANNER_RULES = frozenset({"api_version", "logo_version", "plain_version"})
PLACEMENT_TIMEOUT_S = 1800  # vLLM's PG_WAIT_TIMEOUT: the placement bar's total

_CONFIG_FACTS = {
    "tensor_parallel_size": "int",
    "pipeline_parallel_size": "int",
    "data_parallel_size": "int",
    "max_seq_len": "int",
    "quantization": "str",
    "dtype": "str",
    "kv_cache_dtype": "str",
    "distributed_executor_backend": "str",
    # How the weights are read (the start's explanation names the fast path when the read was slow).
    "load_format": "str",
    "safetensors_load_strategy": "str",
}
# The config pairs the stage machine reads (_parse_pairs): the facts above and the model and eager mode.
_PAIR_KEYS = ("model", "model_tag", "enforce_eager", *_CONFIG_FACTS)


@dataclass(frozen=True, slots=True)
class StageProgress:
    done: int
    total: int


@dataclass(frozen=True, slots=True)
class StageSnapshot:
    name: str
    status: str
    started: str | None  # "MM-DD hh:mm:ss" as the log prints it
    ended: str | None
    seconds: float | None
    progress: StageProgress | None
    # ISO 8601: "2025-04-14T16:11:40" when the log carries the year, else the year-less "--04-14T16:11:40".
    started_iso: str | None = None
    ended_iso: str | None = None


@dataclass(frozen=True, slots=True)
class Failure:
    kind: str
    stage: str
    message: str
    hint: str
    # The node the failure happened on, as the log names it (an IP: a remote worker's crash report, Ray's
    # ``ip=`` prefix); None when the log names none (the head node, or a log without Ray).
    node: str | None = None


@dataclass(frozen=True, slots=True)
class TimelineSnapshot:
    outcome: str
    vllm_version: str | None
    model: str | None
    stages: tuple[StageSnapshot, ...]
    facts: MappingProxyType[str, Any]
    failure: Failure | None
    nodes: tuple[str, ...]
    # The running stage, or the next one when the log is between stages (failed: the failed stage;
    # ready: None).
    current: str | None
    # Wall clock (the ``now`` given to feed) of the running stage's last progress, or of the last stage
    # event between stages; None when not incomplete or no clock was given.
    last_progress_at: float | None = None
    # False when nothing in the input is something only vLLM prints (the input is not a vLLM log).
    is_vllm_log: bool = True
    # Seconds from "ready" to the crash or the stop (outcome failed after ready, or stopped).
    served_seconds: float | None = None
    year_known: bool = False
    # Per node (Ray's ``ip=`` address, "head" for lines without one): each node's own per-node figures
    # (weights_gib, weights_load_seconds, compile_seconds, cuda_graphs_seconds ...), the slowest worker's.
    node_facts: MappingProxyType[str, MappingProxyType[str, float | int]] = field(
        default_factory=lambda: MappingProxyType({}))

    def stage(self, name: str) -> StageSnapshot:
        return self.stages[STAGE_INDEX[name]]

    def stall_seconds(self, now: float) -> float | None:
        """Seconds without progress at ``now`` ("no progress for 12 min during weights")."""
        if self.outcome != "incomplete" or self.last_progress_at is None:
            return None
        return max(0.0, now - self.last_progress_at)

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "vllm_version": self.vllm_version,
            "model": self.model,
            "stages": [
                {
                    "name": s.name,
                    "status": s.status,
                    "started": s.started_iso,
                    "ended": s.ended_iso,
                    "seconds": None if s.seconds is None else round(s.seconds, 2),
                    "progress": None
                    if s.progress is None
                    else {"done": s.progress.done, "total": s.progress.total},
                }
                for s in self.stages
            ],
            "facts": dict(self.facts),
            "failure": None
            if self.failure is None
            else {
                "kind": self.failure.kind,
                "stage": self.failure.stage,
                "message": self.failure.message,
                "hint": self.failure.hint,
                "node": self.failure.node,
            },
            "nodes": list(self.nodes),
            # Whether the stage times above carry a year (from a docker/k8s stamp, Ray's logger or a JSON
            # asctime); vLLM's own header has none, so they are ISO 8601's year-less "--MM-DDThh:mm:ss".
            "year_known": self.year_known,
        }


@dataclass
class _Stage:
    name: str
    status: str = "pending"
    explicit_skip: bool = False
    seen: bool = False  # has run (a finished stage is never reopened)
    start_s: float | None = None
    end_s: float | None = None
    start_t: str | None = None
    end_t: str | None = None
    start_wall: float | None = None
    end_wall: float | None = None
    last_wall: float | None = None  # last progress, wall clock
    progress: tuple[int, int] | None = None
    node_progress: bool = False  # progress is "nodes reported / nodes expected"
    reporters: set[str] = field(default_factory=set)
    repeats: int = 0

    def copy(self) -> _Stage:
        """A shallow copy, as ``dataclasses.replace(self)`` makes it without its cost (every field through
        ``__init__`` by keyword: ~15 µs, and a failure found copies every stage)."""
        twin = object.__new__(_Stage)
        twin.__dict__.update(self.__dict__)
        return twin


class Timeline:
    """The stage machine. Feed it records (:meth:`feed`) or whole text blocks (:meth:`feed_text`)."""

    def __init__(self, expected_nodes: int | None = None) -> None:
        self.expected_nodes = None if expected_nodes is None else max(1, expected_nodes)
        # Anything that only vLLM prints was seen (a stage line, a vLLM bar, a failure signature): without
        # it the input is not a vLLM log at all (kept across restarts).
        self.vllm_evidence = False
        self._clock = NodeClock()  # node clocks -> one axis (its year anchor is kept across restarts)
        self._reset()

    # --- state ---------------------------------------------------------------------------------------
    def _reset(self) -> None:
        self._stages = {name: _Stage(name) for name in STAGES}
        self._furthest = -1
        self._facts: dict[str, Any] = {}
        self._node_facts: dict[str, dict[str, float | int]] = {}  # node -> its per-node figures
        self._outcome = "incomplete"
        self._failures = FailureTracker()  # the failure found so far, frames, detail lines
        self._nodes: dict[str, None] = {}
        self._last_s: float | None = None  # last log time on the year-free axis
        self._last_t: str | None = None
        self._rec_s: float | None = None  # the record being applied: its own time (a late copy's is older)
        self._rec_t: str | None = None
        self._clock.reset()
        self._nccl_seen: dict[str, bool] = {}  # NCCL lines already read: one of ours? (_observe_nccl)
        self._now: float | None = None
        self._ranks: set[int] = set()
        self._pg_nodes: set[str] = set()  # Ray node ids of the placement group (one warning per node)
        self._rank_repeats = 0
        self._bars: dict[str, tuple[int, int]] = {}  # desc -> (total, done)
        self._cache_hit = False
        self._compiled = False
        self._pending_prefix: LogRecord | None = None
        self._before_failure: tuple[dict[str, _Stage], int] | None = None
        self._last_event_wall: float | None = None  # wall clock of the last stage event of any kind
        self.records_seen = 0
        self._ready_s: float | None = None  # log time of "ready" (serving time = crash/stop - this)
        self._ready_wall: float | None = None
        self._end_s: float | None = None  # log time of the crash or the stop
        self._end_wall: float | None = None
        self._requests_served = 0
        self._bulk_counting = False
        self._compile_cache_skipped = False

    # --- feeding ---------------------------------------------------------------------------------------
    def _keyword_groups(self) -> dict[str, tuple[str, ...]]:
        return SERVING_GROUPS if self._outcome in _SERVING else STARTUP_GROUPS

    def _has_keyword(self, text: str) -> bool:
        return has_any(text, self._keyword_groups())

    def feed(self, record: LogRecord, now: float | None = None) -> None:
        """Apply one record. ``now`` is the wall clock of its arrival (live callers)."""
        if now is not None:
            self._now = now
        self._take(record)

    def _take(self, record: LogRecord, kw: str | None = None) -> None:
        """One record, live or from the bulk scan (``kw``: the keyword the scan found in its line, a single
        ``in`` when it is in the message; it may have been in the prefix or header)."""
        self.records_seen += 1
        taken = self._with_pending_prefix(record)
        if taken is None:
            return
        msg = taken.message
        if not self._bulk_counting and self._outcome == "ready" and " HTTP/1." in msg:
            self._requests_served += count_ok_requests(msg)  # (a bulk block counts them in one go)
        if (kw is not None and kw in msg) or taken.level in ("ERROR", "CRITICAL") or self._has_keyword(msg):
            self._apply(taken)

    def _with_pending_prefix(self, record: LogRecord) -> LogRecord | None:
        """Ray relays a worker's bar as ``<prefix> \\r<bar>``: a prefix-only record is held (None: nothing to
        apply) and the bar right after it takes its role, node and pid."""
        if record.is_prefix_only:
            self._pending_prefix = record
            return None
        prefix, self._pending_prefix = self._pending_prefix, None
        if prefix is not None and not record.has_prefix and record.is_progress:
            return inherit_prefix(record, prefix)
        return record

    def feed_text(self, text: str, now: float | None = None) -> None:
        """Bulk path: a block of complete lines (:meth:`feed_bytes`, on its UTF-8)."""
        self.feed_bytes(text.encode("utf-8", "surrogatepass"), now)

    def feed_bytes(self, data: bytes, now: float | None = None) -> None:
        """Bulk path: a block of complete lines, as a log's bytes (:meth:`.LineSplitter.feed_raw`). Lines
        that contain none of the keywords that can still matter are skipped by a scan of the whole block
        (:mod:`.scan`: one C-level regex pass), without being decoded, split or parsed; a record that only
        animates a bar is parsed once per physical line, not per update.

        The block is scanned in pieces of about :data:`SCAN_PIECE` bytes (cut at a line end), each for the
        keywords of where the start is: the few serving-time keywords once it is serving or stopped (the
        serving flood), else every start-up keyword. A line that moves the start from one to the other ends
        the piece there, and the rest is read for the other set. A serving piece doubles after each one that
        stays serving, so a serving flood is read in a few pieces."""
        if now is not None:
            self._now = now
        size = len(data)
        pos = 0
        serving_piece = SCAN_PIECE  # doubled after each piece that stays serving (a flood: few pieces)
        while pos < size:
            piece = serving_piece if self._outcome in _SERVING else SCAN_PIECE
            if size - pos <= piece * 3 // 2:
                cut = size
            else:
                cut = data.find(b"\n", pos + piece)
                if cut == -1:
                    cut = size
            stop = self._feed_piece(data, pos, cut)
            pos = stop if stop is not None else cut + 1
            serving_piece = serving_piece * 2 if self._outcome in _SERVING and stop is None else SCAN_PIECE

    def _feed_piece(self, data: bytes, lo: int, hi: int) -> int | None:
        """One piece of a block (``data[lo:hi]``, whole lines, read in place), scanned once: for the serving
        keywords when it starts serving or stopped, else for every start-up keyword. A line that moves the
        start across (ready, a stop, a new start after them) or out of "ready" ends the piece: where the rest
        begins is returned, for the caller to go on with. Requests are counted while ready, in log order:
        those before a line that ends the serving are counted before it is applied (the figure it records
        includes them)."""
        serving = self._outcome in _SERVING
        counting = self._bulk_counting = self._outcome == "ready"
        groups = SERVING_GROUPS if serving else STARTUP_GROUPS
        counted = lo  # (counting) the requests of data[lo:counted] are counted
        for end, line, kw in candidate_lines(data, groups, lo, hi):
            if counting:
                self._requests_served += count_ok_requests_bytes(data, counted, end + 1)
                counted = end + 1
            if "\x1b" in line:
                line = strip_ansi(line)
            if counting and late_nccl_line(line, kw):
                # NCCL prints its host in every line, so the record's prefix (the node) is not needed.
                self.records_seen += 1
                self._pending_prefix = None
                self._observe_nccl(line, None)
                continue
            for part in split_glued(line):
                if "\r" in part:
                    for seg in cr_segments(part):
                        self._take(parse_line(seg), kw)
                else:
                    self._take(parse_line(part), kw)
            if (self._outcome in _SERVING) != serving or (counting and self._outcome != "ready"):
                # The rest needs the other keyword set (or no more counting): the caller goes on from here.
                self._bulk_counting = False
                return end + 1
        if counting:
            self._requests_served += count_ok_requests_bytes(data, counted, hi)
        self._bulk_counting = False
        return None

    def feed_lines(self, lines: list[str], now: float | None = None) -> None:
        """Bulk path for a list of records (e.g. from :meth:`LineSplitter.feed`)."""
        if lines:
            self.feed_text("\n".join(lines), now)

    # --- one record --------------------------------------------------------------------------------
    def _apply(self, rec: LogRecord) -> None:
        self._rec_s = None
        if rec.seconds is not None:
            t_axis, t = self._clock.place(rec, rec.seconds, self._last_s)
            self._rec_s, self._rec_t = t_axis, t
            # The log's clock never runs back: Ray prints a deduplicated copy late with its original time.
            if self._last_s is None or t_axis >= self._last_s:
                self._last_s, self._last_t = t_axis, t
        if (rec.has_prefix or rec.level is not None) and rec.role not in ("autoscaler", "raylet"):
            self._nodes.setdefault(rec.node or "head", None)
        msg = rec.message
        if "NCCL INFO" in msg and self._observe_nccl(msg, rec.node):
            return  # NCCL's transport lines: the NCCL verdict's facts (sparktui.domain.logs.nccl)
        if "metrics: " in msg and spec_decode.observe(msg, self._facts):
            return  # speculative decoding's stats line: its acceptance as facts (.spec_decode)
        if self._outcome == "failed" and not self._failures.confirmed and self._moves_on(rec):
            self._recover()
        if (rec.role is not None and 0 <= self._furthest < _DISTRIBUTED and self._outcome == "incomplete"
                and _WORKER_ROLE.fullmatch(rec.role)):
            # A worker process is talking: the placement group was placed (Ray creates the worker actors
            # in it) and the workers are starting up (reference §10: placement ends on the first worker
            # line). Only once the log has shown the start: a capture that begins mid-way says nothing.
            self._touch("distributed")
        if rec.is_progress and rec.progress is not None:
            if self._outcome == "incomplete":
                self._on_bar(rec)
            return
        if self._failures.follow((rec.node, rec.pid), msg):
            return  # a traceback frame, or the failure's message going on
        hits = rules_for(msg)
        if hits:
            self.vllm_evidence = True
        if hits and (
            (self._outcome != "incomplete" and any(r.name in RESTART_RULES for r, _ in hits))
            or (self._furthest > _CONFIG and any(r.name in _BANNER_RULES for r, _ in hits))
        ):
            # A new start in the same log: a version banner or engine config line after ready or a failure,
            # or the API server's version banner once this start is past config (a start killed mid-way).
            # Not an engine config line then: with data parallelism each engine prints one, not in step.
            self._restart()
        if self._outcome == "stopped":
            return  # stopped on purpose: what the dying processes print after that is no failure
        if self._outcome == "ready":
            for rule, m in hits:
                if rule.event in (RuleEvent.UVICORN_URL, RuleEvent.STOPPED):
                    self._on_rule(rule, m, rec)
            if self._outcome == "stopped":
                return
            if fl.FATAL_AFTER_READY.search(msg) or self._ray_fatal_in_engine(rec):
                self._fail_after_ready(rec)
            elif rec.level in ("ERROR", "CRITICAL") or (rec.level is None and fl.is_exception_line(msg)):
                self._failures.note_serving_error(self.records_seen, msg, rec.node)
            return
        if self._outcome == "incomplete":
            for rule, m in hits:
                self._on_rule(rule, m, rec)
            if self._outcome == "stopped":
                return  # its own line ("KeyboardInterrupt: terminated") is no exception to diagnose
        if rec.level in ("ERROR", "CRITICAL") or rec.level is None or rec.role == "autoscaler":
            self._on_error(rec)

    def _observe_nccl(self, text: str, node: str | None) -> bool:
        """:func:`.nccl.observe`, once per NCCL line: the same line again (a Ray relay, a replayed log) adds
        nothing. Keyed by NCCL's own ``host:pid:tid [dev] NCCL INFO ...`` part, so the live path (the message)
        and the bulk path (the whole line) agree."""
        at = text.find(" NCCL INFO ")
        if at == -1:
            return nccl.observe(text, node, self._facts)
        key = text[text.rfind(" ", 0, text.rfind(" ", 0, at)) + 1 :]
        seen = self._nccl_seen.get(key)
        if seen is None:
            seen = self._nccl_seen[key] = nccl.observe(text, node, self._facts)
        return seen

    def _moves_on(self, rec: LogRecord) -> bool:
        """The start shows progress (a bar, or any stage rule): it survived what looked like a failure."""
        if rec.is_progress:
            return True
        return any(rule.stage is not None and rule.event not in (RuleEvent.FACT, RuleEvent.SKIP)
                   for rule, _ in rules_for(rec.message))

    def _recover(self) -> None:
        """Take back a tentative failure: the stages as they were, the exception kept as a fact."""
        found = self._failures.found
        if found is None or self._before_failure is None:
            self._failures.confirmed = True  # nothing to go back to: keep the failure
            return
        self._facts.setdefault("ignored_error", found[2])
        self._stages, self._furthest = self._before_failure
        self._before_failure = None
        self._failures.clear()
        self._outcome = "incomplete"

    def _restart(self) -> None:
        expected = self.expected_nodes
        now = self._now
        self._reset()
        self.expected_nodes = expected
        self._now = now

    # --- rules ---------------------------------------------------------------------------------------
    def _on_rule(self, rule: Rule, m: Any, rec: LogRecord) -> None:
        self._note_facts(rule, m, rec.node)
        event = rule.event
        if event is RuleEvent.FACT:
            return
        if event is RuleEvent.STOPPED:
            self._on_stop(rule)
            return
        if rule.name in _BEFORE_VLLM_OK and self._stages["config"].status == "pending":
            return  # a launcher script's own ray.init() before vLLM started (e.g. LWS multi-node-serving.sh)
        if event is RuleEvent.SKIP:
            self._skip_eager()
            return
        if rule.stage is not None:
            STAGE_EVENT_HANDLERS[event](self, rule.stage, m, rec)

    def _note_facts(self, rule: Rule, m: Any, node: str | None = None) -> None:
        for group, key, kind, mode in rule.facts:
            value = m.group(group) if m is not None else None
            if value is None:
                continue
            try:
                new = convert(value, kind)
            except ValueError:
                continue  # (a figure the format string promised that is none: the fact stays unknown)
            if mode == "max" and isinstance(new, float | int):
                # A per-node figure (load, compile, capture seconds): each node's own slowest, so that the
                # start's explanation can name the slow node, not just the slowest figure.
                mine = self._node_facts.setdefault(node or "head", {})
                mine[key] = max(new, mine.get(key, new))
            old = self._facts.get(key)
            if old is None or mode == "last":
                self._facts[key] = new
            elif mode == "max" and isinstance(new, float | int) and isinstance(old, float | int):
                self._facts[key] = max(old, new)
            elif mode == "min" and isinstance(new, float | int) and isinstance(old, float | int):
                self._facts[key] = min(old, new)

    def _on_stop(self, rule: Rule) -> None:
        if self._outcome == "ready":
            self._outcome = "stopped"
            self._mark_end_of_serving()
        elif self._outcome == "incomplete" and rule.name in STOP_BEFORE_READY:
            self._outcome = "stopped"  # stopped while starting: the stages stay where the stop found them

    # The stage events' handlers (``STAGE_EVENT_HANDLERS``): the stage, the rule's match, the record.
    def _on_config(self, stage: str, m: Any, rec: LogRecord) -> None:
        self._facts.setdefault("vllm_version", m.group("v"))
        self._parse_pairs(config_pairs(m.group("cfg"), _PAIR_KEYS))
        self._touch(stage)

    def _on_args(self, stage: str, m: Any, rec: LogRecord) -> None:
        text = rec.message
        pairs = ARGS_PAIR.findall(text)
        if "Namespace(" in text:
            pairs += config_pairs(text.split("Namespace(", 1)[-1], _PAIR_KEYS)
        self._parse_pairs(pairs)
        self._touch(stage)

    def _on_ranks(self, stage: str, m: Any, rec: LogRecord) -> None:
        self._ranks.add(int(m.group("r")))
        self._rank_repeats += rec.repeat  # Ray folded that many more ranks into this line
        ws = int(m.group("ws"))
        self._facts["world_size"] = ws
        self._touch(stage, (min(len(self._ranks) + self._rank_repeats, ws), ws))

    def _on_pg_wait(self, stage: str, m: Any, rec: LogRecord) -> None:
        waited = int(m.group("s"))
        self._facts["placement_wait_seconds"] = waited
        self._touch(stage, (min(waited, PLACEMENT_TIMEOUT_S), PLACEMENT_TIMEOUT_S))

    def _on_pg_node(self, stage: str, m: Any, rec: LogRecord) -> None:
        self._pg_nodes.add(m.group("node"))
        self._touch(stage)

    def _on_prefetch(self, stage: str, m: Any, rec: LogRecord) -> None:
        self._touch(stage, (int(m.group("a")), int(m.group("b"))))

    def _on_uvicorn_url(self, stage: str, m: Any, rec: LogRecord) -> None:
        # uvicorn's own "Uvicorn running on ..." (the only URL <= 0.6 prints; it follows "ready").
        url = m.group("u")
        if url is None:
            host = m.group("h") or "0.0.0.0"
            url = f"http://{f'[{host}]' if ':' in host else host}:{m.group('p')}"
        self._facts.setdefault("api_url", url)

    def _on_compiled(self, stage: str, m: Any, rec: LogRecord) -> None:
        self._compiled = True
        self._reopen_cache_skipped_compile()
        self._touch(stage)

    def _on_cache_hit(self, stage: str, m: Any, rec: LogRecord) -> None:
        self._cache_hit = True
        self._facts["compile_cache_hit"] = True
        self._touch(stage)

    def _on_progress(self, stage: str, m: Any, rec: LogRecord) -> None:
        self._touch(stage)

    def _on_done(self, stage: str, m: Any, rec: LogRecord) -> None:
        if self._touch(stage):
            self._close(stage)

    def _on_node_done(self, stage: str, m: Any, rec: LogRecord) -> None:
        if stage == "compile":
            self._reopen_cache_skipped_compile()
        self._node_done(stage, rec)

    def _on_ready(self, stage: str, m: Any, rec: LogRecord) -> None:
        self._touch(stage)
        self._close(stage)
        self._become_ready()

    def _on_serving(self, stage: str, m: Any, rec: LogRecord) -> None:
        self._facts["ready_inferred"] = True
        self._on_ready(stage, m, rec)

    def _become_ready(self) -> None:
        if self._outcome != "ready":
            self._outcome = "ready"
            self._ready_s, self._ready_wall = self._last_s, self._now

    def _served_seconds(self) -> float | None:
        # No timed line between ready and the end (a Slurm cancel, uvicorn's untimed lines): the log does not
        # say how long it served, so no "after serving 0 s".
        if self._ready_s is not None and self._end_s is not None and self._end_s > self._ready_s:
            return self._end_s - self._ready_s
        if self._ready_wall is not None and self._end_wall is not None:
            return max(0.0, self._end_wall - self._ready_wall)
        return None

    def _mark_end_of_serving(self) -> None:
        self._end_s, self._end_wall = self._last_s, self._now
        served = self._served_seconds()
        if served is not None:
            self._facts["served_seconds"] = round(served, 1)
        self._facts["requests_served"] = self._requests_served

    def _reopen_cache_skipped_compile(self) -> None:
        """A compile-cache hit for one graph, then a real compile of another (a drafter / MTP head): the
        compile stage, taken as skipped at the hit, did run; its end is now."""
        st = self._stages["compile"]
        if st.status == "skipped" and self._compile_cache_skipped and self._compiled:
            st.status = "done"
            self._compile_cache_skipped = False
            if self._last_s is not None and (st.end_s is None or self._last_s > st.end_s):
                st.end_s, st.end_t = self._last_s, self._last_t
            if self._now is not None:
                st.end_wall = self._now

    def _parse_pairs(self, pairs: list[tuple[str, str]]) -> None:
        for key, raw in pairs:
            value = raw.strip("'\"")
            if key in ("model", "model_tag"):
                if value and value != "None":
                    self._facts.setdefault("model", value)
            elif key == "enforce_eager":
                if value == "True":
                    self._skip_eager()
            elif key in _CONFIG_FACTS and key not in self._facts and value not in ("None", ""):
                with contextlib.suppress(ValueError):
                    self._facts[key] = convert(value, _CONFIG_FACTS[key])

    def _skip_eager(self) -> None:
        self._facts["enforce_eager"] = True
        for name in ("compile", "cuda_graphs"):
            st = self._stages[name]
            if st.status == "pending":
                st.status, st.explicit_skip = "skipped", True

    def _on_bar(self, rec: LogRecord) -> None:
        bar = rec.progress
        assert bar is not None
        desc = bar.desc
        if "Capturing" in desc:
            stage = "cuda_graphs"
            if "(" in desc and desc.endswith(")"):
                self._facts["cuda_graphs_phase"] = desc[desc.index("(") + 1 : -1]
        elif "shard" in desc or "Loading" in desc or "checkpoint" in desc or desc.startswith(
            ("Fetching", "Downloading")  # Hugging Face download bars
        ):
            stage = "weights"
        else:
            return
        # Several bars may interleave (V0 Ray draws one per pipeline stage; Ray relays fragments), so a
        # phase's progress is the furthest update seen for that description.
        self.vllm_evidence = True
        best = self._bars.get(desc)
        if best is None or (bar.total, bar.done) > best:
            best = self._bars[desc] = (bar.total, bar.done)
        self._touch(stage, (best[1], best[0]))
        if stage == "weights" and bar.total > 0 and bar.done >= bar.total:
            # Each node draws its own shard bar (its first local rank): a bar at its total is that node's
            # weights loaded, whether or not its "Model loading took" line gets through Ray's dedup.
            self._node_done("weights", rec)

    # --- transitions ---------------------------------------------------------------------------------
    def _touch(self, name: str, progress: tuple[int, int] | None = None) -> bool:
        """Evidence for stage ``name``: start it if it may start, record progress. True if it is running."""
        st = self._stages[name]
        idx = STAGE_INDEX[name]
        if st.status == "done" and progress is not None and (st.progress is None or progress > st.progress):
            st.progress = progress  # late copies (Ray dedup) of an already finished stage
        if st.status == "pending" or (st.status == "skipped" and not st.explicit_skip and not st.seen):
            if idx < self._furthest:
                # Late evidence for a stage passed over as unseen: it did happen.
                if st.status == "skipped":
                    st.status, st.seen = "done", True
                    if self._rec_s is not None:  # when it was logged, not when Ray delivered it
                        st.start_s = st.end_s = self._rec_s
                        st.start_t = st.end_t = self._rec_t
                    else:
                        st.start_s = st.end_s = self._last_s
                        st.start_t = st.end_t = self._last_t
                return False
            self._begin(name)
        elif st.status == "skipped" and st.explicit_skip and name in ("compile", "cuda_graphs"):
            return False
        if st.status != "running":
            return False
        st.last_wall = self._last_event_wall = self._now
        if progress is not None:
            st.progress = progress
        return True

    def _begin(self, name: str) -> None:
        idx = STAGE_INDEX[name]
        for earlier in STAGES[:idx]:
            est = self._stages[earlier]
            if est.status == "running":
                self._finish(est)
            elif est.status == "pending":
                est.status = "skipped"
            elif (est.status == "done" and est.end_s is None and est.end_t is None and est.end_wall is None
                  and est.start_s is not None):
                # Done on an untimed line (a shard bar at its total): it ended by the time this one began.
                est.end_s, est.end_t = self._last_s, self._last_t
        st = self._stages[name]
        st.status, st.seen = "running", True
        st.start_s, st.start_t, st.start_wall = self._last_s, self._last_t, self._now
        # Stages are back to back: the silent time between the previous stage's end and this stage's
        # first line (a profiling run, a long download) already belongs to this stage.
        prev = None
        for earlier in reversed(STAGES[:idx]):
            est = self._stages[earlier]
            if est.seen and est.status in ("done", "skipped"):
                prev = est
                break
        if prev is not None:
            if prev.end_s is not None and self._last_s is not None and prev.end_s <= self._last_s:
                st.start_s, st.start_t = prev.end_s, prev.end_t
            if prev.end_wall is not None and self._now is not None:
                st.start_wall = min(prev.end_wall, self._now)
        st.last_wall = self._now
        self._furthest = max(self._furthest, idx)

    def _finish(self, st: _Stage) -> None:
        self._last_event_wall = self._now
        st.status = "done"
        st.end_s, st.end_t, st.end_wall = self._last_s, self._last_t, self._now
        if st.name == "compile" and self._cache_hit and not self._compiled:
            st.status = "skipped"  # compile-cache hit: nothing was compiled (yet: see the drafter case)
            self._compile_cache_skipped = True
        engine_next = st.name == "cuda_graphs" or (
            st.name == "kv_cache" and self._stages["cuda_graphs"].explicit_skip
        )
        if engine_next and self._stages["engine"].status == "pending":
            self._begin("engine")

    def _close(self, name: str) -> None:
        st = self._stages[name]
        if st.status == "running":
            self._finish(st)

    def _node_done(self, name: str, rec: LogRecord) -> None:
        st = self._stages[name]
        if st.status == "done" and STAGE_INDEX[name] == self._furthest:
            # A slower node (or rank) finishing before the next stage logged anything: the stage
            # really ended then (Ray may deliver copies late, so only ever move the end forward).
            if self._last_s is not None and (st.end_s is None or self._last_s > st.end_s):
                st.end_s, st.end_t = self._last_s, self._last_t
            if self._now is not None:
                st.end_wall = self._now
            self._last_event_wall = self._now
            return
        if not self._touch(name):
            return
        st = self._stages[name]
        st.reporters.add(rec.node or "head")
        st.repeats += rec.repeat
        expected = self._expected_nodes()
        reported = min(expected, len(st.reporters) + st.repeats)
        if reported >= expected:
            if st.node_progress:
                st.progress = (expected, expected)
            self._close(name)
        elif st.progress is None or name not in ("weights", "cuda_graphs"):
            st.progress, st.node_progress = (reported, expected), True

    def _expected_nodes(self) -> int:
        """The caller's node count; without one, every node the log has shown so far, or the placement
        group's node count if larger (Ray's dedup can hold back every line of the other node for a while)."""
        if self.expected_nodes is not None:
            return self.expected_nodes
        return max(1, len(self._nodes), len(self._pg_nodes))

    # --- failures ------------------------------------------------------------------------------------
    def _running_stage(self) -> str | None:
        for name in reversed(STAGES):
            if self._stages[name].status == "running":
                return name
        return None

    def _on_error(self, rec: LogRecord) -> None:
        raw = rec.message
        if not raw.strip():
            return
        if raw[:1] in (" ", "\t"):
            if self._failures.pydantic_open and fl.is_pydantic_detail(raw):
                moved = self._failures.pydantic_detail(raw.strip(), self._running_stage())
                if moved is not None:
                    self._mark_failed(*moved)
            return  # an indented traceback line (code, not the exception)
        msg = raw.strip()
        current = self._failures.found
        key = (rec.node, rec.pid)
        running = self._evidence_stage(rec, msg, current)
        kind = fl.classify(msg, running)
        marker = fl.is_marker(msg)
        exc = fl.is_exception_line(msg) and not fl.is_wrapper(msg)
        # Ray's autoscaler events carry no level; autoscaler v2 words its errors without "Error:" in front.
        errorish = rec.level in ("ERROR", "CRITICAL") or (rec.role == "autoscaler" and kind is not None)
        names_cause = current is not None and fl.refines(kind, current[0], current[2])
        if not errorish and not exc and not marker and not names_cause:
            return  # a WARNING or INFO line that merely mentions an error (unless it names a symptom's cause)
        rank = FailureTracker.rank(kind, exc, marker)
        if rank == 0:
            # An ERROR line that proves nothing on its own (a cut paste, a logged warning): shown as a
            # fact, but only while no failure explains it.
            if errorish and current is None and not msg.startswith(TRACEBACK_NOISE):
                self._facts.setdefault("first_error", msg)
            return
        if kind is not None or marker:
            # A signature or a "failed to start" marker: a real failure, whatever follows. (A config-time
            # ValueError promoted to config_error below stays tentative: if the start goes on, it survived.)
            self._failures.confirmed = True
        if kind is None and rank == 2 and fl.is_config_exception(msg) and (
            running in (None, "config") and self._furthest == STAGE_INDEX["config"]
        ):
            kind, rank = "config_error", 4
        if kind is not None or exc or marker:
            self.vllm_evidence = self.vllm_evidence or kind is not None or marker
        if current is not None and fl.is_wrapper(msg):
            return  # a re-raise pointing above ("See stack trace (above) for the root cause")
        if current is not None and current[3] >= rank:
            if not fl.refines(kind, current[0], current[2]):
                return
            rank = current[3]  # the cause of the symptom found first (fl.refines) takes its rank
        # A worker dying is the effect of something (OOM kill, NCCL abort, ...): it never hides a cause
        # found first.
        symptoms = fl.SYMPTOM_KINDS
        if current is not None and kind in symptoms and current[0] not in (*symptoms, "unknown"):
            return
        k = kind or "unknown"
        if self._ready_s is not None or self._ready_wall is not None:
            stage = "serving"  # it had served: a crash after ready, whatever the traceback shows
        elif current is not None and kind is None and self._failures.framed_stage(key) is None:
            stage = current[1]
        else:
            stage = fl.failure_stage(k, running, msg)
        if current is None:
            # Kept so that an unexplained exception the start survives can be taken back (see _recover).
            self._before_failure = ({n: st.copy() for n, st in self._stages.items()}, self._furthest)
        self._failures.set((k, stage, msg, rank), key)
        self._outcome = "failed"
        self._mark_failed(stage, current[1] if current is not None else None)

    def _evidence_stage(self, rec: LogRecord, msg: str,
                        current: Found | None) -> str | None:
        """Where the evidence puts an error: the frames of its traceback (the innermost vLLM method), unless
        that stage is over and a later one runs; else the running stage, the stage of a failure already
        found, or the worker method an "Error executing method" line names."""
        running = self._running_stage()
        framed = self._failures.framed_stage((rec.node, rec.pid))
        if framed is not None and not (
            running is not None and STAGE_INDEX[running] > STAGE_INDEX[framed]
            and self._stages[framed].status == "done"
        ):
            return framed
        if running is not None:
            return running
        if current is not None and current[1] in STAGE_INDEX:
            return current[1]
        return fl.method_stage(msg)

    def _mark_failed(self, stage: str, previous: str | None) -> None:
        if stage not in STAGE_INDEX:
            return  # stage unknown: no stage is marked
        if previous is not None and previous not in STAGE_INDEX:
            previous = None
        if previous is not None and previous != stage:
            # The root cause moved the failure to another stage: undo the first guess.
            old = self._stages[previous]
            if old.status == "failed":
                old.status = "done" if STAGE_INDEX[previous] < STAGE_INDEX[stage] else "pending"
        st = self._stages[stage]
        if st.status in ("pending", "skipped") and STAGE_INDEX[stage] >= self._furthest:
            self._begin(stage)
        for other in self._stages.values():
            if other.status == "running" or other is st:
                other.status = "failed"
                if other.end_s is None and other.end_wall is None:
                    other.end_s, other.end_t, other.end_wall = self._last_s, self._last_t, self._now

    @staticmethod
    def _ray_fatal_in_engine(rec: LogRecord) -> bool:
        """Ray's fatal check in an engine process (the EngineCore, the API server, a log without process
        prefixes): Ray aborts that process, so a serving engine is gone, whatever vLLM prints after it. (In a
        worker it kills the worker; the engine says so itself when it next calls it.)"""
        return fl.is_ray_fatal(rec.level, rec.source_file) and (
            rec.role is None or rec.role.startswith(_ENGINE_ROLES))

    def _fail_after_ready(self, rec: LogRecord) -> None:
        """The engine died while serving: the tracker names the cause (see
        :meth:`~.failure_tracker.FailureTracker.fail_after_ready`)."""
        self._mark_end_of_serving()
        self._failures.fail_after_ready(rec.message, rec.node)
        self._outcome = "failed"

    # --- reading -------------------------------------------------------------------------------------
    def stall_seconds(self, now: float | None = None) -> float | None:
        """Seconds since the running stage last moved (None if nothing runs or no wall clock is known)."""
        now = self._now if now is None else now
        last = self._last_progress_at()
        if now is None or last is None:
            return None
        return max(0.0, now - last)

    def _last_progress_at(self) -> float | None:
        if self._outcome != "incomplete":
            return None
        name = self._running_stage()
        # Between stages (one done, the next not logged yet) the wait counts from the last event.
        return self._stages[name].last_wall if name is not None else self._last_event_wall

    def waiting_for(self) -> str | None:
        """The stage the log is in or about to enter: the running one, else the next one not skipped."""
        if self._outcome != "incomplete":
            return None
        running = self._running_stage()
        if running is not None:
            return running
        for name in STAGES[self._furthest + 1 :]:
            if self._stages[name].status == "pending":
                return name
        return None

    def snapshot(self, now: float | None = None) -> TimelineSnapshot:
        """The timeline now. ``now`` (wall clock) lets a running stage's seconds keep growing through a
        silent phase; without it they run to the last line seen."""
        stages = tuple(self._stage_snapshot(self._stages[name], now) for name in STAGES)
        failure = None
        if self._failures.found is not None:
            kind, stage, message, _ = self._failures.found
            node = fl.failure_node(message, self._failures.found_node, kind)
            hint = fl.hint_for(kind, message, stage, self._facts, node)
            served = self._served_seconds()
            if served is not None:
                message = f"crashed after serving {format_duration(served)} ({self._requests_served} " \
                          f"requests answered): {message}"
            failure = Failure(kind, stage, message, hint, node)
        facts = {k: v for k, v in self._facts.items() if k not in ("vllm_version", "model")}
        version = self._facts.get("vllm_version")
        if isinstance(version, str):
            facts["vllm_release"] = _release(version)
        facts["nodes_seen"] = len(self._nodes)
        if self._failures.found is not None:
            current: str | None = self._failures.found[1] if self._failures.found[1] in STAGE_INDEX else None
        elif self._outcome in _SERVING:
            current = None
        else:
            current = self.waiting_for()
        return TimelineSnapshot(
            outcome=self._outcome,
            vllm_version=version if isinstance(version, str) else None,
            model=self._facts.get("model"),
            stages=stages,
            facts=MappingProxyType(facts),
            failure=failure,
            nodes=tuple(self._nodes),
            current=current,
            last_progress_at=self._last_progress_at(),
            is_vllm_log=self.vllm_evidence,
            served_seconds=self._served_seconds(),
            year_known=self._clock.year_known,
            node_facts=MappingProxyType({n: MappingProxyType(dict(f)) for n, f in self._node_facts.items()}),
        )

    def to_json(self) -> dict[str, Any]:
        return self.snapshot().to_json()

    def _stage_snapshot(self, st: _Stage, now: float | None) -> StageSnapshot:
        seconds: float | None = None
        end_s = st.end_s
        end_wall = st.end_wall
        if st.status == "running":
            end_s, end_wall = self._last_s, (now if now is not None else self._now)
            if now is not None and st.start_wall is not None:
                end_s = None  # live: the wall clock, not the last line's time
        if st.start_s is not None and end_s is not None:
            seconds = max(0.0, end_s - st.start_s)
        elif st.start_wall is not None and end_wall is not None:
            seconds = max(0.0, end_wall - st.start_wall)
        started = st.start_t or _wall_str(st.start_wall)
        ended = None if st.status == "running" else (st.end_t or _wall_str(st.end_wall))
        progress = StageProgress(*st.progress) if st.progress is not None else None
        started_iso = self._clock.iso(st.start_t, st.start_s, st.start_wall)
        ended_iso = None if st.status == "running" else self._clock.iso(st.end_t, st.end_s, st.end_wall)
        return StageSnapshot(st.name, st.status, started, ended, seconds, progress, started_iso, ended_iso)



#: What a stage event does to its stage: one handler per rule event, except the three ``Timeline._on_rule``
#: takes first (``FACT``: facts only; ``STOPPED``: the run's end, whatever the stage; ``SKIP``: no stage).
STAGE_EVENT_HANDLERS: Mapping[RuleEvent, Callable[[Timeline, str, Any, LogRecord], None]] = MappingProxyType({
    RuleEvent.START: Timeline._on_progress,
    RuleEvent.PROGRESS: Timeline._on_progress,
    RuleEvent.DONE: Timeline._on_done,
    RuleEvent.NODE_DONE: Timeline._on_node_done,
    RuleEvent.READY: Timeline._on_ready,
    RuleEvent.SERVING: Timeline._on_serving,
    RuleEvent.CONFIG: Timeline._on_config,
    RuleEvent.ARGS: Timeline._on_args,
    RuleEvent.RANKS: Timeline._on_ranks,
    RuleEvent.PG_WAIT: Timeline._on_pg_wait,
    RuleEvent.PG_NODE: Timeline._on_pg_node,
    RuleEvent.PREFETCH: Timeline._on_prefetch,
    RuleEvent.COMPILED: Timeline._on_compiled,
    RuleEvent.CACHE_HIT: Timeline._on_cache_hit,
    RuleEvent.UVICORN_URL: Timeline._on_uvicorn_url,
})

def _wall_str(wall: float | None) -> str | None:
    return None if wall is None else _time.strftime("%m-%d %H:%M:%S", _time.localtime(wall))


def _release(version: str) -> str:
    """``0.17.1rc1.dev25+g1a629ce0d`` -> ``0.17.1rc1``; ``0.10.2`` stays."""
    base = version.split("+", 1)[0]
    parts = base.split(".")
    keep = [p for p in parts if not p.startswith("dev")]
    return ".".join(keep) if keep else base
