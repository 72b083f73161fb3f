"""Runs a lifecycle ``Plan`` (``domain.lifecycle.plan``) over the nodes: phases in order, the steps of a
phase concurrently, each step judged by its kind; every change published as an ``OperationView``."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from sparktui.domain.events import OperationView, StepStatus, StepView
from sparktui.domain.json_report import last_json_object
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle import preflight as F
from sparktui.domain.lifecycle.output import TAIL_LINES, output_tail
from sparktui.remote.engine_nodes import EngineNodes, Outcome, failure_text
from sparktui.remote.ray_queries import RayQueries
from sparktui.remote.transport import CommandNotStarted, CommandResult, TransportError


class Tracker:
    """The operation's step list; every change is published as a fresh ``OperationView``."""

    def __init__(self, kind: str, publish: Callable[[OperationView], None]) -> None:
        self.view = OperationView(kind=kind)
        self._publish = publish
        self._publish(self.view)

    def add(self, step: StepView) -> int:
        self.view = replace(self.view, steps=(*self.view.steps, step))
        self._publish(self.view)
        return len(self.view.steps) - 1

    def update(self, index: int, **changes: Any) -> None:
        steps = list(self.view.steps)
        steps[index] = replace(steps[index], **changes)
        self.view = replace(self.view, steps=tuple(steps))
        self._publish(self.view)

    def finish(self, ok: bool, message: str) -> OperationView:
        self.view = replace(self.view, running=False, ok=ok, message=message)
        self._publish(self.view)
        return self.view


_StepTask = asyncio.Task[StepView | None]

#: Seconds a step whose link broke lets the link's state catch up before waiting on it.
LINK_SETTLE = 0.5

#: Runs one step of a kind the runner does not know itself; ``live`` shows a message meanwhile.
Executor = Callable[[P.Step, Callable[[str], None]], Awaitable[Outcome]]


