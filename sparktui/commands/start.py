"""`sparktui start [--wait] [--json] [--dry-run]`: preflight, Ray head + workers, `vllm serve` detached.

Step progress prints as lines while it runs (or one JSON object at the end with ``--json``). The engine
keeps running after this command exits; ``--wait`` follows the head's log until it is ready or failed.
The helpers here are shared by ``stop`` and ``restart``.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from sparktui.commands.common import config_from_args, positive_seconds, print_json, refuse_example, run_async
from sparktui.commands.exit_status import ExitStatus
from sparktui.domain.events import EngineState, OperationRefused, OperationView, StepStatus, StepView

if TYPE_CHECKING:   # the config brings pydantic: loaded when the verb runs, not for its --help
    from sparktui.config import SparkConfig

_MARK = {StepStatus.OK: "ok", StepStatus.FAILED: "FAILED", StepStatus.WARNING: "warn",
         StepStatus.SKIPPED: "skip", StepStatus.RUNNING: "...", StepStatus.PENDING: "-"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_operation_arguments(parser, waits=True)


def add_operation_arguments(parser: argparse.ArgumentParser, *, waits: bool) -> None:
    parser.epilog = ("exit status: 0 done" + (" (with --wait: the engine is ready)" if waits else "")
                     + ", 1 failed, 2 no usable config, 5 another sparktui operation is running (try again)"
                     + (", 6 a person's stop ended the engine before it was ready" if waits else ""))
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the plan (every command on every node) and do nothing")
    if waits:
        parser.add_argument("--wait", action="store_true",
                            help="wait until the engine log says ready (exit 0) or failed (exit 1)")
        parser.add_argument("--timeout", type=positive_seconds, default=3600.0, metavar="SECONDS",
                            help="with --wait: give up after this long (default 3600)")
        parser.add_argument("--no-preflight", action="store_true", help="skip the preflight checks")


def run(args: argparse.Namespace) -> int:
    return run_operation(args, "start")


def run_operation(args: argparse.Namespace, kind: str) -> int:
    config = config_from_args(args)
    if args.dry_run:
        print_plan(config, kind)
        return ExitStatus.OK
    if refuse_example(args, config, kind, "`--dry-run` shows the plan anyway."):
        return ExitStatus.USAGE
    try:
        return run_async(_operate(config, kind, args))
    except OperationRefused as exc:
        print(f"sparktui {kind}: {exc}", file=sys.stderr)
        return ExitStatus.BUSY


def print_plan(config: SparkConfig, kind: str) -> None:
    from sparktui.domain.history import HistoryStore, setup_of
    from sparktui.domain.lifecycle import plan as P
    from sparktui.domain.lifecycle.ready_timeout import engine_ready_timeout

    try:
        runs = HistoryStore().runs_for(*setup_of(config.engine))
        ready_timeout = engine_ready_timeout(runs, config.engine.env)
    except (OSError, ValueError):
        ready_timeout = None

    print("# dry run: nothing is executed; `~` is each node's $HOME, resolved when the plan runs")
    if kind == "restart" and config.engine.restart == "vllm":
        print("# engine.restart = \"vllm\": while every node answers, our containers run and Ray has every"
              " node and GPU:")
        print(P.build_vllm_restart_plan(config, ready_timeout=ready_timeout).render())
        print("# otherwise (the reason is said) the full restart:")
    if kind in ("stop", "restart"):
        print(P.build_stop_plan(config).render())
    if kind in ("start", "restart"):
        # In the order they run: a restart's preflight comes after its stop.
        print("# preflight: on every node at once: reachable, node facts (memory, RDMA, ports, leftovers,"
              " model files), docker + image, vLLM version, the nodes compared (`sparktui audit`); vLLM"
              " flags on the head")
        print(P.build_start_plan(config, ready_timeout=ready_timeout).render())


class ProgressPrinter:
    """Prints a line whenever a step starts or ends (nothing with ``--json``)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.t0 = time.monotonic()
        self._seen: dict[int, StepStatus] = {}

    def __call__(self, view: OperationView) -> None:
        if self.quiet:
            return
        for i, step in enumerate(view.steps):
            if self._seen.get(i) is step.status or step.status is StepStatus.PENDING:
                continue
            if step.status is StepStatus.RUNNING and step.name.startswith("preflight: "):
                continue  # preflight checks are many and quick: print their verdicts only
            self._seen[i] = step.status
            print(self.line(step), flush=True)

    def line(self, step: StepView) -> str:
        done = step.status is not StepStatus.RUNNING
        secs = f" ({step.seconds:.1f} s)" if step.seconds is not None and done else ""
        msg = f": {step.message}" if step.message and done else ""
        return (f"[{time.monotonic() - self.t0:6.1f}s] {_MARK[step.status]:<6} {step.node or '-':<10} "
                f"{step.name}{msg}{secs}")


