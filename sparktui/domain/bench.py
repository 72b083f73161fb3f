"""Benchmark math: per-request results → one concurrency level's figures, energy per token from the
probe's GPU power samples, and the comparison with an earlier run. Pure: no I/O, no clock.

Definitions follow vLLM's ``vllm bench serve`` so the built-in client and vLLM's own tool report the same
quantities: output tok/s = generated tokens ÷ the level's wall time (first request sent → last answer
done); TTFT = request sent → first token; ITL = the gaps between successive tokens of one stream, pooled
over all requests; percentiles are linear interpolation between closest ranks (numpy's default, which
vLLM uses).

Energy: each node's GPU power (the sum of its GPUs' ``power_w``) is a step-less series of probe readings;
the joules of a time window are its trapezoid integral over the window, with the power at the window's
edges linearly interpolated between the neighbouring readings (held flat beyond the first/last one).
J/token = joules ÷ generated tokens of that window, per node and over all nodes.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sparktui.domain.events import NodeSampled

if TYPE_CHECKING:
    from sparktui.config import SparkConfig
    from sparktui.domain.telemetry import Sample

#: The percentiles every level reports (TTFT and ITL).
PERCENTILES: tuple[int, ...] = (50, 95, 99)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) by linear interpolation between closest ranks; ``None`` if empty."""
    if not values:
        return None
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile {q} is not within 0..100")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


@dataclass(frozen=True)
class Quantiles:
    """Seconds. ``count`` observations; every field ``None`` without observations."""

    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    mean: float | None = None
    count: int = 0

    @staticmethod
    def of(values: Sequence[float]) -> Quantiles:
        if not values:
            return Quantiles()
        return Quantiles(percentile(values, 50), percentile(values, 95), percentile(values, 99),
                         sum(values) / len(values), len(values))

    def to_json(self) -> dict[str, Any]:
        return {"p50": self.p50, "p95": self.p95, "p99": self.p99, "mean": self.mean, "count": self.count}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Quantiles:
        def f(key: str) -> float | None:
            value = data.get(key)
            return None if value is None else float(value)

        return Quantiles(f("p50"), f("p95"), f("p99"), f("mean"), int(data.get("count") or 0))


@dataclass(frozen=True)
class RequestResult:
    """One benchmark request as the client saw it (times: the client's monotonic clock, seconds)."""

    started: float
    ended: float
    ok: bool
    output_tokens: int = 0
    prompt_tokens: int = 0
    ttft: float | None = None
    #: gaps between successive tokens (chunks carrying more than one token count as one gap)
    itl: tuple[float, ...] = ()
    error: str = ""


@dataclass(frozen=True)
class BenchPlan:
    """What a sweep sends: per level ``requests_for(c)`` requests, at most ``c`` in flight."""

    concurrency: tuple[int, ...] = (1, 4, 16)
    input_len: int = 128
    output_len: int = 64
    #: requests per level; 0 = four per concurrent stream (at least 8)
    requests: int = 0
    warmup: int = 2
    #: prompts read from a file (cycled); empty = synthetic prompts of ``input_len`` words
    prompts: tuple[str, ...] = ()
    #: requests per level as rounds of ``concurrency`` requests (a profile's), when ``requests`` is 0
    rounds: int = 0

    def requests_for(self, concurrency: int) -> int:
        if self.requests > 0:
            return self.requests
        return self.rounds * concurrency if self.rounds > 0 else max(8, 4 * concurrency)

    def prompt(self, index: int) -> str:
        """The ``index``-th prompt: from the file, or ``input_len`` words that differ from the first word
        on (so no request hits another's prefix cache)."""
        if self.prompts:
            return self.prompts[index % len(self.prompts)]
        words = [f"r{index}"] + [_WORDS[(index + i) % len(_WORDS)] for i in range(max(0, self.input_len - 1))]
        return " ".join(words)


_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
          "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango")


def read_prompt_file(text: str) -> tuple[str, ...]:
    """Prompts from a file: one per line (blank lines skipped), or a JSON list of strings."""
    stripped = text.strip()
    if stripped.startswith("["):
        import json

        data = json.loads(stripped)
        if not isinstance(data, list) or not all(isinstance(p, str) for p in data):
            raise ValueError("a JSON prompt file must be a list of strings")
        prompts = tuple(p for p in data if p.strip())
    else:
        prompts = tuple(line for line in text.splitlines() if line.strip())
    if not prompts:
        raise ValueError("no prompts in the file")
    return prompts


