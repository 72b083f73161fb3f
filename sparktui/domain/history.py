"""Run history: each engine start's stage durations, and start-up ETAs drawn from earlier runs.

Stored as JSON lines in ``$XDG_STATE_HOME/sparktui/runs.jsonl`` (default ``~/.local/state``), appended with
a single write so two sparktui processes never interleave half lines. A run can have several lines: the
start's, then an update when a run that reached ready ended (crashed, wedged, lost a node, stopped), written
by whichever process saw it; lines of one run (the head's start stamp names it) are merged on reading.
Runs are compared only with runs of the same model *and* image: another model or another vLLM build loads,
compiles and captures at a different pace.

The ETA functions are pure: they take the earlier runs and the running stage's elapsed time/fraction.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sparktui.domain.durations import format_duration as format_duration  # re-exported for callers
from sparktui.domain.stage_names import STAGES

if TYPE_CHECKING:
    from sparktui.config import EngineConfig
    from sparktui.domain.logs.stages import StageSnapshot, TimelineSnapshot

SCHEMA_VERSION = 1
T = TypeVar("T")
HISTORY_FILE = "runs.jsonl"

#: The stage order (one list: :mod:`sparktui.domain.stage_names`, import-free).
STAGE_ORDER: tuple[str, ...] = STAGES


def format_remaining(seconds: float) -> str:
    """How a person says time left: ``about 40 s``, ``about 8 min``, ``about 1h 10m``."""
    seconds = max(0.0, seconds)
    if seconds < 5:
        # Not "about 5 s" for the last seconds (and after): a figure that stops moving reads as stuck.
        return "a few seconds"
    if seconds < 55:
        return f"about {max(5, round(seconds / 5) * 5)} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min"
    return f"about {minutes // 60}h {minutes % 60}m"


# ---- records --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunRecord:
    """One engine start as remembered for later ETAs and ``sparktui history``."""

    started_at: float                      # epoch seconds
    model: str
    image: str
    outcome: str                           # "ready" | "failed" | "stopped" | "incomplete"
    #: stage name → seconds, for the stages that finished (in the order they ran)
    stages: Mapping[str, float] = field(default_factory=dict)
    #: launch → "can generate" (verify-ready done); None when it never got there
    ready_seconds: float | None = None
    vllm_version: str | None = None
    failure: str | None = None             # failure kind or one-line root cause
    cluster: str = ""
    #: The head's start stamp (epoch, the head's clock): names the run across processes.
    stamp: float | None = None
    #: How a run that reached ready ended: "crashed" | "wedged" | "lost a node" | "stopped" |
    #: "restarted"; None while it serves (or when nobody saw its end).
    end: str | None = None
    ended_at: float | None = None          # epoch seconds
    #: Its vLLM log on the head once the next run started (``vllm.log`` until then): ``sparktui logs --run``.
    log_file: str | None = None

    @property
    def key(self) -> tuple[str, float]:
        """What names the run: its cluster and the head's start stamp (else its start time here)."""
        return self.cluster, round(self.stamp if self.stamp is not None else self.started_at, 3)

    @property
    def up_seconds(self) -> float | None:
        """From the start to the end after ready."""
        return None if self.ended_at is None else max(0.0, self.ended_at - self.started_at)

    def merged(self, later: RunRecord) -> RunRecord:
        """This run with a later line of it: what the later line knows wins, what it does not know stays
        (an end's update carries no stages), except the start's own figures — the first process to record
        them watched the start closest (a second one only attached) — and an end once recorded is not
        undone by a later start line."""
        mine, theirs = asdict(self), asdict(later)
        out = {k: (theirs[k] if theirs[k] not in (None, {}, "") else mine[k]) for k in mine}
        if self.ready_seconds is not None:
            out.update(ready_seconds=self.ready_seconds, stages=mine["stages"] or theirs["stages"])
        if self.end is not None and later.end is None:
            out.update(end=self.end, ended_at=self.ended_at, failure=self.failure or later.failure)
        out["started_at"] = min(self.started_at, later.started_at)
        return RunRecord(**out)

    def same_setup(self, model: str, image: str) -> bool:
        return self.model == model and self.image == image

    def to_json(self) -> str:
        data = {"v": SCHEMA_VERSION, **asdict(self)}
        data["stages"] = dict(self.stages)
        return json.dumps(data, separators=(",", ":"), sort_keys=False)

    @classmethod
    def from_json(cls, line: str) -> RunRecord:
        """Parse one line; raises ``ValueError`` for anything that is not a record we wrote."""
        data: Any = json.loads(line)
        if not isinstance(data, dict):
            raise ValueError("not an object")
        stages = data.get("stages") or {}
        if not isinstance(stages, dict):
            raise ValueError("stages is not an object")
        try:
            return cls(
                started_at=float(data["started_at"]),
                model=str(data["model"]),
                image=str(data.get("image", "")),
                outcome=str(data.get("outcome", "incomplete")),
                stages={str(k): float(v) for k, v in stages.items()},
                ready_seconds=None if data.get("ready_seconds") is None else float(data["ready_seconds"]),
                vllm_version=data.get("vllm_version"),
                failure=data.get("failure"),
                cluster=str(data.get("cluster", "")),
                stamp=_float_or_none(data.get("stamp")),
                end=data.get("end"),
                ended_at=_float_or_none(data.get("ended_at")),
                log_file=data.get("log_file"),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"bad record: {exc}") from exc


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


