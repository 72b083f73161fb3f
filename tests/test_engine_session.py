"""The engine session (``sparktui.domain.engine_session``): evidence in, the state machine's effects out
through injected ports, the restart policy with its budget — driven by a fake clock and fake ports (no I/O,
no wall clock). And the rule that makes it the one session: nothing else in ``sparktui`` builds
``EngineTruth``.

Timelines come from real (synthetic) vLLM logs read by the real ``Timeline`` (the helpers of
``tests/test_engine_state.py``).
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

from sparktui.config import load_config
from sparktui.domain.engine_session import EnginePorts, EngineSession
from sparktui.domain.engine_state import Record
from sparktui.domain.events import EngineState, Event, Notice, OperationView
from sparktui.domain.lifecycle.discovery import Discovery
from sparktui.domain.readiness import Crash, RestartDecision
from tests.test_engine_state import HAPPY, NODES, WALL0, Clock, ray, serving, snapshot

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "config.toml"


@dataclass
class Ports:
    """Fake ports: every call, in order, as ``(port, value)``."""

    calls: list[tuple[str, object]] = field(default_factory=list)

    def plug(self) -> EnginePorts:
        return EnginePorts(
            verify=lambda: self.calls.append(("verify", None)),
            unwatch=lambda: self.calls.append(("unwatch", None)),
            record=lambda record: self.calls.append(("record", record)),
            restart=lambda decision: self.calls.append(("restart", decision)),
            publish=lambda event: self.calls.append(("publish", event)),
            show=lambda: self.calls.append(("show", None)),
            watch_ray=lambda wanted: self.calls.append(("watch_ray", wanted)),
        )

    def take(self, *skip: str) -> list[tuple[str, object]]:
        """The calls since the last take, but ``skip``'s ports (``show``/``watch_ray`` come every time)."""
        out, self.calls = [c for c in self.calls if c[0] not in skip], []
        return out

    def effects(self) -> list[tuple[str, object]]:
        """The effects since the last take, and whether the watches were cancelled (the state machine may
        ask twice: leaving a watched state, and for the reason it left; the port is idempotent)."""
        return self.take("show", "watch_ray")

    def effects_unwatched(self) -> list[tuple[str, object]]:
        effects = self.effects()
        assert ("unwatch", None) in effects, effects
        return [e for e in effects if e[0] != "unwatch"]


def ended(effects: list[tuple[str, object]], end: str) -> list[tuple[str, object]]:
    """The run's end after ready recorded first (its history line updated), then the other effects."""
    port, record = effects[0]
    assert port == "record" and isinstance(record, Record) and record.end == end, effects
    assert record.ready_seconds is None and record.ended_at is not None and record.cause
    return effects[1:]


def session(clock: Clock, ports: Ports, **kwargs: object) -> EngineSession:
    options: dict[str, object] = {"tensor_parallel": 2, "stop_steps": frozenset({"stop vLLM", "ray stop"})}
    options.update(kwargs)
    return EngineSession(NODES, ports=ports.plug(), clock=clock, wall=clock.wall,
                         **options)  # type: ignore[arg-type]


def ready(s: EngineSession, ports: Ports) -> None:
    """Re-attached to a running engine, the readiness check passed, Ray has both nodes."""
    with s.held():
        s.timeline(snapshot(HAPPY))
        s.discovered(EngineState.STARTING, "vLLM running (spark1 pid 7)")
    assert s.state is EngineState.VERIFYING
    s.verified(0.25, "0.17.1")
    s.ray(ray("spark1", "spark2"))
    assert s.state is EngineState.READY
    ports.take()


def crash(clock: Clock) -> Crash:
    return Crash(clock(), 30.0, "health", "/health failing for 15s (HTTP 503)")


def restart_done(s: EngineSession, ports: Ports) -> None:
    """The restart port's operation runs and the engine comes back ready."""
    s.operation(OperationView("restart", running=True))
    s.operation(OperationView("restart", running=False, ok=True))
    s.timeline(snapshot(HAPPY))
    s.verified(0.3)
    assert s.state is EngineState.READY
    ports.take()


def test_ready_log_asks_for_the_check_then_the_run_is_recorded() -> None:
    clock, ports = Clock(), Ports()
    s = session(clock, ports)
    s.discovered(EngineState.STARTING, "vLLM running")
    assert s.state is EngineState.STARTING
    assert ports.take() == [("show", None), ("watch_ray", True)]   # shown, and Ray watched while it runs
    clock.advance(20)
    s.timeline(snapshot(HAPPY, 0.5))     # the start seen under way: its ready is when the log says so
    ports.take()
    clock.advance(22)
    s.timeline(snapshot(HAPPY))
    # The state is shown before what follows from it: verifying, then the readiness check.
    assert ports.take() == [("show", None), ("verify", None), ("watch_ray", True)]
    assert s.state is EngineState.VERIFYING
    clock.advance(3)
    s.verified(0.25, "0.17.1")
    assert s.state is EngineState.READY and s.ready_at == clock() and s.ttft_seconds == 0.25
    assert s.vllm_version == "0.17.1"
    [(port, record)] = ports.effects()
    # The run began when the session did (its wall clock): ready 45 s of wall time later.
    assert port == "record" and record == Record("ready", WALL0 + 100.0, 45.0)