class StreamTimer:
    """Times one streaming request as its chunks arrive: TTFT, and the gaps between content chunks
    (the same for the built-in client and the stand-in's ``vllm bench serve``)."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.first: float | None = None
        self.last: float | None = None
        self.gaps: list[float] = []
        self.chunks = 0

    def token(self, now: float) -> None:
        if self.first is None:
            self.first = now
        elif self.last is not None:
            self.gaps.append(now - self.last)
        self.last = now
        self.chunks += 1

    def result(self, ended: float, output_tokens: int | None = None, prompt_tokens: int = 0) -> RequestResult:
        """The request's result; ``output_tokens`` from the usage chunk (else one per content chunk)."""
        if self.first is None:
            return RequestResult(self.started, ended, False, error="no token came back")
        return RequestResult(self.started, ended, True,
                             output_tokens=output_tokens if output_tokens is not None else self.chunks,
                             prompt_tokens=prompt_tokens, ttft=self.first - self.started,
                             itl=tuple(self.gaps))


# ---- energy ---------------------------------------------------------------------------------------
PowerPoint = tuple[float, float]   # (time in seconds on the bench's clock, watts)


def node_power(gpu_powers: Iterable[float | None]) -> float | None:
    """A node's GPU power from its devices' readings: their sum; ``None`` when none is known."""
    known = [p for p in gpu_powers if p is not None]
    return float(sum(known)) if known else None


def power_series(samples: Iterable[Sample], *, node_clock: bool = False) -> list[PowerPoint]:
    """(time, watts) of each sample with a known GPU power. Time: when the sample arrived (the
    controller's monotonic clock, the bench's own) or, with ``node_clock``, the node's monotonic clock
    (for recorded streams)."""
    out: list[PowerPoint] = []
    for sample in samples:
        watts = node_power(g.power_w for g in sample.gpu.devices)
        at = sample.mono if node_clock or sample.received is None else sample.received
        if watts is not None:
            out.append((at, watts))
    return out


class PowerTap:
    """An event-stream observer that keeps each node's recent GPU power (arrival time, watts), for a
    benchmark run inside a process that already streams telemetry (the dashboard): no second probe."""

    #: It reads node samples only (``EventStream.observe``).
    kinds = (NodeSampled,)

    def __init__(self, keep: int = 7200) -> None:
        self._keep = keep
        self._points: dict[str, deque[PowerPoint]] = {}

    def __call__(self, event: Any) -> None:
        if isinstance(event, NodeSampled) and event.sample is not None:
            points = power_series([event.sample])
            if points:
                self._points.setdefault(event.node, deque(maxlen=self._keep)).extend(points)

    def series(self) -> dict[str, list[PowerPoint]]:
        return {node: list(points) for node, points in self._points.items()}


def _power_at(points: Sequence[PowerPoint], t: float) -> float:
    if t <= points[0][0]:
        return points[0][1]
    if t >= points[-1][0]:
        return points[-1][1]
    for (t0, p0), (t1, p1) in itertools.pairwise(points):
        if t0 <= t <= t1:
            return p0 if t1 == t0 else p0 + (p1 - p0) * (t - t0) / (t1 - t0)
    return points[-1][1]  # unreachable for sorted points


def energy_joules(points: Sequence[PowerPoint], start: float, end: float) -> float | None:
    """Joules drawn between ``start`` and ``end``: the trapezoid integral of the power readings, the
    edges interpolated. ``None`` without readings, or when the readings do not overlap the window (a
    probe that stopped before the run says nothing about it)."""
    if end <= start:
        return 0.0 if points else None
    pts = sorted(points)
    if not pts or pts[-1][0] < start or pts[0][0] > end:
        return None
    inner = [(t, p) for t, p in pts if start < t < end]
    series = [(start, _power_at(pts, start)), *inner, (end, _power_at(pts, end))]
    return sum((t1 - t0) * (p0 + p1) / 2.0 for (t0, p0), (t1, p1) in itertools.pairwise(series))


