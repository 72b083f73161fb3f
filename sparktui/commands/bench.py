"""`sparktui bench [--concurrency 1,4,16] [--input-len N] [--output-len N] [--prompt-file F] [--json]`:
a sweep against the running engine's OpenAI API with energy per token, saved and compared.
`sparktui bench --profile NAME` runs a named sweep (``domain/bench_profiles.py``: ``short``, the community's
``llama-benchy``); `sparktui bench --compare A B` sets two saved sweeps side by side (numbers from
``--history``). Each sweep is saved with its fingerprint (image ID, vLLM version, model, flags, nodes, link)
and the decode ceiling of the model (``domain/serve_plan.py``), and each level's one-stream decode speed is
shown as a percentage of it.

Client: ``vllm bench serve`` in the head container when that vLLM has it (``--client auto``, the
default), else the built-in async client through the head's SSH port forward. The nodes' GPU power is
sampled by the telemetry probe meanwhile. Results go to the bench history (``bench.jsonl`` beside
``runs.jsonl``) with model, image, recipe and flags, and each level's output tok/s is compared with the
newest comparable earlier sweep. Ctrl-C ends the sweep and prints (and saves) what was measured.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparktui.commands.common import config_from_args, positive_int, print_json, refuse_example, run_async
from sparktui.commands.exit_status import ExitStatus
from sparktui.domain.bench import (
    BenchPlan,
    BenchRecord,
    Comparison,
    LevelResult,
    baseline,
    bench_record,
    compare,
)

if TYPE_CHECKING:   # the config brings pydantic: loaded when the verb runs, not for its --help
    from sparktui.config import SparkConfig
    from sparktui.domain.bench_chart import BenchDone


def _levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of whole numbers: {text!r}") from None
    if not levels or any(c < 1 for c in levels):
        raise argparse.ArgumentTypeError(f"concurrency levels must be 1 or more: {text!r}")
    return levels


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = "exit status: 0 measured, 1 the engine did not answer or every request failed, " \
                    "2 no usable config, 130 interrupted (partial results printed and saved)"
    parser.add_argument("--concurrency", type=_levels, default=(1, 4, 16), metavar="C,C,…",
                        help="concurrency levels (default 1,4,16)")
    parser.add_argument("--input-len", type=positive_int, default=128, metavar="TOKENS",
                        help="prompt length of the synthetic prompts (default 128)")
    parser.add_argument("--output-len", type=positive_int, default=64, metavar="TOKENS",
                        help="tokens generated per request (default 64, ignore_eos)")
    parser.add_argument("--requests", type=positive_int, default=None, metavar="N",
                        help="requests per level (default 4 × concurrency, at least 8)")
    parser.add_argument("--warmup", type=int, default=2, metavar="N", help="warm-up requests (default 2)")
    parser.add_argument("--prompt-file", metavar="PATH",
                        help="prompts to send instead (one per line, or a JSON list of strings)")
    parser.add_argument("--client", choices=("auto", "builtin", "vllm"), default="auto",
                        help="vllm: `vllm bench serve` on the head; builtin: sparktui's client; "
                             "auto (default): vllm when the image has it")
    parser.add_argument("--tokenizer", metavar="NAME", help="for `vllm bench serve` (default: the model)")
    parser.add_argument("--json", action="store_true", help="one JSON object at the end")
    parser.add_argument("--no-save", action="store_true", help="do not add this sweep to the history")
    parser.add_argument("--file", metavar="PATH", help="bench history file (default: "
                        "$XDG_STATE_HOME/sparktui/bench.jsonl)")
    parser.add_argument("--history", action="store_true",
                        help="list the saved sweeps (needs no config and no engine) and exit")
    from sparktui.domain.bench_profiles import PROFILES

    parser.add_argument("--profile", choices=list(PROFILES), metavar="NAME",
                        help="a named sweep instead of the flags above: " + "; ".join(
                            f"{p.name}: {p.summary}" for p in PROFILES.values()))
    parser.add_argument("--compare", nargs=2, type=int, metavar=("A", "B"),
                        help="compare two saved sweeps by their number in --history (-1 = the newest; "
                             "needs no config and no engine) and exit")


def run(args: argparse.Namespace) -> int:
    if args.history:
        return list_history(args)
    if args.compare:
        return compare_saved(args)
    config = config_from_args(args)
    if refuse_example(args, config, "bench", ""):
        return ExitStatus.USAGE
    prompts: tuple[str, ...] = ()
    if args.prompt_file:
        from sparktui.domain.bench import read_prompt_file

        try:
            prompts = read_prompt_file(Path(args.prompt_file).expanduser().read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"sparktui bench: {args.prompt_file}: {exc}", file=sys.stderr)
            return ExitStatus.USAGE
    plan = BenchPlan(concurrency=args.concurrency, input_len=args.input_len, output_len=args.output_len,
                     requests=args.requests or 0, warmup=max(0, args.warmup), prompts=prompts)
    sweeps: list[tuple[int, BenchPlan]] = [(0, plan)]
    if args.profile:
        from sparktui.domain.bench_profiles import PROFILES
        from sparktui.domain.lifecycle.memory_fit import settings_of

        profile = PROFILES[args.profile]
        sweeps, skipped = profile.plans(settings_of(config).max_model_len)
        for note in skipped:
            print(f"sparktui bench: {note}", file=sys.stderr)
        if not sweeps:
            print(f"sparktui bench: no depth of the {profile.name} profile fits --max-model-len",
                  file=sys.stderr)
            return ExitStatus.USAGE
        plan = BenchPlan(concurrency=profile.concurrency, input_len=profile.input_len,
                         output_len=profile.output_len, rounds=profile.rounds, warmup=profile.warmup)
    return run_async(bench(config, plan, args, sweeps))


def _store(args: argparse.Namespace) -> Any:
    from sparktui.domain.bench_history import BenchStore

    return BenchStore(Path(args.file).expanduser() if getattr(args, "file", None) else None)


class Progress:
    """One status line on stderr while a level runs (rewritten in place on a terminal)."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.t0 = time.monotonic()

    def __call__(self, concurrency: int, done: int, total: int) -> None:
        text = f"[{time.monotonic() - self.t0:6.1f}s] c={concurrency}: {done}/{total} requests"
        if self.tty:
            print("\r" + text, end="", file=sys.stderr, flush=True)
        elif done in (0, total):
            print(text, file=sys.stderr, flush=True)

    def level(self, level: LevelResult) -> None:
        if self.tty:
            print("\r", end="", file=sys.stderr)
        print(f"[{time.monotonic() - self.t0:6.1f}s] c={level.concurrency}: {_rate(level.output_tok_s)} "
              f"output tok/s", file=sys.stderr, flush=True)