class PlanRunner:
    """Executes plans over ``nodes``; ``marks`` gets the wall-clock moments benchmarks read."""

    def __init__(self, nodes: EngineNodes, ray: RayQueries) -> None:
        self.nodes = nodes
        self.ray = ray
        #: Wall-clock marks of the last start (benchmarks): "ray_ready_seen", "serve_launch", …
        self.marks: dict[str, float] = {}
        #: How the kinds beyond the runner's own are run (preflight's gathering steps).
        self.executors: dict[P.StepKind, Executor] = {}

    async def run_plan(self, tracker: Tracker, plan: P.Plan, *, stop_on_failure: bool,
                       on_done: Callable[[StepView], None] | None = None) -> StepView | None:
        """Run the phases in order (steps of a phase concurrently, each after the steps it names); the
        first failed step, if any. ``on_done`` gets each shown step's final view (its name unprefixed)."""
        indices: dict[int, int] = {}
        if not plan.list_when_run:
            indices = {id(s): tracker.add(StepView(name=plan.row_prefix + s.name, node=s.node))
                       for s in plan.steps if s.shown}
        first_failure: StepView | None = None
        lingering: dict[asyncio.Task[StepView | None], P.Step] = {}
        for phase in plan.phases:
            # Steps a ``done_when`` left running that this phase waits for (`vllm serve` waits for
            # `ray start --head` to return; the workers did not).
            needed = [t for t, ls in lingering.items() if ls.name in phase.after]
            for view in await _ended(needed):
                if view is not None and view.status is StepStatus.FAILED and first_failure is None:
                    first_failure = view
            if first_failure is not None and stop_on_failure:
                break
            tasks: dict[asyncio.Task[StepView | None], P.Step] = {}
            by_name: dict[tuple[str | None, str], asyncio.Task[StepView | None]] = {}
            for s in phase.steps:
                after = [by_name[(s.node, n)] for n in s.after]
                after += [t for t, ls in lingering.items() if ls.name in s.after_lingering]
                gates = [by_name[(s.node, n)] for n in s.gated_by]
                task = asyncio.create_task(self._run_step(tracker, plan, indices, s, after, gates, on_done))
                by_name[(s.node, s.name)] = task
                tasks[task] = s
            pending = set(tasks)
            while pending:
                # Steps left running by an earlier phase are watched too: a failed `ray start --head`
                # ends the workers' phase at once instead of after the Ray wait's timeout.
                watch = pending | {t for t in lingering if not t.done()}
                done, _ = await asyncio.wait(watch, return_when=asyncio.FIRST_COMPLETED)
                pending -= done
                finished_early = False
                for task in done:
                    view = task.result()
                    if view is None:
                        continue
                    if view.status is StepStatus.FAILED and first_failure is None:
                        first_failure = view
                    elif view.status is StepStatus.OK and task in tasks \
                            and tasks[task].name == phase.done_when:
                        finished_early = True
                if first_failure is not None and stop_on_failure and pending:
                    # The rest of the phase is moot (a Ray wait whose worker failed to start).
                    await _cancel(tracker, pending, tasks, indices, first_failure)
                    pending = set()
                elif finished_early and first_failure is None:
                    lingering.update({t: tasks[t] for t in pending})
                    pending = set()
            if first_failure is not None and stop_on_failure:
                break
        if lingering:
            for view in await _ended(list(lingering)):
                if view is not None and view.status is StepStatus.FAILED and first_failure is None:
                    first_failure = view
        if first_failure is not None and stop_on_failure:
            for idx in indices.values():
                if tracker.view.steps[idx].status is StepStatus.PENDING:
                    tracker.update(idx, status=StepStatus.SKIPPED, message="not run: an earlier step failed")
        return first_failure

    async def _run_step(self, tracker: Tracker, plan: P.Plan, indices: dict[int, int], step: P.Step,
                        after: list[_StepTask], gates: list[_StepTask],
                        on_done: Callable[[StepView], None] | None) -> StepView | None:
        """One step once the steps it waits for ended: its view (``None`` when it did not run, as a step
        ``after`` one that failed). A row-less step's view is returned, never published."""
        t0 = time.monotonic()
        for dep in after:
            # Shielded: cancelling this step (its phase failed) must not cancel the step it waits for —
            # that one may be left running by an earlier phase (`ray start (head)`), awaited at the end.
            ended = await asyncio.shield(dep)
            if ended is None or ended.status is not StepStatus.OK:
                return None
        self.marks[f"begin:{step.name}:{step.node}"] = time.time()
        outcome: Outcome | None = None
        for gate in gates:
            ended = await asyncio.shield(gate)
            if ended is None or ended.status is not StepStatus.OK:
                outcome = Outcome(StepStatus.SKIPPED, step.gate_message)
        idx = indices.get(id(step))
        if step.shown and idx is None:
            idx = indices[id(step)] = tracker.add(StepView(name=plan.row_prefix + step.name, node=step.node))
        if outcome is None:
            if idx is not None:
                tracker.update(idx, status=StepStatus.RUNNING)
            live = (lambda msg: tracker.update(idx, message=msg)) if idx is not None else (lambda msg: None)
            try:
                outcome = await self._execute(step, live)
            except TransportError as exc:
                outcome = await self._link_lost(step, exc, live)
            if outcome.status is StepStatus.FAILED and step.tolerate_failure:
                outcome.status = StepStatus.WARNING
            self.marks[f"done:{step.name}:{step.node}"] = time.time()
        seconds = round(time.monotonic() - t0, 3)
        view = StepView(step.name, step.node, outcome.status, seconds, outcome.message, outcome.tail)
        if idx is None:
            return view
        tracker.update(idx, status=outcome.status, message=outcome.message, output_tail=outcome.tail,
                       seconds=seconds)
        if on_done is not None:
            on_done(view)
        return tracker.view.steps[idx]

    async def _link_lost(self, step: P.Step, exc: TransportError, live: Callable[[str], None]) -> Outcome:
        """A step whose node's link broke: wait up to ``engine.link_grace_s`` for it to come back (a brief
        cable or switch hiccup). A command that never began runs then; one whose channel broke while it
        ran is not failed by the drop when a later step judges its effect (``judged_later``: a worker's
        `ray start`, judged by Ray's node list). Otherwise, or when the link is not back in time, the
        step fails naming the node, its link and why."""
        assert step.node is not None
        grace = self.nodes.config.engine.link_grace_s
        transport = self.nodes.transports[step.node]
        deadline = time.monotonic() + grace
        while True:
            # An error seen before the link's own state says so (keepalives lag): let it catch up rather
            # than spin on a connection that is about to be declared lost.
            await asyncio.sleep(LINK_SETTLE)
            t0 = time.monotonic()
            live(f"SSH link lost ({exc}); waiting up to {deadline - t0:.0f} s for it to come back")
            try:
                await transport.wait_connected(max(0.0, deadline - t0))
            except TransportError as still:
                return Outcome(StepStatus.FAILED, f"{step.node}'s SSH link lost during {step.name} and not "
                                                  f"back within {grace:.0f} s (engine.link_grace_s): {still}")
            back = time.monotonic() - t0
            if isinstance(exc, CommandNotStarted):
                try:
                    return await self._execute(step, live)
                except TransportError as again:
                    exc = again
                    continue
            if step.judged_later:
                return Outcome(StepStatus.WARNING, f"SSH link dropped and came back after {back:.0f} s; "
                                                   f"{step.judged_later} judges whether it took effect")
            return Outcome(StepStatus.FAILED, f"{step.node}'s SSH link dropped during {step.name} (back "
                                              f"after {back:.0f} s, the step's outcome lost): {exc}")

    async def _execute(self, step: P.Step, live: Callable[[str], None]) -> Outcome:
        assert step.node is not None
        executor = self.executors.get(step.kind)
        if executor is not None:
            return await executor(step, live)
        if step.kind is P.StepKind.WAIT_RAY:
            outcome = await self.ray.wait_ready(step, live)
            if outcome.status is StepStatus.OK:
                self.marks["ray_ready_seen"] = time.time()
            return outcome
        if step.kind is P.StepKind.DETACH:
            self.marks["serve_launch"] = time.time()
        res = await self.nodes.run(step.node, step.argv, step.timeout)
        if step.kind is P.StepKind.DETACH:
            m = re.search(r"^pid (\d+)$", res.stdout, re.M)
            if res.ok and m:
                return Outcome(StepStatus.OK, f"vLLM started detached, pid {m.group(1)}",
                               output_tail(res.stdout, res.stderr))
            return Outcome(StepStatus.FAILED, failure_text(res), output_tail(res.stdout, res.stderr))
        if step.kind in (P.StepKind.STOP_TAGGED, P.StepKind.VERIFY):
            return await self._judge_tagged(step, res)
        ok = _step_ok(step, res)
        if not ok and step.fallback:
            live("retrying: " + " ".join(step.fallback[-2:]))
            res = await self.nodes.run(step.node, step.fallback, step.timeout)
            ok = _step_ok(step, res)
        tail = output_tail(res.stdout, res.stderr)
        if ok:
            if step.success_marker and step.success_marker in res.stdout + res.stderr:
                return Outcome(StepStatus.OK, step.success_marker, tail)
            return Outcome(StepStatus.OK, tail[-1] if tail else "done", tail)
        return Outcome(StepStatus.FAILED, failure_text(res), tail)

    async def _judge_tagged(self, step: P.Step, res: CommandResult) -> Outcome:
        assert step.node is not None
        if not res.ok:
            return Outcome(StepStatus.FAILED, failure_text(res), output_tail(res.stdout, res.stderr))
        data = last_json_object(res.stdout) or {}
        procs = data.get("processes", [])
        containers: list[F.DockerContainer] = []
        for extra in step.also:
            more = await self.nodes.run(step.node, extra, step.timeout)
            if more.ok:
                containers += F.parse_docker_ps(more.stdout, self.nodes.config.engine.name_prefix)
            elif "command not found" not in more.stderr:
                return Outcome(StepStatus.FAILED, failure_text(more))
        remains = F.leftover_lines(step.node, procs, containers)
        if remains:
            return Outcome(StepStatus.FAILED, f"{len(remains)} remain: " + "; ".join(remains[:5]),
                           tuple(remains[-TAIL_LINES:]))
        sent = data.get("signalled", [])
        if step.kind is P.StepKind.STOP_TAGGED:
            kills = sum(1 for _, sig in sent if sig == "SIGKILL")
            msg = (f"stopped {len({p for p, _ in sent})} process(es)" + (f" ({kills} needed SIGKILL)"
                                                                          if kills else "")
                   if sent else "nothing of ours was running")
            return Outcome(StepStatus.OK, msg)
        return Outcome(StepStatus.OK, "no process or container of ours")


async def _cancel(tracker: Tracker, pending: set[asyncio.Task[StepView | None]],
                  tasks: Mapping[asyncio.Task[StepView | None], P.Step], indices: Mapping[int, int],
                  failure: StepView) -> None:
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    for task in pending:
        idx = indices.get(id(tasks[task]))
        if idx is not None:
            tracker.update(idx, status=StepStatus.SKIPPED, message=f"cancelled: {failure.name} failed")


async def _ended(tasks: list[asyncio.Task[StepView | None]]) -> list[StepView | None]:
    """The views of steps left running, awaited at the end; one cancelled by the caller counts as not run
    (never a ``CancelledError`` out of the plan)."""
    results = await asyncio.gather(*tasks, return_exceptions=True)
    out: list[StepView | None] = []
    for result in results:
        if isinstance(result, asyncio.CancelledError):
            out.append(None)
        elif isinstance(result, BaseException):
            raise result
        else:
            out.append(result)
    return out


def _step_ok(step: P.Step, res: CommandResult) -> bool:
    return res.returncode in step.ok_codes or any(s in res.stdout + res.stderr for s in step.ok_if_output)
