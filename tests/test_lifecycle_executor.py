"""The plan executor on this machine (LocalTransport, plain shell commands): phases, cancellation, a phase
that ends early, the fallback command, one operation at a time, progress snapshots."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence

import pytest

from sparktui.config import SparkConfig, parse_config
from sparktui.domain.events import OperationRefused, OperationView, StepStatus
from sparktui.domain.lifecycle.plan import Phase, Plan, Step
from sparktui.remote.engine import EngineController, _Tracker
from sparktui.remote.transport import (
    CommandNotStarted,
    CommandResult,
    LinkPhase,
    LinkState,
    LocalTransport,
    Transport,
)


def config() -> SparkConfig:
    return parse_config({"nodes": [{"name": "a", "host": "localhost", "local": True, "role": "head"},
                                   {"name": "b", "host": "localhost", "local": True}],
                         "engine": {"runtime": "host", "model": "m"}})


def sh(name: str, node: str, script: str, **kw: object) -> Step:
    return Step(name, node, ("sh", "-c", script), 20.0, **kw)  # type: ignore[arg-type]


async def run_plan(plan: Plan, stop_on_failure: bool = True) -> tuple[OperationView, StepStatus | None]:
    transports = {"a": LocalTransport("a"), "b": LocalTransport("b")}
    for t in transports.values():
        await t.connect()
    controller = EngineController(config(), transports)
    tracker = _Tracker("test", lambda v: None)
    failed = await controller._run_plan(tracker, plan, stop_on_failure=stop_on_failure)
    return tracker.view, failed.status if failed else None


async def test_failure_cancels_the_rest_of_its_phase_and_skips_later_phases() -> None:
    plan = Plan("t", (
        Phase("one", (sh("slow", "a", "sleep 10"), sh("bad", "b", "echo boom >&2; exit 3"))),
        Phase("two", (sh("never", "a", "true"),)),
    ))
    t0 = time.monotonic()
    view, failed = await run_plan(plan)
    assert time.monotonic() - t0 < 5
    steps = {s.name: s for s in view.steps}
    assert failed is StepStatus.FAILED
    assert steps["bad"].status is StepStatus.FAILED and steps["bad"].message == "exit 3: boom"
    assert steps["slow"].status is StepStatus.SKIPPED and "cancelled: bad failed" in steps["slow"].message
    assert steps["never"].status is StepStatus.SKIPPED


async def test_done_when_ends_a_phase_early_and_the_rest_finishes_meanwhile() -> None:
    plan = Plan("t", (
        Phase("one", (sh("lingers", "b", "sleep 1; echo finished"), sh("gate", "a", "true")),
              done_when="gate"),
        Phase("two", (sh("next", "a", "date +%s.%N"),)),
    ))
    view, failed = await run_plan(plan)
    steps = {s.name: s for s in view.steps}
    assert failed is None
    assert steps["next"].status is StepStatus.OK and steps["lingers"].status is StepStatus.OK
    assert steps["lingers"].message == "finished" and (steps["lingers"].seconds or 0) >= 1.0
    assert (steps["next"].seconds or 0) < 1.0


async def test_after_waits_for_a_lingering_step_and_its_failure_ends_the_next_phase() -> None:
    # The start plan's shape: the workers begin on the GCS gate while `ray start --head` lingers;
    # `vllm serve` waits for the head's start itself.
    plan = Plan("t", (
        Phase("head", (sh("head", "a", "sleep 1; echo started"), sh("gcs", "a", "true")), done_when="gcs"),
        Phase("workers", (sh("worker", "b", "true"),)),
        Phase("serve", (sh("serve", "a", "true"),), after=("head",)),
    ))
    view, failed = await run_plan(plan)
    steps = {s.name: s for s in view.steps}
    assert failed is None and all(s.status is StepStatus.OK for s in view.steps)
    assert (steps["worker"].seconds or 0) < 1.0
    # A failing lingering step ends the phase that runs meanwhile at once (not at its own timeout).
    plan = Plan("t", (
        Phase("head", (sh("head", "a", "sleep 0.5; exit 2"), sh("gcs", "a", "true")), done_when="gcs"),
        Phase("wait", (sh("ray wait", "b", "sleep 15"),)),
        Phase("serve", (sh("serve", "a", "true"),), after=("head",)),
    ))
    t0 = time.monotonic()
    view, failed = await run_plan(plan)
    steps = {s.name: s for s in view.steps}
    assert time.monotonic() - t0 < 10
    assert failed is StepStatus.FAILED and steps["head"].status is StepStatus.FAILED
    assert steps["ray wait"].status is StepStatus.SKIPPED and steps["serve"].status is StepStatus.SKIPPED


async def test_a_failure_beside_a_step_waiting_on_a_lingering_one_leaves_that_one_running() -> None:
    # The start plan's shape when a worker's `ray start` fails while the Ray wait waits for the head's
    # `ray start` (still running): cancelling the wait must not cancel the head's step, and the plan ends
    # with the worker's failure, never with a CancelledError (it was a traceback out of `start --wait`).
    plan = Plan("t", (
        Phase("head", (sh("head", "a", "sleep 1; echo started"), sh("gcs", "a", "true")), done_when="gcs"),
        Phase("workers", (sh("ray wait", "a", "true", after_lingering=("head",)),
                          sh("worker", "b", "echo lost >&2; exit 255"))),
    ))
    view, failed = await run_plan(plan)
    steps = {s.name: s for s in view.steps}
    assert failed is StepStatus.FAILED and steps["worker"].status is StepStatus.FAILED
    assert steps["head"].status is StepStatus.OK and steps["head"].message == "started"
    assert steps["ray wait"].status is StepStatus.SKIPPED


class DroppingTransport(LocalTransport):
    """A node whose link drops as the first command is sent (it never began there) and comes back after
    ``back_after`` seconds (``None``: never); commands run locally once it is back."""

    def __init__(self, name: str, back_after: float | None) -> None:
        super().__init__(name)
        self.back_after = back_after
        self.sent = 0

    async def run(self, argv: Sequence[str], *, input: bytes | None = None, timeout: float | None = None,
                  env: Mapping[str, str] | None = None) -> CommandResult:
        self.sent += 1
        if self.sent == 1:
            self._set_state(LinkState(LinkPhase.RETRYING, last_error="connection lost", attempts=1))
            if self.back_after is not None:
                asyncio.get_running_loop().call_later(self.back_after, self._set_state,
                                                      LinkState(LinkPhase.CONNECTED))
            raise CommandNotStarted(f"{self.name}: cannot run {argv[0]}: connection lost")
        return await super().run(argv, input=input, timeout=timeout, env=env)


async def run_with_drop(back_after: float | None) -> tuple[OperationView, StepStatus | None, int]:
    cfg = parse_config({"nodes": [{"name": "a", "host": "localhost", "local": True, "role": "head"},
                                  {"name": "b", "host": "localhost", "local": True}],
                        "engine": {"runtime": "host", "model": "m", "link_grace_s": 2}})
    dropping = DroppingTransport("b", back_after)
    transports: dict[str, Transport] = {"a": LocalTransport("a"), "b": dropping}
    await transports["a"].connect()
    controller = EngineController(cfg, transports)
    tracker = _Tracker("test", lambda v: None)
    plan = Plan("t", (Phase("one", (sh("worker", "b", "echo joined"),)),))
    failed = await controller._run_plan(tracker, plan, stop_on_failure=True)
    return tracker.view, failed.status if failed else None, dropping.sent


async def test_a_link_back_within_the_grace_runs_the_step_that_never_began() -> None:
    view, failed, sent = await run_with_drop(back_after=0.3)
    assert failed is None and sent == 2
    assert view.steps[0].status is StepStatus.OK and view.steps[0].message == "joined"


async def test_a_link_not_back_within_the_grace_fails_the_step_naming_the_node_and_link() -> None:
    t0 = time.monotonic()
    view, failed, sent = await run_with_drop(back_after=None)
    assert failed is StepStatus.FAILED and sent == 1
    assert time.monotonic() - t0 < 10
    msg = view.steps[0].message
    assert msg.startswith("b's SSH link lost during worker and not back within 2 s "
                          "(engine.link_grace_s)"), msg


async def test_fallback_and_ok_if_output_and_tolerated_failure() -> None:
    plan = Plan("t", (Phase("one", (
        Step("retry", "a", ("sh", "-c", "exit 1"), 10.0, fallback=("sh", "-c", "echo second try")),
        Step("gone", "a", ("sh", "-c", "echo 'Error: No such container: x' >&2; exit 1"), 10.0,
             ok_if_output=("No such container",)),
        Step("meh", "b", ("sh", "-c", "exit 1"), 10.0, tolerate_failure=True),
    )),))
    view, failed = await run_plan(plan)
    steps = {s.name: s for s in view.steps}
    assert failed is None
    assert steps["retry"].status is StepStatus.OK and steps["retry"].message == "second try"
    assert steps["gone"].status is StepStatus.OK
    assert steps["meh"].status is StepStatus.WARNING


async def test_one_operation_at_a_time() -> None:
    transports = {"a": LocalTransport("a"), "b": LocalTransport("b")}
    views: list[OperationView] = []
    controller = EngineController(config(), transports, on_progress=views.append)
    async with controller._exclusive("stop"):
        assert controller.busy == "stop"
        with pytest.raises(OperationRefused, match="cannot start: stop is running"):
            await controller.start()
        with pytest.raises(OperationRefused):
            await controller.restart()
    assert controller.busy is None
    await asyncio.sleep(0)