async def bench(config: SparkConfig, plan: BenchPlan, args: argparse.Namespace,
                sweeps: list[tuple[int, BenchPlan]] | None = None) -> int:
    """``plan``: what the record says was sent; ``sweeps``: (context depth, plan) run in turn (default:
    ``plan`` alone)."""
    from sparktui.domain.lifecycle import plan as P
    from sparktui.remote.api_client import EngineApi, EngineApiError
    from sparktui.remote.bench_runner import (
        PowerRecorder,
        VllmBenchError,
        run_builtin_sweep,
        run_vllm_bench_sweep,
        vllm_bench_help,
    )
    from sparktui.remote.cluster import close_cluster, open_cluster
    from sparktui.remote.transport import TransportError

    transports = await open_cluster(config)
    head = config.head
    engine = config.engine
    progress = Progress()
    power: PowerRecorder | None = None
    api: EngineApi | None = None
    started_at = time.time()
    try:
        try:
            transport = transports[head.name]
            await transport.wait_connected(30)
            api = await EngineApi.connect(transport, "127.0.0.1", engine.api_port)
            models = await api.models()
        except (TransportError, EngineApiError) as exc:
            print(f"sparktui bench: the engine does not answer on {head.name}:{engine.api_port}: {exc}",
                  file=sys.stderr)
            return ExitStatus.NOT_WELL
        if not models and not engine.served_model_name:
            print(f"sparktui bench: the engine on {head.name} serves no model (/v1/models is empty)",
                  file=sys.stderr)
            return ExitStatus.NOT_WELL
        model = engine.served_model_name or models[0]
        version = await api.version()
        power = PowerRecorder({n.name: (transports[n.name], n) for n in config.nodes}, engine,
                              interval=config.ui.refresh_interval)
        power.start()
        await power.wait_first()
        runtime = P.runtimes(config)[head.name]
        client = args.client
        tool_help = None
        if client != "builtin":
            tool_help = await vllm_bench_help(transport, runtime.wrap, engine.vllm_command)
            if tool_help is None and client == "vllm":
                print(f"sparktui bench: `{' '.join(engine.vllm_command)} bench serve` is not available on "
                      f"{head.name} (vLLM before 0.10?); use --client builtin", file=sys.stderr)
                return ExitStatus.NOT_WELL
            client = "vllm" if tool_help is not None else "builtin"
        fingerprint, ceiling = await measured_setup(config, transport, version)
        if not args.json:
            levels = ",".join(map(str, plan.concurrency))
            depths = "" if sweeps is None or len(sweeps) < 2 else \
                ", context depths " + ",".join(f"{d:,}" for d, _ in sweeps)
            print(f"bench {model} on {config.cluster.name}: "
                  + (f"profile {args.profile}, " if getattr(args, "profile", None) else "")
                  + f"concurrency {levels}{depths}, {plan.input_len} in / {plan.output_len} out, client "
                  f"{'vllm bench serve' if client == 'vllm' else 'built-in'}", flush=True)
            print(f"measuring: {fingerprint['text']}", flush=True)
        levels_done: list[LevelResult] = []
        interrupted = False
        for depth, sweep in sweeps or [(0, plan)]:
            if sweeps is not None and len(sweeps) > 1:
                print(f"context depth {depth:,}: {sweep.input_len:,} prompt words per request",
                      file=sys.stderr, flush=True)
            if client == "vllm":
                try:
                    outcome = await run_vllm_bench_sweep(
                        transport, runtime.wrap, engine.vllm_command,
                        base_url=f"http://127.0.0.1:{engine.api_port}", model=model, plan=sweep,
                        tokenizer=args.tokenizer or engine.model, power=power, on_progress=progress,
                        on_level=progress.level, warmups="--num-warmups" in (tool_help or ""))
                except (VllmBenchError, TransportError) as exc:
                    print(f"sparktui bench: {exc}", file=sys.stderr)
                    return ExitStatus.NOT_WELL
            else:
                outcome = await run_builtin_sweep(api, model, sweep, power=power, on_progress=progress,
                                                  on_level=progress.level)
            levels_done += [replace(lv, depth=depth) for lv in outcome.levels]
            if outcome.interrupted:
                interrupted = True
                break
        fingerprint.pop("text", None)
        record = bench_record(config, plan, levels_done, client=client, vllm_version=version,
                             started_at=started_at, interrupted=interrupted,
                             prompt_file=args.prompt_file, profile=getattr(args, "profile", None),
                             fingerprint=fingerprint, ceiling=ceiling)
        store = _store(args)
        comparisons = save_and_compare(record, store, save=not args.no_save)
        if args.json:
            print_json({**record.to_json(), "comparisons": [_comparison_json(c) for c in comparisons],
                        "saved_to": None if args.no_save or not record.levels else str(store.path)})
        else:
            print(render(record, comparisons))
        if interrupted:
            return ExitStatus.INTERRUPTED
        return ExitStatus.of(any(lv.completed for lv in record.levels))
    finally:
        if power is not None:
            await power.stop()
        if api is not None:
            await api.aclose()
        await close_cluster(transports)


