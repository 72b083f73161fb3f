"""Engine truth after ready, end to end on the test bed (real SSH, real Ray, the stand-in engine).

A node lost after ready (its link cut; its raylet killed) makes the dashboard's backend and
``sparktui status --json`` leave *ready* and name the node — a killed raylet within 10 s, before Ray's
health check; a wedged engine (``/health`` 200, requests stuck, no tokens) becomes *wedged*, for
``status`` too (exit 4); a stopped engine whose last log reached ready stays *stopped*; a worker lost
while serving is a failure *after ready*, not a start-up stage; another sparktui's restart brings a
dashboard left on a stale verdict back to what runs now.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sparktui.domain.events import EngineChanged, EngineState
from sparktui.domain.history import HistoryStore
from sparktui.domain.lifecycle import scripts as S
from sparktui.remote.api_client import EngineApi, EngineApiError
from sparktui.remote.backend import SshBackend
from sparktui.remote.cluster import close_cluster, open_cluster
from sparktui.remote.engine import EngineController
from sparktui.remote.engine_wait import wait_until_ready
from tests.cli_helpers import run_sparktui
from tests.lifecycle_helpers import lifecycle_overrides, make_model_dirs
from tests.test_backend_testbed import Recorder
from tests.testbed import Testbed

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

#: How fast a lost node must show (issue 10): the state leaves ready within this many seconds.
LOST_WITHIN = 10.0


@pytest.fixture
def bed(make_testbed: Callable[..., Testbed]) -> Testbed:
    bed = make_testbed()
    make_model_dirs(bed)
    return bed


def overrides(bed: Testbed, serving: dict[str, Any] | None = None, pace: float = 3.0,
              **engine: Any) -> dict[str, Any]:
    out = lifecycle_overrides(bed, pace=pace, **engine)
    out["serving"] = serving or {}
    return out


async def ready_backend(bed: Testbed, tmp_path: Path, **kwargs: Any) -> tuple[SshBackend, Recorder,
                                                                              asyncio.Task[None], Path]:
    path = bed.write_config(tmp_path / "config.toml", **overrides(bed, **kwargs))
    config = bed.spark_config(**overrides(bed, **kwargs))
    events = Recorder()
    backend = SshBackend(config, history=HistoryStore(tmp_path / "runs.jsonl"))
    runner = asyncio.create_task(backend.run(events))
    await events.wait_for(lambda: EngineState.STOPPED in events.engine_states(), 60, "discovery: stopped")
    await backend.start()
    await events.wait_for(lambda: EngineState.READY in events.engine_states(), 120, "ready")
    return backend, events, runner, path


async def status_json(path: Path) -> tuple[int, dict[str, Any]]:
    res = await asyncio.to_thread(run_sparktui, "status", "--json", "--timeout", "15", "--config", str(path),
                                  timeout=120)
    return res.returncode, json.loads(res.stdout)


def kill_ours(bed: Testbed, name: str) -> None:
    """Every process of ours on ``name`` (its raylet and friends), from outside."""
    python = bed.config_dict()["nodes"][1]["python"]
    bed.exec(name, [python, "-c", S.TAGGED_PY, "stop", f"sparktui/{name}", "0.2"])


def raylets(bed: Testbed, name: str) -> set[int]:
    """The PIDs of the host's raylet processes (their program is ``…/raylet``)."""
    out = bed.exec(name, ["ps", "-ww", "-eo", "pid=,args="]).stdout
    return {int(words[0]) for line in out.splitlines()
            if len(words := line.split()) > 1 and words[1].rsplit("/", 1)[-1] == "raylet"}


async def left_ready(events: Recorder, since: float) -> EngineChanged:
    def gone() -> bool:
        return events.engine_states()[-1] is not EngineState.READY
    await events.wait_for(gone, 60, "the state to leave ready")
    took = time.monotonic() - since
    change = events.of(EngineChanged)[-1]
    print(f"the dashboard left ready after {took:.1f} s: {change.detail[:100]}")
    assert took <= LOST_WITHIN, f"left ready after {took:.1f} s: {change.detail}"
    return change


async def stop(backend: SshBackend, runner: asyncio.Task[None]) -> None:
    try:
        await backend.stop()
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)


async def test_link_cut_after_ready_is_degraded_and_named(bed: Testbed, tmp_path: Path) -> None:
    backend, events, runner, path = await ready_backend(bed, tmp_path)
    try:
        bed.link_down("spark2")
        cut = time.monotonic()
        change = await left_ready(events, cut)
        assert change.state is EngineState.DEGRADED, change.detail
        assert change.detail.startswith(f"degraded: Ray lost spark2 ({bed.ip('spark2')}) at "), change.detail
        assert "a TP 2 engine cannot serve" in change.detail
        code, report = await status_json(path)
        assert report["engine"]["state"] == "degraded", report["engine"]
        assert "spark2" in report["engine"]["detail"]
        assert code == 1          # spark2 does not answer either
    finally:
        bed.link_up("spark2")
        await stop(backend, runner)


