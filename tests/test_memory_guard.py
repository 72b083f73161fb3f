"""The memory guard's rule (pure), the start plan's memory settings (object store, drop caches) and the
NCCL_DEBUG default; the test-bed squeeze is in ``test_memory_guard_testbed.py``."""

from __future__ import annotations

import subprocess
from typing import Any

from sparktui.config import parse_config
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle import scripts as S
from sparktui.domain.memory_guard import MemoryGuard
from sparktui.domain.telemetry import MemoryPressure, MemorySample, Sample
from tests.waiting import wait_until

GIB = 1024**3


def sample(wall: float, available_gib: float, psi_full: float = 0.0) -> Sample:
    total = 128 * GIB
    avail = int(available_gib * GIB)
    return Sample(seq=int(wall), mono=wall, wall=wall, memory=MemorySample(
        total=total, used=total - avail, available=avail, pressure=MemoryPressure(full_avg10=psi_full)))


def test_trips_below_the_floor_naming_the_node_with_its_last_minute() -> None:
    guard = MemoryGuard(4 * GIB, 20.0)
    for t in range(0, 90):
        assert guard.observe("spark1", sample(t, 100)) is None
        trip = guard.observe("spark2", sample(t, max(3.5, 60 - t * 0.7)))
        if trip is not None:
            break
    assert trip is not None and trip.node == "spark2" and trip.reason == "floor"
    assert trip.curve[-1].wall - trip.curve[0].wall <= 60
    msg = trip.message
    assert "spark2" in msg and "MemAvailable 3.5 GiB below the floor 4.0 GiB" in msg, msg
    assert "over the last minute" in msg and " → " in msg and msg.count("→") == 6
    # Once: later samples below the floor do not trip again until re-armed (a new start).
    assert guard.observe("spark2", sample(t + 1, 2)) is None
    guard.rearm()
    assert guard.observe("spark2", sample(t + 2, 2)) is not None


def test_pressure_trips_and_disarmed_or_off_does_not() -> None:
    guard = MemoryGuard(4 * GIB, 20.0)
    assert guard.observe("spark1", sample(0, 50, psi_full=35.0), armed=False) is None
    trip = guard.observe("spark1", sample(1, 50, psi_full=35.0))
    assert trip is not None and trip.reason == "pressure" and "PSI full avg10 35.0 %" in trip.message
    off = MemoryGuard(0, 0)
    assert not off.enabled and off.observe("spark1", sample(0, 0.1, 99)) is None
    unknown = MemoryGuard(4 * GIB, 20.0)
    s = Sample(seq=1, mono=0, wall=0, memory=MemorySample(total=None, available=None))
    assert unknown.observe("spark1", s) is None     # unknown memory is never read as 0


def config(**engine: Any) -> Any:
    return parse_config({
        "nodes": [{"name": "a", "host": "10.0.0.1", "role": "head"}, {"name": "b", "host": "10.0.0.2"}],
        "engine": {"runtime": "host", "model": "m", **engine},
    })


def test_object_store_is_sized_explicitly_and_shown() -> None:
    plan = P.build_start_plan(config())
    head = next(s for s in plan.steps if s.name == "ray start (head)")
    i = head.argv.index("--object-store-memory")
    assert head.argv[i + 1] == str(4 * GIB)
    assert any("Ray object store 4.0 GiB per node" in n for n in plan.notes)
    assert "Ray object store 4.0 GiB" in plan.render()
    own = P.build_start_plan(config(ray_start_args=["--object-store-memory", "80000000"]))
    head = next(s for s in own.steps if s.name == "ray start (head)")
    assert list(head.argv).count("--object-store-memory") == 1 and "80000000" in head.argv
    off = P.build_start_plan(config(ray_object_store_memory=0))
    assert "--object-store-memory" not in next(s for s in off.steps if s.name == "ray start (head)").argv
    assert int(config(ray_object_store_memory="8GiB").engine.ray_object_store_memory) == 8 * GIB


def test_nccl_debug_info_by_default_and_overridable() -> None:
    assert P.runtimes(config())["a"].env["NCCL_DEBUG"] == "INFO"
    assert P.runtimes(config(env={"NCCL_DEBUG": "WARN"}))["a"].env["NCCL_DEBUG"] == "WARN"


def test_drop_caches_step_tolerated_and_says_why_when_not_permitted(tmp_path: Any) -> None:
    assert not any(s.name == "drop caches" for s in P.build_start_plan(config()).steps)
    plan = P.build_start_plan(config(drop_caches=True))
    assert plan.phases[0].name.startswith("free the page cache")
    steps = plan.phases[0].steps
    assert [s.node for s in steps] == ["a", "b"] and all(s.tolerate_failure for s in steps)
    assert "<drop-caches.sh>" in plan.render()
    # Where the file cannot be written (never the real one here: this machine is shared).
    res = subprocess.run(["sh", "-c", S.DROP_CACHES_SH, "sh", str(tmp_path / "no" / "drop_caches")],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "page cache not freed" in res.stdout
    assert "root or passwordless sudo" in res.stdout


async def test_the_dashboard_backend_stops_vllm_on_a_trip(tmp_path: Any) -> None:
    import asyncio
    from pathlib import Path

    from sparktui.config import load_config
    from sparktui.domain.events import EngineChanged, EngineState, Event, Notice, OperationView
    from sparktui.domain.history import HistoryStore
    from sparktui.remote.backend import SshBackend

    class Controller:
        busy = None
        stops = 0

        def __init__(self) -> None:
            self.by_person: list[bool] = []

        async def stop(self, *, by_person: bool = True) -> OperationView:
            self.stops += 1
            self.by_person.append(by_person)
            return OperationView("stop", running=False, ok=True, message="stopped")

    events: list[Event] = []
    backend = SshBackend(load_config(Path(__file__).resolve().parents[1] / "config.toml"),
                         history=HistoryStore(tmp_path / "runs.jsonl"))
    backend.events.sink = events.append
    controller = Controller()
    backend.controller = controller  # type: ignore[assignment]
    backend.session.truth._set(EngineState.STOPPED, "")
    backend.operations.guard_memory("spark2", sample(0, 2))           # stopped: not guarded
    await asyncio.sleep(0)
    assert controller.stops == 0
    backend.session.truth._set(EngineState.READY, "serving")
    for t in range(1, 4):
        backend.operations.guard_memory("spark1", sample(t, 90))
        backend.operations.guard_memory("spark2", sample(t, 12 - 3 * t))
    await wait_until(lambda: controller.stops >= 1, "vLLM stopped")
    assert controller.stops == 1
    assert controller.by_person == [False]   # the guard's stop: the desired state stays as it was
    last = [e for e in events if isinstance(e, EngineChanged)][-1]
    assert last.state is EngineState.FAILED
    assert last.detail.startswith("memory guard: spark2 MemAvailable 3.0 GiB"), last.detail
    assert any(isinstance(e, Notice) and e.severity == "error" and "spark2" in e.message for e in events)