# ---- the file store -------------------------------------------------------------------------------
def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/sparktui``, or ``~/.local/state/sparktui`` (XDG Base Directory spec)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_STATE_HOME", "")
    # The spec says a relative path in the variable is invalid and must be ignored.
    root = Path(base) if base and os.path.isabs(base) else Path(env.get("HOME", "~")) / ".local" / "state"
    return root.expanduser() / "sparktui"


def default_history_path(environ: Mapping[str, str] | None = None) -> Path:
    return state_dir(environ) / HISTORY_FILE


def append_line(path: Path, line: str) -> None:
    """Append one JSON line to a history file, creating it (and its folder) when missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (line + "\n").encode("utf-8")
    # One write on an O_APPEND descriptor: concurrent writers never interleave inside a line.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_lines(path: Path, parse: Callable[[str], T]) -> list[T]:
    """Every line of a history file that ``parse`` accepts (it raises ``ValueError`` for the others: a
    crash mid-write, a newer schema); no file = nothing yet."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    out: list[T] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            out.append(parse(line))
        except ValueError:
            continue
    return out


class HistoryStore:
    """The runs file. Reading skips lines it cannot parse (a crash mid-write, a newer schema)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else default_history_path()

    def append(self, record: RunRecord) -> None:
        append_line(self.path, record.to_json())

    def load(self) -> list[RunRecord]:
        """All runs, oldest first, each run's lines merged into one."""
        return merge_runs(read_lines(self.path, RunRecord.from_json))

    def runs_for(self, model: str, image: str) -> list[RunRecord]:
        return runs_for(self.load(), model, image)


def merge_runs(lines: Iterable[RunRecord]) -> list[RunRecord]:
    """One record per run (its lines merged in file order), oldest first."""
    runs: dict[tuple[str, float], RunRecord] = {}
    for line in lines:
        earlier = runs.get(line.key)
        runs[line.key] = line if earlier is None else earlier.merged(line)
    return sorted(runs.values(), key=lambda r: r.started_at)


def setup_of(engine: EngineConfig) -> tuple[str, str]:
    """The (model, image) a run is remembered and looked up under: the image for docker, "host" for the
    host runtime (whose ``engine.image`` is not what runs)."""
    return engine.model, engine.image if engine.runtime == "docker" else "host"


def runs_for(runs: Iterable[RunRecord], model: str, image: str) -> list[RunRecord]:
    """Earlier runs of the same model and image, oldest first."""
    return [r for r in runs if r.same_setup(model, image)]


def record_run(
    *,
    started_at: float,
    model: str,
    image: str,
    outcome: str,
    stage_seconds: Mapping[str, float | None],
    ready_seconds: float | None = None,
    vllm_version: str | None = None,
    failure: str | None = None,
    cluster: str = "",
    stamp: float | None = None,
    end: str | None = None,
    ended_at: float | None = None,
    log_file: str | None = None,
) -> RunRecord:
    """Build a record from a finished (or failed) start: stages without a duration are left out."""
    stages = {name: float(s) for name, s in stage_seconds.items() if s is not None and s >= 0}
    return RunRecord(started_at, model, image, outcome, stages, ready_seconds, vllm_version, failure, cluster,
                     stamp, end, ended_at, log_file)


# ---- ETAs -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StageEta:
    """What the stage bar says about time: e.g. "about 8 min left; last 3 runs 14m50s"."""

    stage: str
    runs: int = 0                          # earlier runs the estimate rests on
    typical_seconds: float | None = None   # median stage duration of those runs
    remaining_seconds: float | None = None
    overdue: bool = False                  # already slower than the typical run

    def describe(self) -> str:
        if self.typical_seconds is None:
            return ""
        basis = (f"last run {format_duration(self.typical_seconds)}" if self.runs == 1
                 else f"last {self.runs} runs {format_duration(self.typical_seconds)}")
        if self.overdue:
            return f"taking longer than usual; {basis}"
        if self.remaining_seconds is None:
            return basis
        return f"{format_remaining(self.remaining_seconds)} left; {basis}"


def typical_stage_seconds(runs: Sequence[RunRecord], stage: str, last: int = 3) -> tuple[float | None, int]:
    """Median duration of ``stage`` over the newest ``last`` runs that completed it, and how many."""
    durations = [r.stages[stage] for r in runs if stage in r.stages][-last:]
    if not durations:
        return None, 0
    return statistics.median(durations), len(durations)