async def test_raylet_killed_after_ready_is_degraded_then_a_request_fails_it_after_ready(
    bed: Testbed, tmp_path: Path,
) -> None:
    backend, events, runner, path = await ready_backend(bed, tmp_path)
    try:
        kill_ours(bed, "spark2")
        killed = time.monotonic()
        change = await left_ready(events, killed)
        assert change.state is EngineState.DEGRADED, change.detail
        assert f"Ray lost spark2 ({bed.ip('spark2')})" in change.detail
        code, report = await status_json(path)
        assert report["engine"]["state"] == "degraded" and "spark2" in report["engine"]["detail"]
        assert code == 4

        # A request finds the worker gone: the engine dies, and that is a failure after ready.
        config = backend.config
        api = await EngineApi.connect(backend.transports["spark1"], "127.0.0.1", config.engine.api_port)
        async with api:
            with pytest.raises(EngineApiError):
                await api.complete_tiny(config.engine.served_model_name or config.engine.model)
        await events.wait_for(lambda: events.engine_states()[-1] is EngineState.FAILED, 60, "failed")
        failed = events.of(EngineChanged)[-1]
        assert failed.detail.startswith("crashed after"), failed.detail
        assert "engine init" not in failed.detail and " during " not in failed.detail, failed.detail
        failure = failed.timeline.failure if failed.timeline is not None else None
        if failure is not None:
            assert failure.stage == "serving", failure
            assert "after ready" in failed.detail, failed.detail
    finally:
        await stop(backend, runner)


async def test_wedged_engine_is_wedged_within_wedge_seconds(bed: Testbed, tmp_path: Path) -> None:
    wedge_after, wedge_seconds = 2.0, 6.0
    backend, events, runner, _ = await ready_backend(
        bed, tmp_path, serving={"wedge_seconds": wedge_seconds},
        env={"SPARKTUI_STANDIN_FAIL": f"wedge_after_ready:{wedge_after:g}"})
    ready_at = time.monotonic()
    try:
        await events.wait_for(lambda: events.engine_states()[-1] is EngineState.WEDGED,
                              wedge_after + wedge_seconds + 60, "wedged")
        took = time.monotonic() - ready_at
        wedged = events.of(EngineChanged)[-1]
        assert took <= wedge_after + wedge_seconds + 5, f"wedged after {took:.1f} s"
        assert "generation_tokens_total stuck at" in wedged.detail, wedged.detail
        assert "auto-restart is off" in wedged.detail
    finally:
        await stop(backend, runner)


async def test_attach_to_a_stopped_engine_whose_log_reached_ready_stays_stopped(
    bed: Testbed, tmp_path: Path,
) -> None:
    # A short wedge window, so the watch below spans it four times over, and the 15 s of failed health
    # checks once (every after-ready rule has had its chance to misfire on the stopped engine) without
    # waiting out the 60 s default.
    wedge_seconds = 5.0
    config = bed.spark_config(**overrides(bed, serving={"wedge_seconds": wedge_seconds}))
    transports = await open_cluster(config)
    try:
        controller = EngineController(config, transports)
        view = await controller.start()
        assert view.ok, view.message
        result = await wait_until_ready(controller, timeout=120)
        assert result.outcome == "ready", result.detail
        assert (await controller.stop()).ok
    finally:
        await close_cluster(transports)

    events = Recorder()
    backend = SshBackend(config, history=HistoryStore(tmp_path / "runs.jsonl"))
    runner = asyncio.create_task(backend.run(events))
    try:
        await events.wait_for(lambda: EngineState.STOPPED in events.engine_states(), 60, "discovery: stopped")
        await asyncio.sleep(4 * wedge_seconds)
        states = events.engine_states()
        assert states[states.index(EngineState.STOPPED):] == [EngineState.STOPPED] * (
            len(states) - states.index(EngineState.STOPPED)), [(e.state, e.detail) for e in events.of(
                EngineChanged)]
        last = events.of(EngineChanged)[-1]
        # The log was read, and it had reached ready: vLLM's shutdown after serving reads "stopped".
        assert last.timeline is not None and last.timeline.outcome in ("ready", "stopped")
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)