def _refuse_unreachable(kind: str, down: dict[str, str], as_json: bool) -> int:
    """Start and restart need every node: with one unreachable, nothing is touched and each is said once."""
    message = f"not {kind}ed: every node is needed, and {len(down)} cannot be reached"
    if as_json:
        print_json({"operation": {"kind": kind, "ok": False, "message": message, "steps": []},
                    "vllm_version": None, "unreachable": down})
    else:
        print(f"{kind}: FAILED: {message}:", flush=True)
        for line in down.values():
            print(f"  {line}", flush=True)
    return ExitStatus.NOT_WELL


#: How each outcome of ``--wait`` exits (anything else: failed) and what [notify] hears of it.
_WAIT_STATUS = {"ready": ExitStatus.OK, "stopped": ExitStatus.STOPPED}
_WAIT_STATE = {"ready": EngineState.READY, "stopped": EngineState.STOPPED}


def view_json(view: OperationView | None) -> dict[str, Any] | None:
    if view is None:
        return None
    return {
        "kind": view.kind, "ok": view.ok, "message": view.message,
        "steps": [{"name": s.name, "node": s.node, "status": s.status.value, "seconds": s.seconds,
                   "message": s.message, "output_tail": list(s.output_tail)} for s in view.steps],
    }


async def _operate(config: SparkConfig, kind: str, args: argparse.Namespace) -> int:
    from sparktui.domain.events import EngineChanged
    from sparktui.domain.lifecycle.fixes import fixes_for
    from sparktui.remote.cluster import close_cluster, open_cluster
    from sparktui.remote.engine import EngineController
    from sparktui.remote.notifier import Notifier

    printer = ProgressPrinter(quiet=args.json)
    # [notify] hears the same engine events the dashboard would post for this operation.
    notify = Notifier(config.notify, config.cluster.name)
    notify(EngineChanged(EngineState.STOPPING if kind == "stop" else EngineState.STARTING))
    transports = await open_cluster(config)
    try:
        # Each node's first attempt has its outcome: a node never reached is known now, not after waits.
        down = {name: t.unreachable_message() for name, t in transports.items() if t.unreachable_now()}
        if down and kind in ("start", "restart"):
            return _refuse_unreachable(kind, down, args.json)
        controller = EngineController(config, transports, on_progress=printer, origin=f"`sparktui {kind}`")
        preflight = not getattr(args, "no_preflight", False)
        if kind == "start":
            view = await controller.start(preflight=preflight)
        elif kind == "restart":
            view = await controller.restart(preflight=preflight)
        else:
            view = await controller.stop()
        fixes = fixes_for(view.steps)
        report: dict[str, Any] = {"operation": view_json(view), "vllm_version": controller.vllm_version,
                                  "unreachable": down,
                                  "fixes": [{"command": f.command, "nodes": list(f.nodes)} for f in fixes]}
        code = ExitStatus.of(bool(view.ok))
        if kind == "stop" or not view.ok:
            notify(EngineChanged(EngineState.STOPPED if view.ok else EngineState.FAILED, view.message))
        if not args.json:
            if down and not view.ok:
                # Stop did what it could; say once which nodes it could not reach.
                reached = [n.name for n in config.nodes if n.name not in down]
                print(f"{kind}: FAILED: stopped what could be reached ({', '.join(reached) or 'nothing'}); "
                      f"not reached, so nothing there was stopped:", flush=True)
                for line in down.values():
                    print(f"  {line}", flush=True)
            else:
                print(f"{kind}: {'done' if view.ok else 'FAILED'}: {view.message}", flush=True)
                for fix in fixes:   # a failed check that a command repairs: name it
                    print(f"  fix: {fix.describe()}", flush=True)
        if view.ok and getattr(args, "wait", False):
            from sparktui.remote.memory_watch import wait_guarded

            def stage(label: str) -> None:
                if not args.json:
                    print(f"[{time.monotonic() - printer.t0:6.1f}s] stage  {label}", flush=True)

            result, trip = await wait_guarded(controller, timeout=args.timeout, on_stage=stage)
            report["wait"] = result.to_json()
            if trip is not None:
                report["memory_guard"] = trip.to_json()
            if not args.json:
                print(f"engine: {result.outcome}: {result.detail} ({result.seconds:.1f} s)", flush=True)
                if result.slow:   # why it took that long, and what to change (domain.perf.start_explain)
                    print(f"engine: {result.slow}", flush=True)
            code = _WAIT_STATUS.get(result.outcome, ExitStatus.NOT_WELL)
            notify(EngineChanged(_WAIT_STATE.get(result.outcome, EngineState.FAILED), result.detail))
        if args.json:
            print_json(report)
        return code
    finally:
        await notify.drain()
        await close_cluster(transports)
