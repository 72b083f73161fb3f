"""`sparktui history [--json]`: earlier engine runs — how each start went (its stage durations, the time
from the engine's start on the head to ready) and, for a run that reached ready, how it ended (crashed,
wedged, lost a node, stopped, restarted: after how long, and why) and its vLLM log kept on the head
(``sparktui logs --run FILE``).

Reads the run history file (``$XDG_STATE_HOME/sparktui/runs.jsonl``); needs no config and no node.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from sparktui.commands.common import print_json
from sparktui.commands.exit_status import ExitStatus
from sparktui.domain.history import STAGE_ORDER, HistoryStore, RunRecord, format_duration, runs_as_dicts


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--model", metavar="NAME", help="only runs whose model contains NAME")
    parser.add_argument("--limit", type=int, default=0, metavar="N", help="only the newest N runs")
    parser.add_argument("--file", metavar="PATH", help="history file (default: "
                        "$XDG_STATE_HOME/sparktui/runs.jsonl, ~/.local/state/sparktui/runs.jsonl)")


def _short_model(model: str) -> str:
    return model.rstrip("/").rsplit("/", 1)[-1] or model


def _stages_text(run: RunRecord) -> str:
    order = [s for s in STAGE_ORDER if s in run.stages] + [s for s in run.stages if s not in STAGE_ORDER]
    return " ".join(f"{s} {format_duration(run.stages[s])}" for s in order)


def render(runs: list[RunRecord]) -> str:
    rows = [("started", "model", "image", "outcome", "ready in", "stages")]
    for r in runs:
        failure = r.failure if not r.failure or len(r.failure) <= 48 else r.failure[:47] + "…"
        outcome = r.outcome
        if r.end is not None:
            # A run that reached ready, then ended: how, and after how long from its start.
            up = f" after {format_duration(r.up_seconds)}" if r.up_seconds is not None else ""
            outcome = f"{r.outcome}, {r.end}{up}"
            failure = failure.removeprefix(f"{r.end}: ") if failure else failure
        if failure:
            outcome = f"{outcome} ({failure})"
        rows.append((
            time.strftime("%Y-%m-%d %H:%M", time.localtime(r.started_at)),
            _short_model(r.model),
            r.image,
            outcome,
            format_duration(r.ready_seconds) if r.ready_seconds is not None else "–",
            _stages_text(r),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
        for row in rows
    )


def run(args: argparse.Namespace) -> int:
    store = HistoryStore(Path(args.file).expanduser() if args.file else None)
    runs = store.load()
    if args.model:
        runs = [r for r in runs if args.model in r.model]
    if args.limit > 0:
        runs = runs[-args.limit:]
    if args.json:
        print_json(runs_as_dicts(runs))
        return ExitStatus.OK
    if not runs:
        print(f"no runs recorded yet ({store.path})")
        return ExitStatus.OK
    print(render(runs))
    return ExitStatus.OK