def test_a_hold_gives_several_pieces_as_one_reading() -> None:
    clock, ports = Clock(), Ports()
    s = session(clock, ports)
    with s.held():
        s.timeline(snapshot(HAPPY))
        s.discovered(EngineState.STARTING, "vLLM running")
        s.ray(ray("spark1", "spark2"))
        assert ports.calls == []          # nothing done while held
    assert ports.take() == [("show", None), ("verify", None), ("watch_ray", True)]


def test_an_operation_stops_the_ray_watch_and_cancels_the_check() -> None:
    clock, ports = Clock(), Ports()
    s = session(clock, ports)
    ready(s, ports)
    s.operation(OperationView("stop", running=True))
    calls = ports.take()
    assert calls[0] == ("show", None) and calls[-1] == ("watch_ray", False)
    assert {port for port, _ in calls[1:-1]} == {"unwatch", "record"}
    [(_, end)] = [c for c in calls if c[0] == "record"]
    assert isinstance(end, Record) and end.end == "stopped"    # the run that served ended by a stop
    assert s.state is EngineState.STOPPING


def test_a_crash_restarts_within_the_budget_and_a_manual_start_earns_it_back() -> None:
    clock, ports = Clock(), Ports()
    s = session(clock, ports, auto_restart=True, restart_limit=2)
    ready(s, ports)
    for attempt in (1, 2):
        s.crashed(crash(clock))
        assert s.state is EngineState.FAILED and s.detail.startswith("crashed after 30s")
        assert ended(ports.effects_unwatched(), "crashed") == [
            ("publish", Notice(f"auto-restart {attempt}/2", "warning")),
            ("restart", RestartDecision(True, attempt, 2, f"auto-restart {attempt}/2")),
        ]
        restart_done(s, ports)
    # The budget is spent: told, not restarted.
    s.crashed(crash(clock))
    assert ended(ports.effects_unwatched(), "crashed") == [
        ("publish", Notice("auto-restart limit reached (2/2); not restarting", "error")),
    ]
    # The person starts it again: the budget is whole again.
    s.manual_start()
    restart_done(s, ports)
    s.crashed(crash(clock))
    assert [port for port, _ in ended(ports.effects_unwatched(), "crashed")] == ["publish", "restart"]


def test_auto_restart_off_tells_and_does_not_restart() -> None:
    clock, ports = Clock(), Ports()
    s = session(clock, ports)
    ready(s, ports)
    s.crashed(crash(clock))
    assert ended(ports.effects_unwatched(), "crashed") == [
        ("publish", Notice("auto-restart is off", "error"))]


def test_a_wedge_is_judged_on_the_injected_clock() -> None:
    clock, ports = Clock(), Ports()
    s = session(clock, ports, wedge_seconds=60.0, auto_restart=True, restart_limit=1)
    ready(s, ports)
    s.serving(serving(running=2, tokens=500))
    clock.advance(59)
    s.serving(serving(running=2, tokens=500))
    s.tick()
    assert s.state is EngineState.READY and ports.effects() == []
    clock.advance(2)
    s.tick()
    assert s.state is EngineState.WEDGED
    told = ended(ports.effects(), "wedged")
    assert [port for port, _ in told] == ["publish", "publish", "restart"]
    first = told[0][1]
    assert isinstance(first, Notice) and first.severity == "error"
    assert first.message.startswith("engine wedged")


def test_status_reads_once_with_no_port_plugged() -> None:
    # ``sparktui status``: one reading (links, the log, discovery), judged by a session nobody listens to.
    from sparktui.remote.engine_status import EngineJudge

    config = load_config(CONFIG)
    found = Discovery(EngineState.STARTING, "vLLM running (spark1 pid 7)")
    judge = EngineJudge(config, found, {"spark1": "connected", "spark2": "retrying"}, "/tmp/vllm.log",
                        snapshot(HAPPY))
    assert judge.wants_reach
    assert judge.report()["state"] == "ready"
    judge.reach({"spark2": False})     # the head cannot reach spark2, whose SSH link is down too
    report = judge.report()
    assert report["state"] == "degraded" and "spark2" in report["detail"], report


