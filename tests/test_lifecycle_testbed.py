"""The engine lifecycle on the test bed: two SSH hosts, runtime host, real Ray, the stand-in engine.

Covered: start → ready; stop leaves nothing on either host (checked from outside, not only by sparktui);
restart three times → ready each time; the worker's Ray killed during start → the diagnosis names that
node; a new controller (the dashboard killed and run again) re-attaches and sees the right stage; the
head's SSH sessions dropped during weight loading → the log follower resumes with no line lost or
doubled; one operation at a time; preflight catches an unknown vLLM flag and leftovers, clean removes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
from typing import Any

import pytest

from sparktui.domain.events import EngineState, OperationRefused, OperationView, StepStatus
from sparktui.domain.lifecycle import scripts as S
from sparktui.domain.stage_names import STAGE_INDEX
from sparktui.remote.engine import EngineController
from sparktui.remote.engine_status import engine_status
from sparktui.remote.engine_wait import wait_until_ready
from sparktui.remote.log_follower import LogFollower
from tests.harness import Harness, open_harness
from tests.harness import explain as _explain
from tests.harness import start_ready as shared_start_ready
from tests.lifecycle_helpers import host_path, lifecycle_config
from tests.testbed import Testbed
from tests.waiting import wait_until

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

SEQ = re.compile(rb"\[seq=(\d+)\]")


def leftovers(bed: Testbed, name: str) -> list[str]:
    """Ray / vLLM / stand-in processes on a host, seen from outside sparktui (its own PID namespace)."""
    out = bed.exec(name, ["ps", "-ww", "-eo", "pid=,args="]).stdout
    return [line.strip() for line in out.splitlines()
            if re.search(r"raylet|gcs_server|ray::|vllm_standin|ray/_private|ray/dashboard|"
                         r"ray/autoscaler|ray\.util\.client", line)]


def harness(bed: Testbed, **kwargs: Any) -> contextlib.AbstractAsyncContextManager[Harness]:
    return open_harness(bed, lifecycle_config(bed, **kwargs))


async def start_ready(h: Harness, controller: EngineController | None = None) -> None:
    await shared_start_ready(h, controller, timeout=120)



async def test_start_ready_then_stop_leaves_nothing(testbed: Testbed) -> None:
    async with harness(testbed) as h:
        await start_ready(h)
        found = await h.new_controller().discover()
        assert found.running and found.state is EngineState.STARTING
        assert found.ray_readiness is not None and found.ray_readiness.ready
        status = await engine_status(h.config, h.transports)
        assert status["state"] == "ready" and status["timeline"]["outcome"] == "ready"
        assert leftovers(testbed, "spark1") and leftovers(testbed, "spark2")

        stop = await h.controller.stop()
        assert stop.ok, _explain(stop)
        for name in ("spark1", "spark2"):
            assert leftovers(testbed, name) == [], name
        assert not host_path(testbed, "spark1", "/tmp/sparktui/vllm.pid").exists()
        # Idempotent: stopping again succeeds and says nothing was running.
        again = await h.controller.stop()
        assert again.ok
        assert {s.message for s in again.steps if s.name == "stop Ray"} == {"nothing of ours was running"}
        assert (await h.controller.discover()).state is EngineState.STOPPED


async def test_restart_twice_ready_each_time(testbed: Testbed) -> None:
    kept = host_path(testbed, "spark1", "/tmp/sparktui")
    async with harness(testbed) as h:
        await start_ready(h)
        # The bed's state dir outlives one test: earlier tests' runs may have left kept logs of their own.
        before = set(kept.glob("vllm-*.log"))
        for _ in range(2):
            view = await h.controller.restart(preflight=False)
            assert view.ok, _explain(view)
            assert [s for s in view.steps if s.name == "nothing left" and s.status is StepStatus.OK]
            result = await wait_until_ready(h.controller, timeout=120)
            assert result.outcome == "ready", result.detail
        # The previous runs' logs are kept beside the new one (engine.keep_logs), each named after its start.
        assert len(set(kept.glob("vllm-*.log")) - before) == 2


async def test_worker_ray_killed_during_start_is_named(testbed: Testbed) -> None:
    async with harness(testbed, stop_grace=2.0) as h:
        tag = "sparktui/spark2"
        killed: list[bool] = []

        def on_progress(view: OperationView) -> None:
            worker = [s for s in view.steps if s.name == "ray start (worker)"]
            if worker and worker[0].status is StepStatus.OK and not killed:
                killed.append(True)
                # Kill every process of ours on spark2 (its raylet and friends), from outside.
                testbed.exec("spark2", [testbed.config_dict()["nodes"][1]["python"], "-c", S.TAGGED_PY,
                                        "stop", tag, "0.2"])

        controller = h.new_controller(on_progress)
        view = await controller.start()
        if view.ok:
            # Ray had not noticed yet when it was polled: vLLM then waits for its placement group and
            # the wait names the node that left.
            result = await wait_until_ready(controller, timeout=90)
            assert result.outcome == "failed", result.detail
            diagnosis = result.detail
        else:
            diagnosis = view.message
        assert killed
        assert "spark2" in diagnosis and "10." in diagnosis, diagnosis


async def test_reattach_and_log_resume_after_ssh_drop(testbed: Testbed) -> None:
    # A slower pace, so weight loading lasts long enough to drop the connection in the middle of it.
    async with harness(testbed, pace=20.0) as h:
        view = await h.controller.start()
        assert view.ok, _explain(view)
        got = bytearray()
        follower = LogFollower(h.transports["spark1"], h.controller.log_path(), got.extend,
                               python=(h.config.head.python,), retry_delay=0.2)
        follow = asyncio.create_task(follower.run())
        try:
            # "The dashboard was killed and run again": a controller that knows nothing re-attaches.
            fresh = h.new_controller()
            found = await fresh.discover()
            assert found.running and found.state is EngineState.STARTING
            assert fresh.log_path() == "/tmp/sparktui/vllm.log"

            # Wait for weight loading, then drop every SSH session of the head at once.
            for _ in range(300):
                if b"weight loading in progress" in got or b"Loading weights" in got \
                        or b"Loading safetensors" in got:
                    break
                await asyncio.sleep(0.1)
            else:
                pytest.fail("weight loading never started:\n" + got.decode(errors="replace")[-2000:])
            # The replay goes on while `status` reads the nodes: on a loaded machine it may have passed
            # weights by the time the log is read, but it is starting and at weights or beyond.
            status = await engine_status(h.config, h.transports)
            assert status["state"] == "starting", status.get("timeline")
            assert STAGE_INDEX.get(status["stage"], -1) >= STAGE_INDEX["weights"], status.get("timeline")
            sessions = follower.sessions
            testbed.kill_ssh_sessions("spark1")

            result = await wait_until_ready(fresh, timeout=120)
            assert result.outcome == "ready", result.detail
            log = host_path(testbed, "spark1", "/tmp/sparktui/vllm.log")
            for _ in range(100):
                if len(got) == log.stat().st_size:
                    break
                await asyncio.sleep(0.1)
        finally:
            follow.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follow
        assert follower.sessions > sessions, "the follower never had to resume"
        assert bytes(got) == log.read_bytes()
        seqs = [int(m) for m in SEQ.findall(bytes(got))]
        assert len(seqs) > 20
        assert sorted(seqs) == list(range(1, max(seqs) + 1)), "a sequence-numbered line was lost or doubled"


async def test_one_operation_at_a_time_and_preflight_catches_problems(testbed: Testbed) -> None:
    async with harness(testbed, extra_args=["--max-model-len", "4096", "--enable-turbo-mode"]) as h:
        # A tagged leftover of "an earlier run" on the worker.
        python = h.config.node("spark2").python
        subprocess.Popen([*testbed.nsenter("spark2"), "env", "SPARKTUI_TAG=sparktui/spark2", python, "-c",
                          "import time; time.sleep(120)"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
        await asyncio.sleep(0.5)
        first = asyncio.create_task(h.controller.preflight())
        await wait_until(lambda: h.controller.busy == "preflight", "the preflight running")
        with pytest.raises(OperationRefused, match="preflight is running"):
            await h.controller.start()
        view = await first
        assert not view.ok
        failed = {(s.node, s.name): s for s in view.steps if s.status is StepStatus.FAILED}
        assert "--enable-turbo-mode" in failed[("spark1", "preflight: vLLM flags")].message
        left = failed[("spark2", "preflight: leftovers")]
        assert any("time.sleep(120)" in line for line in left.output_tail)

        clean = await h.controller.clean()
        assert clean.ok, _explain(clean)
        assert not any("time.sleep(120)" in p for p in leftovers(testbed, "spark2"))
        nothing = await h.controller.discover()
        assert nothing.state is EngineState.STOPPED and not nothing.leftovers


async def test_mp_executor_runs_vllm_on_every_node_without_ray(testbed: Testbed) -> None:
    async with harness(testbed, executor="mp") as h:
        await start_ready(h)
        found = await h.new_controller().discover()
        assert set(found.vllm) == {"spark1", "spark2"} and all(v.status == "running"
                                                              for v in found.vllm.values())
        worker_log = host_path(testbed, "spark2", "/tmp/sparktui/vllm.log").read_text(errors="replace")
        assert "[seq=" in worker_log
        assert not any("raylet" in p for p in leftovers(testbed, "spark1"))
        stop = await h.controller.stop()
        assert stop.ok, _explain(stop)
        for name in ("spark1", "spark2"):
            assert leftovers(testbed, name) == [], name