def typical_ready_seconds(runs: Sequence[RunRecord], last: int = 3) -> tuple[float | None, int]:
    """Median time from the log's first line to ready over the newest ``last`` runs that got there (the sum
    of their stages, as the stage summary adds them up and as ``ready_eta`` counts), and how many."""
    # "ready": the start got there (whatever ended the run later).
    totals = [sum(r.stages.values()) for r in runs if r.outcome == "ready" and r.stages][-last:]
    if not totals:
        return None, 0
    return statistics.median(totals), len(totals)


def stage_eta(
    runs: Sequence[RunRecord],
    stage: str,
    elapsed: float,
    fraction: float | None = None,
    last: int = 3,
) -> StageEta:
    """ETA of a running stage from earlier runs (``runs``: same model and image, oldest first).

    With a progress fraction (e.g. weight shards 5/12) the history's remaining share is blended with
    this run's own pace, because this run may differ: a second load reads weights from the page cache and
    is much faster than the first from disk. Without a fraction: typical duration minus elapsed.
    """
    typical, count = typical_stage_seconds(runs, stage, last)
    if typical is None:
        return StageEta(stage)
    elapsed = max(0.0, elapsed)
    if fraction is not None and 0.0 < fraction < 1.0:
        estimates = [typical * (1.0 - fraction)]
        if fraction >= 0.1 and elapsed > 0:
            estimates.append(elapsed * (1.0 - fraction) / fraction)
        return StageEta(stage, count, typical, sum(estimates) / len(estimates))
    if fraction is not None and fraction >= 1.0:
        return StageEta(stage, count, typical, 0.0)
    remaining = typical - elapsed
    if remaining < 0:
        return StageEta(stage, count, typical, None, overdue=True)
    return StageEta(stage, count, typical, remaining)


def ready_eta(
    runs: Sequence[RunRecord],
    running_stage: str | None,
    elapsed_in_stage: float,
    fraction: float | None = None,
    done: Iterable[str] = (),
    last: int = 3,
) -> float | None:
    """Seconds until ready: the running stage's ETA plus the typical time of every stage still ahead
    (in ``STAGE_ORDER``; stages in ``done`` or never seen in earlier runs count as 0). ``None`` without
    any earlier run."""
    if not any(r.stages for r in runs):
        return None
    finished = set(done)
    if running_stage not in STAGE_ORDER:
        running_stage = None
    total = 0.0
    ahead = False
    for stage in STAGE_ORDER:
        if stage == running_stage:
            eta = stage_eta(runs, stage, elapsed_in_stage, fraction, last)
            total += eta.remaining_seconds or 0.0
            ahead = True
        elif (ahead or running_stage is None) and stage not in finished:
            typical, _ = typical_stage_seconds(runs, stage, last)
            total += typical or 0.0
    return total


def runs_as_dicts(runs: Iterable[RunRecord]) -> list[dict[str, Any]]:
    return [{**asdict(r), "stages": dict(r.stages)} for r in runs]


# ---- glue to the log timeline ---------------------------------------------------------------------
def record_from_timeline(
    timeline: TimelineSnapshot,
    *,
    started_at: float,
    model: str,
    image: str,
    ready_seconds: float | None = None,
    outcome: str | None = None,
    cluster: str = "",
) -> RunRecord:
    """The record of one start from its log timeline: durations of the stages that finished, the
    outcome ("ready" | "failed" | "incomplete"; pass ``outcome="stopped"`` for a start the user ended)
    and the failure kind with its root-cause line."""
    failure = None
    if timeline.failure is not None:
        failure = f"{timeline.failure.kind}: {timeline.failure.message}"[:300]
    return record_run(
        started_at=started_at, model=model, image=image, outcome=outcome or timeline.outcome,
        stage_seconds={s.name: s.seconds for s in timeline.stages if s.status == "done"},
        ready_seconds=ready_seconds, vllm_version=timeline.vllm_version, failure=failure, cluster=cluster,
    )


def eta_for_stage(runs: Sequence[RunRecord], stage: StageSnapshot, last: int = 3) -> StageEta:
    """ETA of a running stage snapshot (its ``seconds`` so far and its progress n/total)."""
    fraction = None
    if stage.progress is not None and stage.progress.total > 0:
        fraction = min(1.0, stage.progress.done / stage.progress.total)
    return stage_eta(runs, stage.name, stage.seconds or 0.0, fraction, last)


def stage_bar_text(runs: Sequence[RunRecord], stage: StageSnapshot, last: int = 3) -> str:
    """The text next to a running stage bar: "weights 43% — about 8 min left; last 3 runs 14m50s"."""
    head = stage.name
    if stage.progress is not None and stage.progress.total > 0:
        head += f" {100 * stage.progress.done // stage.progress.total}%"
    eta = eta_for_stage(runs, stage, last).describe()
    return f"{head} — {eta}" if eta else head