async def test_the_dashboards_restart_port_runs_a_restart_without_the_ui() -> None:
    # The SSH backend plugs its controller's restart into the session: a crash after ready restarts the
    # engine with no screen involved.
    from sparktui.remote.backend import SshBackend

    class Controller:
        busy = None
        restarts = 0

        async def restart(self) -> OperationView:
            self.restarts += 1
            return OperationView("restart", running=False, ok=True, message="restarted")

    config = load_config(CONFIG)
    config = config.model_copy(update={"serving": config.serving.model_copy(update={"auto_restart": True})})
    backend = SshBackend(config)
    events: list[Event] = []
    backend.events.sink = events.append
    controller = Controller()
    backend.controller = controller  # type: ignore[assignment]
    s = backend.session
    # No API to check and no Ray to watch here: those two ports do nothing; the others are the backend's.
    s.ports = dataclasses.replace(s.ports, verify=lambda: None, watch_ray=lambda wanted: None)
    with s.held():
        s.timeline(snapshot(HAPPY))
        s.discovered(EngineState.STARTING, "vLLM running")
    s.verified(0.2)
    s.crashed(Crash(0.0, 30.0, "process_exited", "engine process exited"))
    async with asyncio.timeout(5):
        while not controller.restarts:
            await asyncio.sleep(0.01)
    assert Notice("auto-restart 1/3", "warning") in events


async def test_a_dashboard_defers_its_restart_to_a_live_supervisor_and_takes_it_back_once_gone() -> None:
    """Both auto-restarting one crash would run two restarts: while the supervisor's record on the head
    beats, the dashboard's budget defers to it and says so; three heartbeats missed, it decides again."""
    from sparktui.domain.events import ImageSeen, SupervisorSeen
    from sparktui.domain.presence import STALE_AFTER, SupervisorPresence
    from sparktui.remote.backend import SshBackend

    class Controller:
        busy = None
        restarts = 0
        record: SupervisorPresence | None = None

        async def restart(self) -> OperationView:
            self.restarts += 1
            return OperationView("restart", running=False, ok=True, message="restarted")

        async def presence(self) -> SupervisorPresence | None:
            return self.record

        async def image_in_use(self) -> None:
            return None   # no upgrade kept on the head: engine.image is the one in use

    config = load_config(CONFIG)
    config = config.model_copy(update={"serving": config.serving.model_copy(update={"auto_restart": True})})
    backend = SshBackend(config)
    events: list[Event] = []
    backend.events.sink = events.append
    controller = Controller()
    backend.controller = controller  # type: ignore[assignment]
    ops = backend.operations
    await ops.look_at_supervisor()   # never a supervisor: nothing said, the budget decides
    assert events[0] == SupervisorSeen(None, events[0].read_at)  # type: ignore[union-attr]
    if config.engine.runtime == "docker":   # and the image a start uses, read beside it
        assert events[1:] == [ImageSeen(config.engine.image, False)]
    else:
        assert events[1:] == []
    assert backend.session.budget.decider is None
    controller.record = SupervisorPresence("spark1", 4242, time.time() - 60, time.time())
    ops._presence_read = float("-inf")   # the next read is due (every 15 s otherwise)
    await ops.look_at_supervisor()
    assert Notice("auto-restart left to the supervisor on spark1 (pid 4242): it decides restarts while it "
                  "runs", "information") in events
    s = backend.session
    s.ports = dataclasses.replace(s.ports, verify=lambda: None, watch_ray=lambda wanted: None)
    with s.held():
        s.timeline(snapshot(HAPPY))
        s.discovered(EngineState.STARTING, "vLLM running")
    s.verified(0.2)
    s.crashed(Crash(0.0, 30.0, "process_exited", "engine process exited"))
    assert controller.restarts == 0 and not backend.wiring.tasks   # no restart asked of this dashboard
    assert not [e for e in events if isinstance(e, Notice) and e.message.startswith("auto-restart 1/")]
    # Its heartbeats stop: the dashboard's own auto-restart is back, and the person is told.
    controller.record = SupervisorPresence("spark1", 4242, time.time() - 600, time.time() - STALE_AFTER - 1)
    ops._presence_read = float("-inf")
    await ops.look_at_supervisor()
    assert backend.session.budget.decider is None
    assert Notice("no supervisor seen: this dashboard's auto-restart decides again", "warning") in events
    s.manual_start()
    with s.held():
        s.timeline(snapshot(HAPPY))
        s.discovered(EngineState.STARTING, "vLLM running", again=True)
    s.verified(0.2)
    s.crashed(Crash(0.0, 30.0, "process_exited", "engine process exited"))
    async with asyncio.timeout(5):
        while not controller.restarts:
            await asyncio.sleep(0.01)


def test_only_the_session_builds_the_state_machine() -> None:
    """``EngineTruth(…)`` and ``EngineTruth.from_config(…)`` are called in one module of ``sparktui``."""
    builders: list[str] = []
    for path in sorted((ROOT / "sparktui").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if (isinstance(func, ast.Name) and func.id == "EngineTruth") or (
                    isinstance(func, ast.Attribute) and func.attr == "from_config"
                    and isinstance(func.value, ast.Name) and func.value.id == "EngineTruth"):
                builders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert builders and all(b.startswith("sparktui/domain/engine_session.py:") for b in builders), builders