async def measured_setup(config: SparkConfig, transport: Any, vllm_version: str | None
                         ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The fingerprint of what a sweep measures (its ``text`` in words) and the model's decode ceiling
    (None when the head's model directory has no config.json that can be counted)."""
    from sparktui.domain.bench_fingerprint import Fingerprint, link_state
    from sparktui.domain.lifecycle.preflight_plan import model_argv
    from sparktui.domain.linktest import LinkTestStore
    from sparktui.domain.model_files import parse_model_info
    from sparktui.domain.model_params import count_params
    from sparktui.domain.serve_plan import decode_ceiling
    from sparktui.domain.sizing import SizingError
    from sparktui.remote.transport import TransportError

    engine = config.engine
    image_id = None
    if engine.runtime == "docker":
        try:
            res = await transport.run(["docker", "image", "inspect", "--format", "{{.Id}}", engine.image],
                                      timeout=30)
            image_id = res.stdout.strip() or None if res.ok else None
        except TransportError:
            image_id = None
    linktests = LinkTestStore().load()
    fp = Fingerprint(model=engine.model, image=engine.image if engine.runtime == "docker" else "host",
                     image_id=image_id, vllm_version=vllm_version, flags=tuple(engine.extra_args),
                     nodes=tuple(n.name for n in config.nodes), tensor_parallel=engine.tensor_parallel_size,
                     pipeline_parallel=engine.pipeline_parallel_size, link=link_state(linktests))
    ceiling = None
    try:
        res = await transport.run(model_argv(config, config.head), timeout=60)
        model_dir = parse_model_info(res.stdout) if res.ok else None
        if model_dir is not None and model_dir.config is not None:
            ceiling = decode_ceiling(count_params(model_dir.config), engine.tensor_parallel_size,
                                     engine.pipeline_parallel_size, linktests).to_json()
    except (TransportError, ValueError, SizingError):
        ceiling = None
    return {**fp.to_json(), "text": fp.describe()}, ceiling


def compare_saved(args: argparse.Namespace) -> int:
    """``--compare A B``: two sweeps of the history by their ``--history`` number (1 = the oldest)."""
    from sparktui.domain.bench_profiles import compare_records

    records = _store(args).load()
    picked = []
    for n in args.compare:
        index = n - 1 if n > 0 else n
        if not records or not -len(records) <= index < len(records) or n == 0:
            print(f"sparktui bench: no sweep number {n} (the history has {len(records)}: see --history)",
                  file=sys.stderr)
            return ExitStatus.USAGE
        picked.append(records[index])
    a, b = picked
    lines = compare_records(a, b)
    if args.json:
        print_json({"a": a.to_json(), "b": b.to_json(), "differences": lines})
    else:
        print(f"A: {_when(a)} {a.profile or 'flags'}   B: {_when(b)} {b.profile or 'flags'}")
        print("\n".join(lines))
    return ExitStatus.OK


def _when(record: BenchRecord) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(record.started_at))


def save_and_compare(record: BenchRecord, store: Any, *, save: bool = True) -> list[Comparison]:
    """Compare with the newest comparable earlier sweep, then append this one (when it measured any)."""
    earlier = baseline(record, store.load())
    comparisons = compare(record, earlier) if earlier is not None else []
    if record.levels and save:
        store.append(record)
    return comparisons


#: The dashboard's quick sweep (key ``b``): short, so it never holds the engine for long.
QUICK_PLAN = BenchPlan(concurrency=(1, 4), input_len=128, output_len=64, requests=8, warmup=1)


async def quick_bench(config: SparkConfig, transport: Any, power: Any = None) -> BenchDone:
    """The dashboard's bench: the built-in client through the head's transport, power from the
    dashboard's own telemetry (``power``: a ``PowerTap``); saved and compared; one summary line and the
    record (the dashboard's chart)."""
    from sparktui.domain.bench_chart import BenchDone
    from sparktui.domain.bench_history import BenchStore
    from sparktui.remote.api_client import EngineApi
    from sparktui.remote.bench_runner import run_builtin_sweep

    started_at = time.time()
    api = await EngineApi.connect(transport, "127.0.0.1", config.engine.api_port)
    try:
        model = config.engine.served_model_name or (await api.models())[0]
        version = await api.version()
        outcome = await run_builtin_sweep(api, model, QUICK_PLAN, power=power)
    finally:
        await api.aclose()
    fingerprint, ceiling = await measured_setup(config, transport, version)
    fingerprint.pop("text", None)
    record = bench_record(config, QUICK_PLAN, outcome.levels, client="builtin", vllm_version=version,
                         started_at=started_at, interrupted=outcome.interrupted, fingerprint=fingerprint,
                         ceiling=ceiling)
    comparisons = save_and_compare(record, BenchStore())
    return BenchDone(summary(record, comparisons), record)


def summary(record: BenchRecord, comparisons: list[Comparison]) -> str:
    """One line: "c=1 17.0 tok/s · c=4 36.2 tok/s (2.10 J/token) — output tok/s at c=4: …"."""
    parts = []
    for lv in record.levels:
        energy = lv.energy.joules_per_token if lv.energy is not None else None
        jpt = f" ({energy:.2f} J/token)" if energy is not None else ""
        parts.append(f"c={lv.concurrency} {_rate(lv.output_tok_s)} tok/s{jpt}")
    text = " · ".join(parts) or "no request finished"
    if comparisons:
        last = comparisons[-1]
        text += " — " + last.describe(_date(last.earlier_started_at))
    return text


def list_history(args: argparse.Namespace) -> int:
    store = _store(args)
    records = store.load()
    if args.json:
        print_json([r.to_json() for r in records])
        return ExitStatus.OK
    if not records:
        print(f"no bench sweeps saved yet ({store.path})")
        return ExitStatus.OK
    rows = [("#", "started", "model", "client", "profile", "fingerprint", "output tok/s by concurrency",
             "J/token")]
    for number, r in enumerate(records, 1):
        top = max(r.levels, key=lambda lv: lv.concurrency) if r.levels else None
        jpt = top.energy.joules_per_token if top is not None and top.energy is not None else None
        rows.append((
            str(number), _when(r), r.model.rstrip("/").rsplit("/", 1)[-1], r.client, r.profile or "–",
            str((r.fingerprint or {}).get("key") or "–"),
            " · ".join(f"c={lv.concurrency}{f'@{lv.depth:,}' if lv.depth else ''} {_rate(lv.output_tok_s)}"
                       for lv in r.levels)
            + (" (interrupted)" if r.interrupted else ""),
            "–" if jpt is None or top is None else f"{jpt:.2f} at c={top.concurrency}",
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return ExitStatus.OK


def _comparison_json(c: Comparison) -> dict[str, Any]:
    return {"concurrency": c.concurrency, "output_tok_s": c.output_tok_s, "earlier_tok_s": c.earlier_tok_s,
            "change_percent": c.change_percent, "earlier_started_at": c.earlier_started_at,
            "same_image": c.same_image, "same_flags": c.same_flags,
            "text": c.describe(_date(c.earlier_started_at))}


def _date(epoch: float) -> str:
    return time.strftime("%m-%d", time.localtime(epoch))


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value * 1000:.0f}"


def _energy(level: LevelResult) -> str:
    e = level.energy
    if e is None or e.joules_per_token is None:
        return "unknown"
    nodes = ", ".join(f"{n} {e.node_joules_per_token(n):.2f}" for n in e.joules)
    return f"{e.joules_per_token:.2f} ({nodes})"


def render(record: BenchRecord, comparisons: list[Comparison]) -> str:
    from sparktui.domain.bench_profiles import ceiling_percent, depth_chart

    rows = [("depth", "c", "done", "output tok/s", "req/s", "TTFT p50/p95/p99 ms", "ITL p50/p95/p99 ms",
             "% ceiling", "J/token")]
    for lv in record.levels:
        pct = ceiling_percent(lv, record.ceiling)
        rows.append((
            f"{lv.depth:,}", str(lv.concurrency) + ("*" if lv.partial else ""),
            f"{lv.completed}/{lv.requests}",
            _rate(lv.output_tok_s), _rate(lv.requests_s),
            "/".join(_ms(v) for v in (lv.ttft.p50, lv.ttft.p95, lv.ttft.p99)),
            "/".join(_ms(v) for v in (lv.itl.p50, lv.itl.p95, lv.itl.p99)),
            "–" if pct is None else f"{pct:.0f} %", _energy(lv),
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    for lv in record.levels:
        lines += [f"  c={lv.concurrency}: {err}" for err in lv.errors]
    if record.interrupted:
        lines.append("interrupted: the figures cover what finished (* = level cut short)")
    ceiling = record.ceiling
    if ceiling:
        lines.append(f"decode ceiling for one stream: {ceiling.get('tok_s')} tok/s (% ceiling: 1 ÷ the "
                     "median ITL against it; `sparktui plan` shows its inputs)")
    else:
        lines.append("decode ceiling: unknown (the model's config.json could not be read on the head)")
    if len({lv.depth for lv in record.levels}) > 1 or record.profile:
        lines += depth_chart(record)
    if record.fingerprint:
        lines.append(f"fingerprint {record.fingerprint.get('key')}")
    lines += [c.describe(_date(c.earlier_started_at)) for c in comparisons]
    return "\n".join(lines)