async def test_link_cut_during_start_names_the_node(bed: Testbed) -> None:
    """A cut cable during start: vLLM's collective times out ("workers did not answer within 30 seconds")
    before Ray declares the node dead; the diagnosis names the node the evidence points at."""
    config = bed.spark_config(**overrides(bed, pace=20.0))
    transports = await open_cluster(config)
    try:
        controller = EngineController(config, transports)
        view = await controller.start()
        assert view.ok, view.message
        bed.link_down("spark2")
        try:
            result = await wait_until_ready(controller, timeout=150)
        finally:
            bed.link_up("spark2")
        assert result.outcome == "failed", result.detail
        assert "spark2" in result.detail and bed.ip("spark2") in result.detail, result.detail
    finally:
        await controller.stop()
        await close_cluster(transports)


async def ready_engine(bed: Testbed, tmp_path: Path, **kwargs: Any) -> Path:
    """A ready engine with no dashboard; its config's path."""
    path = bed.write_config(tmp_path / "config.toml", **overrides(bed, **kwargs))
    config = bed.spark_config(**overrides(bed, **kwargs))
    transports = await open_cluster(config)
    try:
        controller = EngineController(config, transports)
        view = await controller.start()
        assert view.ok, view.message
        result = await wait_until_ready(controller, timeout=120)
        assert result.outcome == "ready", result.detail
    finally:
        await close_cluster(transports)
    return path


async def stop_engine(path: Path) -> None:
    await asyncio.to_thread(run_sparktui, "stop", "--config", str(path), timeout=120)


async def test_status_says_wedged_with_exit_4(bed: Testbed, tmp_path: Path) -> None:
    path = await ready_engine(bed, tmp_path, env={"SPARKTUI_STANDIN_FAIL": "wedge_after_ready:1"})
    try:
        deadline = time.monotonic() + 60
        while True:      # the stand-in wedges a second after ready: status says so from then on
            t0 = time.monotonic()
            code, report = await status_json(path)
            took = time.monotonic() - t0
            if report["engine"].get("state") != "ready" or time.monotonic() > deadline:
                break
        engine = report["engine"]
        print(f"status said wedged in {took:.1f} s")
        assert engine["state"] == "wedged", engine
        assert "generation_tokens_total stuck at" in engine["detail"], engine["detail"]
        assert code == 4
        res = await asyncio.to_thread(run_sparktui, "status", "--config", str(path), timeout=120)
        assert res.returncode == 4, res.stdout
        assert "engine: wedged — wedged: 1 request(s) running" in res.stdout, res.stdout
    finally:
        await stop_engine(path)


async def test_status_sees_a_killed_raylet_within_10_s(bed: Testbed, tmp_path: Path) -> None:
    path = await ready_engine(bed, tmp_path)
    try:
        code, report = await status_json(path)
        assert report["engine"]["state"] == "ready" and code == 0, report["engine"]
        pids = raylets(bed, "spark2")
        assert pids
        bed.exec("spark2", ["kill", "-KILL", *map(str, pids)])
        killed = time.monotonic()
        while True:
            code, report = await status_json(path)
            took = time.monotonic() - killed
            if report["engine"].get("state") != "ready" or took > 30:
                break
        engine = report["engine"]
        print(f"status left ready {took:.1f} s after spark2's raylet was killed: {engine['detail'][:120]}")
        assert engine["state"] == "degraded", engine
        assert f"Ray lost spark2 ({bed.ip('spark2')})" in engine["detail"], engine["detail"]
        assert code == 4
        assert took <= LOST_WITHIN, f"status left ready after {took:.1f} s"
    finally:
        await stop_engine(path)


async def test_another_sparktuis_restart_clears_a_dashboards_stale_verdict(
    bed: Testbed, tmp_path: Path,
) -> None:
    backend, events, runner, path = await ready_backend(bed, tmp_path)
    try:
        bed.exec("spark2", ["kill", "-KILL", *map(str, raylets(bed, "spark2"))])
        change = await left_ready(events, time.monotonic())
        assert change.state is EngineState.DEGRADED, change.detail
        seen = len(events.of(EngineChanged))
        res = await asyncio.to_thread(run_sparktui, "restart", "--wait", "--config", str(path), timeout=240)
        assert res.returncode == 0, res.stdout + res.stderr
        # Followed as it ran: the other's operation (seen at the lock's next poll, LOCK_POLL_INTERVAL).
        during = [(e.state, e.detail) for e in events.of(EngineChanged)[seen:]]
        assert any("held by another sparktui" in detail for _, detail in during), during
        back = time.monotonic()
        await events.wait_for(lambda: events.engine_states()[-1] is EngineState.READY, 30, "ready again")
        took = time.monotonic() - back
        print(f"the dashboard followed the other restart {took:.1f} s after it returned")
        assert took <= LOST_WITHIN, f"ready again {took:.1f} s after the other restart"
    finally:
        await stop(backend, runner)