@dataclass(frozen=True)
class Energy:
    """Joules per node and in total over one window, and per generated token."""

    joules: Mapping[str, float]          # node → J (nodes without power readings left out)
    tokens: int
    #: nodes that had no power readings in the window (GPU power unknown there)
    unknown: tuple[str, ...] = ()

    @property
    def total_joules(self) -> float | None:
        return float(sum(self.joules.values())) if self.joules else None

    @property
    def joules_per_token(self) -> float | None:
        total = self.total_joules
        return None if total is None or self.tokens <= 0 else total / self.tokens

    def node_joules_per_token(self, node: str) -> float | None:
        j = self.joules.get(node)
        return None if j is None or self.tokens <= 0 else j / self.tokens

    def to_json(self) -> dict[str, Any]:
        return {
            "joules": dict(self.joules), "total_joules": self.total_joules, "tokens": self.tokens,
            "joules_per_token": self.joules_per_token,
            "node_joules_per_token": {n: self.node_joules_per_token(n) for n in self.joules},
            "unknown": list(self.unknown),
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Energy:
        return Energy({str(k): float(v) for k, v in (data.get("joules") or {}).items()},
                      int(data.get("tokens") or 0), tuple(str(n) for n in data.get("unknown") or ()))


def energy_over(power: Mapping[str, Sequence[PowerPoint]], start: float, end: float, tokens: int) -> Energy:
    """The energy of a window from each node's power series."""
    joules: dict[str, float] = {}
    unknown: list[str] = []
    for node, points in power.items():
        j = energy_joules(points, start, end)
        if j is None:
            unknown.append(node)
        else:
            joules[node] = j
    return Energy(joules, tokens, tuple(unknown))


# ---- one level ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LevelResult:
    """One concurrency level of a sweep."""

    concurrency: int
    requests: int                  # sent
    completed: int
    failed: int
    seconds: float                 # wall time of the level
    output_tokens: int
    input_tokens: int
    ttft: Quantiles = field(default_factory=Quantiles)
    itl: Quantiles = field(default_factory=Quantiles)
    energy: Energy | None = None
    #: interrupted before every request of the level was done: the figures cover what finished
    partial: bool = False
    errors: tuple[str, ...] = ()   # the first few distinct error texts
    #: tokens of context in front of each prompt (a profile's context depth; 0 = the prompt alone)
    depth: int = 0

    @property
    def output_tok_s(self) -> float | None:
        return self.output_tokens / self.seconds if self.seconds > 0 else None

    @property
    def requests_s(self) -> float | None:
        return self.completed / self.seconds if self.seconds > 0 else None

    def to_json(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency, "requests": self.requests, "completed": self.completed,
            "failed": self.failed, "seconds": self.seconds, "output_tokens": self.output_tokens,
            "input_tokens": self.input_tokens, "output_tok_s": self.output_tok_s,
            "requests_s": self.requests_s, "ttft": self.ttft.to_json(), "itl": self.itl.to_json(),
            "energy": self.energy.to_json() if self.energy is not None else None,
            "partial": self.partial, "errors": list(self.errors), "depth": self.depth,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> LevelResult:
        energy = data.get("energy")
        return LevelResult(
            concurrency=int(data["concurrency"]), requests=int(data.get("requests") or 0),
            completed=int(data.get("completed") or 0), failed=int(data.get("failed") or 0),
            seconds=float(data.get("seconds") or 0.0), output_tokens=int(data.get("output_tokens") or 0),
            input_tokens=int(data.get("input_tokens") or 0),
            ttft=Quantiles.from_json(data.get("ttft") or {}), itl=Quantiles.from_json(data.get("itl") or {}),
            energy=Energy.from_json(energy) if isinstance(energy, Mapping) else None,
            partial=bool(data.get("partial")), errors=tuple(str(e) for e in data.get("errors") or ()),
            depth=int(data.get("depth") or 0),
        )


def summarize_level(
    concurrency: int,
    results: Sequence[RequestResult],
    *,
    requests: int | None = None,
    power: Mapping[str, Sequence[PowerPoint]] | None = None,
    partial: bool = False,
) -> LevelResult:
    """The figures of one level from its requests; the window runs from the first request sent to the
    last one finished. ``power``: each node's power series on the same clock (for the energy)."""
    done = [r for r in results if r.ok]
    failed = [r for r in results if not r.ok]
    if results:
        start = min(r.started for r in results)
        end = max(r.ended for r in results)
    else:
        start = end = 0.0
    tokens = sum(r.output_tokens for r in done)
    errors: list[str] = []
    for r in failed:
        if r.error and r.error not in errors and len(errors) < 3:
            errors.append(r.error)
    energy = energy_over(power, start, end, tokens) if power and results else None
    return LevelResult(
        concurrency=concurrency, requests=requests if requests is not None else len(results),
        completed=len(done), failed=len(failed), seconds=max(0.0, end - start), output_tokens=tokens,
        input_tokens=sum(r.prompt_tokens for r in done),
        ttft=Quantiles.of([r.ttft for r in done if r.ttft is not None]),
        itl=Quantiles.of([gap for r in done for gap in r.itl]),
        energy=energy, partial=partial, errors=tuple(errors),
    )


# ---- a whole run and its comparison ---------------------------------------------------------------
@dataclass(frozen=True)
class BenchRecord:
    """One sweep as remembered in the bench history (``bench.jsonl`` beside the run history)."""

    started_at: float              # epoch seconds
    model: str
    image: str
    levels: tuple[LevelResult, ...]
    input_len: int
    output_len: int
    client: str                    # "vllm-bench" | "builtin"
    flags: tuple[str, ...] = ()    # engine.extra_args
    recipe: str | None = None
    vllm_version: str | None = None
    cluster: str = ""
    interrupted: bool = False
    prompt_file: str | None = None
    #: ``bench --profile NAME`` (None: the flags' own sweep)
    profile: str | None = None
    #: what was measured (``bench_fingerprint.Fingerprint.to_json``: image ID, vLLM, model, flags, nodes,
    #: link)
    fingerprint: Mapping[str, Any] | None = None
    #: the decode ceiling for one stream (``serve_plan.DecodeCeiling.to_json``), when the model was counted
    ceiling: Mapping[str, Any] | None = None

    def level(self, concurrency: int, depth: int = 0) -> LevelResult | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency and lv.depth == depth), None)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "started_at": self.started_at, "model": self.model, "image": self.image,
            "input_len": self.input_len, "output_len": self.output_len, "client": self.client,
            "flags": list(self.flags), "vllm_version": self.vllm_version, "cluster": self.cluster,
            "interrupted": self.interrupted, "levels": [lv.to_json() for lv in self.levels],
        }
        if self.recipe is not None:
            data["recipe"] = self.recipe
        if self.prompt_file is not None:
            data["prompt_file"] = self.prompt_file
        for key in ("profile", "fingerprint", "ceiling"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        return data

    @staticmethod
    def from_json(data: Any) -> BenchRecord:
        """Raises ``ValueError`` for anything that is not a record we wrote."""
        if not isinstance(data, Mapping):
            raise ValueError("not an object")
        try:
            return BenchRecord(
                started_at=float(data["started_at"]), model=str(data["model"]),
                image=str(data.get("image", "")),
                levels=tuple(LevelResult.from_json(lv) for lv in data.get("levels") or ()),
                input_len=int(data.get("input_len") or 0), output_len=int(data.get("output_len") or 0),
                client=str(data.get("client") or "builtin"),
                flags=tuple(str(f) for f in data.get("flags") or ()),
                recipe=None if data.get("recipe") is None else str(data["recipe"]),
                vllm_version=data.get("vllm_version"), cluster=str(data.get("cluster") or ""),
                interrupted=bool(data.get("interrupted")),
                prompt_file=None if data.get("prompt_file") is None else str(data["prompt_file"]),
                profile=None if data.get("profile") is None else str(data["profile"]),
                fingerprint=data["fingerprint"] if isinstance(data.get("fingerprint"), Mapping) else None,
                ceiling=data["ceiling"] if isinstance(data.get("ceiling"), Mapping) else None,
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"bad bench record: {exc!r}") from exc


@dataclass(frozen=True)
class Comparison:
    """One level's output tok/s against the same level of an earlier run."""

    concurrency: int
    output_tok_s: float
    earlier_tok_s: float
    earlier_started_at: float
    same_image: bool
    same_flags: bool
    depth: int = 0

    @property
    def change_percent(self) -> float:
        return 100.0 * (self.output_tok_s - self.earlier_tok_s) / self.earlier_tok_s

    def describe(self, date_text: str) -> str:
        """``output tok/s at c=4: 35.2 (−7 % vs the run of 11-28, same image)``; the caller formats the
        earlier run's date (local time is presentation)."""
        change = round(self.change_percent)
        sign = "+" if change > 0 else "−" if change < 0 else "±"
        setup = "same image" if self.same_image else "other image"
        if not self.same_flags:
            setup += ", other flags"
        where = f"c={self.concurrency}" + (f", depth {self.depth:,}" if self.depth else "")
        return (f"output tok/s at {where}: {self.output_tok_s:.1f} "
                f"({sign}{abs(change)} % vs the run of {date_text}, {setup})")


def comparable(current: BenchRecord, earlier: BenchRecord) -> bool:
    """Runs worth comparing: same model, same client (vLLM's tool and the built-in one time differently)
    and the same request shape (lengths, prompt file)."""
    return (earlier.model == current.model and earlier.client == current.client
            and earlier.input_len == current.input_len
            and earlier.output_len == current.output_len and earlier.prompt_file == current.prompt_file
            and earlier.profile == current.profile and earlier.started_at < current.started_at)


def baseline(current: BenchRecord, history: Iterable[BenchRecord]) -> BenchRecord | None:
    """The earlier run to compare with: the newest comparable one, preferring the same image."""
    candidates = [r for r in history if comparable(current, r) and any(lv.completed for lv in r.levels)]
    same = [r for r in candidates if r.image == current.image]
    pool = same or candidates
    return max(pool, key=lambda r: r.started_at) if pool else None


def compare(current: BenchRecord, earlier: BenchRecord) -> list[Comparison]:
    """Output tok/s of each level both runs measured (with a rate above 0)."""
    out = []
    for level in current.levels:
        before = earlier.level(level.concurrency, level.depth)
        now_rate = level.output_tok_s
        then_rate = before.output_tok_s if before is not None else None
        if now_rate is None or not then_rate:
            continue
        out.append(Comparison(level.concurrency, now_rate, then_rate, earlier.started_at,
                              earlier.image == current.image, tuple(earlier.flags) == tuple(current.flags),
                              level.depth))
    return out


# ---- vLLM's own tool ------------------------------------------------------------------------------
def parse_vllm_bench_output(text: str) -> dict[str, float]:
    """The ``label: number`` lines of ``vllm bench serve``'s result block (``Successful requests``,
    ``Output token throughput (tok/s)``, ``P95 TTFT (ms)`` …) as a dict; anything else is ignored, so
    newer releases' extra lines and the progress bar never break it. Empty when no result block."""
    out: dict[str, float] = {}
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if "Serving Benchmark Result" in line:
            inside, out = True, {}
            continue
        if not inside:
            continue
        if line.startswith("=" * 10):
            break
        label, sep, value = line.rpartition(":")
        if not sep:
            continue
        try:
            out[label.strip()] = float(value.strip())
        except ValueError:
            continue
    return out


def level_from_vllm_bench(
    concurrency: int,
    figures: Mapping[str, float],
    *,
    requests: int,
    power: Mapping[str, Sequence[PowerPoint]] | None = None,
    window: tuple[float, float] | None = None,
) -> LevelResult:
    """A level from ``vllm bench serve``'s figures (milliseconds → seconds). ``window``: when the tool
    ran, on the power series' clock; the energy covers its last "Benchmark duration" seconds."""

    def ms(name: str) -> float | None:
        value = figures.get(name)
        return None if value is None else value / 1000.0

    def quantiles(metric: str) -> Quantiles:
        return Quantiles(ms(f"P50 {metric} (ms)") or ms(f"Median {metric} (ms)"), ms(f"P95 {metric} (ms)"),
                         ms(f"P99 {metric} (ms)"), ms(f"Mean {metric} (ms)"),
                         int(figures.get("Successful requests", 0)))

    completed = int(figures.get("Successful requests", 0))
    tokens = int(figures.get("Total generated tokens", 0))
    seconds = float(figures.get("Benchmark duration (s)", 0.0))
    energy = None
    if power and window is not None:
        # The tool's start-up (tokenizer, warm-ups) is inside the window; its measured part is the end.
        start = max(window[0], window[1] - seconds) if seconds > 0 else window[0]
        energy = energy_over(power, start, window[1], tokens)
    return LevelResult(
        concurrency=concurrency, requests=requests, completed=completed, failed=max(0, requests - completed),
        seconds=seconds, output_tokens=tokens, input_tokens=int(figures.get("Total input tokens", 0)),
        ttft=quantiles("TTFT"), itl=quantiles("ITL"), energy=energy,
    )


def bench_record(config: SparkConfig, plan: BenchPlan, levels: list[LevelResult], *, client: str,
                vllm_version: str | None, started_at: float, interrupted: bool = False,
                prompt_file: str | None = None, profile: str | None = None,
                fingerprint: Mapping[str, Any] | None = None,
                ceiling: Mapping[str, Any] | None = None) -> BenchRecord:
    """The history record of a sweep, with what it ran against (recipe only when the config has one)."""
    engine = config.engine
    return BenchRecord(
        started_at=started_at, model=engine.model, image=engine.image if engine.runtime == "docker" else "",
        levels=tuple(levels), input_len=plan.input_len, output_len=plan.output_len,
        client="vllm-bench" if client == "vllm" else "builtin", flags=tuple(engine.extra_args),
        recipe=getattr(engine, "recipe", None), vllm_version=vllm_version, cluster=config.cluster.name,
        interrupted=interrupted, prompt_file=prompt_file, profile=profile, fingerprint=fingerprint,
        ceiling=ceiling,
    )
