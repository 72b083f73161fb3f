"""The supervisor between its policy and the backend, with the backend's edges faked (the test-bed tests
run it whole): the incident is kept before the action runs, a person's stop starts nothing, and "needs a
person" carries the log's own advice and is told. Its presence on the head: written at its start (with
what a previous supervisor saw), at each decision and incident and as a heartbeat, "ended" at a clean end;
a node whose boot id changed has its previous boot read and kept as a "rebooted" incident (the boot id
reader and the postmortem are the ports faked here: /proc is real on the test bed)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from sparktui.config import SparkConfig, SuperviseConfig, load_config
from sparktui.domain.events import (
    EngineChanged,
    EngineState,
    Event,
    FailureView,
    NodeLinkChanged,
    Notice,
    OperationView,
    TimelineView,
)
from sparktui.domain.lifecycle.desired import Desired, DesiredState
from sparktui.domain.postmortem import NodeReport
from sparktui.domain.presence import HEARTBEAT_EVERY, LastIncident, SupervisorPresence
from sparktui.domain.supervise import Cause
from sparktui.remote.supervisor import Supervisor
from sparktui.remote.supervisor_presence import BOOT_RETRY
from sparktui.remote.transport import TransportError
from tests.waiting import wait_until

CONFIG = Path(__file__).resolve().parents[1] / "config.toml"


KERNEL = Path(__file__).resolve().parent / "fixtures" / "kernel"


class Controller:
    busy = None

    def __init__(self, desired: Desired) -> None:
        self.wanted = DesiredState(desired, "`sparktui start`", "laptop", time.time())
        #: The supervisor's record on the head, as the head keeps it; every write, in order.
        self.kept: SupervisorPresence | None = None
        self.writes: list[SupervisorPresence] = []
        self.head_readable = True

    async def desired(self) -> DesiredState:
        return self.wanted

    async def presence(self) -> SupervisorPresence | None:
        if not self.head_readable:
            raise TransportError("spark1: connection refused")
        return self.kept

    async def write_presence(self, presence: SupervisorPresence) -> bool:
        self.kept = presence
        self.writes.append(presence)
        return True


class Events:
    def __init__(self) -> None:
        self.posted: list[Event] = []

    def post(self, event: Event) -> None:
        self.posted.append(event)


class Operations:
    def __init__(self, order: list[str]) -> None:
        self.order = order

    async def supervised(self, operation: Callable[[Any], Awaitable[OperationView]]) -> None:
        self.order.append(f"operation {operation.__name__}")


class Backend:
    def __init__(self, desired: Desired, order: list[str]) -> None:
        self.controller = Controller(desired)
        self.events = Events()
        self.operations = Operations(order)

    async def run(self, _sink: Callable[[Event], None]) -> None:
        await asyncio.Event().wait()   # the watch runs until cancelled


class Nodes:
    """Each node's boot id as its /proc would say it, and its previous boot as its journal would."""

    def __init__(self) -> None:
        self.boot_ids: dict[str, str | None] = {"spark1": "boot-1a", "spark2": "boot-2a"}
        self.postmortems: list[str] = []

    async def boot_id(self, node: str) -> str | None:
        return self.boot_ids[node]

    async def postmortem(self, node: str) -> NodeReport | str:
        self.postmortems.append(node)
        previous = (KERNEL / "oom-previous-boot.log").read_text().splitlines()
        tail = (KERNEL / "power-loss-tail.log").read_text().splitlines()
        return NodeReport.from_json(node, {"boot_id": self.boot_ids[node], "booted_at": time.time() - 60,
                                           "previous": {"lines": previous, "tail": tail}, "current": {}})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


#: Each incident kept: (cause, node, detail, evidence files, action).
Kept = list[tuple[str, str | None, str, dict[str, str], str]]


def supervisor(desired: Desired, config: SparkConfig | None = None, *, nodes: Nodes | None = None,
               clock: Clock | None = None, kept: Kept | None = None,
               ) -> tuple[Supervisor, Backend, list[str], list[dict[str, Any]]]:
    order: list[str] = []
    lines: list[dict[str, Any]] = []
    backend = Backend(desired, order)
    nodes = nodes or Nodes()

    async def keep(cause: Cause, node: str | None, detail: str, *, evidence: Mapping[str, str] | None = None,
                   action: str = "") -> str:
        await asyncio.sleep(0)   # the evidence takes its time; the action waits for it
        order.append(f"incident {cause.value}")
        if kept is not None:
            kept.append((cause.value, node, detail, dict(evidence or {}), action))
        return "inc-1"

    sup = Supervisor(config or load_config(CONFIG), lines.append, on_incident=keep,
                     backend=backend, clock=clock or time.monotonic,  # type: ignore[arg-type]
                     boot_id=nodes.boot_id, postmortem=nodes.postmortem)
    return sup, backend, order, lines


async def settle(sup: Supervisor) -> None:
    await sup.decide()
    if sup.operation is not None:
        await sup.operation


async def test_the_incident_is_kept_before_the_restart_runs() -> None:
    sup, _backend, order, lines = supervisor(Desired.SERVING)
    sup.sink(EngineChanged(EngineState.READY, "serving"))
    await settle(sup)
    assert order == []
    sup.sink(EngineChanged(EngineState.FAILED, "crashed after 3m: engine process exited"))
    await settle(sup)
    assert order == ["incident crashed", "operation _supervised_restart"]
    events = [(line["event"], line.get("action") or line.get("id")) for line in lines
              if line["event"] in ("decision", "incident")]
    assert events == [("decision", "restart"), ("incident", "inc-1")]


async def test_a_persons_stop_starts_nothing_and_keeps_no_incident() -> None:
    sup, _backend, order, lines = supervisor(Desired.STOPPED)
    sup.sink(EngineChanged(EngineState.READY, "serving"))
    sup.sink(EngineChanged(EngineState.FAILED, "crashed after 3m: engine process exited"))
    await settle(sup)
    assert order == []
    assert [line["action"] for line in lines if line["event"] == "decision"] == ["hold"]


async def test_needs_a_person_says_the_logs_advice_and_is_told() -> None:
    config = load_config(CONFIG)
    config = config.model_copy(update={"supervise": SuperviseConfig(oom_retries=0)})
    sup, backend, order, lines = supervisor(Desired.SERVING, config)
    failure = FailureView("oom", "kv_cache", "CUDA out of memory", "Lower --gpu-memory-utilization")
    sup.sink(EngineChanged(EngineState.FAILED, "out of memory in KV cache",
                           TimelineView(outcome="failed", failure=failure)))
    await settle(sup)
    assert order == ["incident oom"]   # kept, and nothing run
    decision = [line for line in lines if line["event"] == "decision"][-1]
    assert decision["action"] == "needs_person"
    assert "The log's advice: Lower --gpu-memory-utilization" in decision["detail"]
    assert [e.message for e in backend.events.posted if isinstance(e, Notice) and e.severity == "error"
            and "--gpu-memory-utilization" in e.message], backend.events.posted


def previous_supervisor(**boot_ids: str) -> SupervisorPresence:
    return SupervisorPresence("spark1", 1, 100.0, 200.0, ended=None,
                              incident=LastIncident("20261204-000000-000", "wedged", None, 150.0, "restart",
                                                    40.0),
                              boot_ids=boot_ids)


async def test_the_record_is_written_at_start_then_at_each_decision_and_incident() -> None:
    clock = Clock()
    sup, backend, _order, _lines = supervisor(Desired.SERVING, clock=clock)
    head = backend.controller
    head.kept = previous_supervisor(spark1="boot-1a")
    await sup.keep_presence_once()
    mine = head.writes[-1]
    assert (mine.host, mine.pid, mine.ended) == (socket.gethostname(), os.getpid(), None)
    # What the supervisor before it saw stays: its latest incident, and each node's boot.
    assert mine.boot_ids == {"spark1": "boot-1a"} and mine.incident == head.kept.incident
    sup.sink(EngineChanged(EngineState.READY, "serving"))
    sup.sink(EngineChanged(EngineState.FAILED, "crashed after 3m: engine process exited"))
    await settle(sup)
    await sup.keep_presence_once()
    mine = head.writes[-1]
    assert mine.decision is not None and (mine.decision.action, mine.decision.cause) == ("restart", "crashed")
    assert mine.incident is not None and (mine.incident.id, mine.incident.cause, mine.incident.action) == (
        "inc-1", "crashed", "restart")
    assert mine.incident.serving_again_s is None
    clock.now += 21.0
    sup.sink(EngineChanged(EngineState.READY, "serving"))
    await sup.keep_presence_once()
    assert head.writes[-1].incident is not None and head.writes[-1].incident.serving_again_s == 21.0
    assert "serving again after 21s" in head.writes[-1].describe(time.time())


async def test_a_heartbeat_every_fifteen_seconds_and_nothing_in_between() -> None:
    clock = Clock()
    sup, backend, _order, _lines = supervisor(Desired.SERVING, clock=clock)
    head = backend.controller
    await sup.keep_presence_once()
    await sup.keep_presence_once()
    assert len(head.writes) == 1
    clock.now += HEARTBEAT_EVERY - 1
    await sup.keep_presence_once()
    assert len(head.writes) == 1
    clock.now += 1
    await sup.keep_presence_once()
    assert len(head.writes) == 2 and head.writes[1].heartbeat >= head.writes[0].heartbeat


async def test_nothing_is_written_before_the_heads_record_was_read() -> None:
    """A head not readable yet: the boot ids a previous supervisor kept are not overwritten with none."""
    sup, backend, _order, _lines = supervisor(Desired.SERVING)
    head = backend.controller
    head.kept = previous_supervisor(spark2="boot-2-before")
    head.head_readable = False
    sup.sink(NodeLinkChanged("spark2", "connected"))
    await sup.keep_presence_once()
    assert head.writes == []
    head.head_readable = True
    await sup.keep_presence_once()
    await asyncio.gather(*sup.reboots)
    assert head.writes and sup.presence is not None and sup.presence.boot_ids["spark2"] == "boot-2a"


async def test_a_node_that_rebooted_is_looked_into_kept_said_and_remembered() -> None:
    kept: Kept = []
    nodes = Nodes()
    sup, backend, _order, lines = supervisor(Desired.SERVING, nodes=nodes, kept=kept)
    head = backend.controller
    head.kept = previous_supervisor(spark1="boot-1a", spark2="boot-2-before")
    sup.sink(NodeLinkChanged("spark1", "connected"))
    sup.sink(NodeLinkChanged("spark2", "connected"))
    await sup.keep_presence_once()
    await asyncio.gather(*sup.reboots)
    assert nodes.postmortems == ["spark2"]   # spark1's boot is the one seen before
    [(cause, node, detail, evidence, action)] = kept
    assert (cause, node, action) == ("rebooted", "spark2", "recorded")
    assert "spark2 rebooted" in detail and "[kernel_oom]" in detail
    postmortem = json.loads(evidence["postmortem-spark2.json"])
    assert postmortem["previous_boot"]["cause"] == "kernel_oom"
    # The kernel's own lines behind the verdict come with it.
    assert any("4242" in e["line"] for e in postmortem["previous_boot"]["evidence"])
    [said] = [line for line in lines if line["event"] == "rebooted"]
    assert (said["node"], said["id"], said["verdict"]) == ("spark2", "inc-1", "kernel_oom")
    await sup.keep_presence_once()
    mine = head.writes[-1]
    assert mine.boot_ids == {"spark1": "boot-1a", "spark2": "boot-2a"}
    assert mine.incident is not None and (mine.incident.cause, mine.incident.node) == ("rebooted", "spark2")
    # The link dropping and coming back without a reboot: nothing more.
    sup.sink(NodeLinkChanged("spark2", "retrying"))
    sup.sink(NodeLinkChanged("spark2", "connected"))
    await sup.keep_presence_once()
    await asyncio.gather(*sup.reboots)
    assert nodes.postmortems == ["spark2"] and len(kept) == 1


async def test_a_boot_id_not_read_is_read_again_a_little_later() -> None:
    kept: Kept = []
    nodes = Nodes()
    nodes.boot_ids["spark2"] = None
    clock = Clock()
    sup, backend, _order, _lines = supervisor(Desired.SERVING, nodes=nodes, kept=kept, clock=clock)
    backend.controller.kept = previous_supervisor(spark2="boot-2-before")
    sup.sink(NodeLinkChanged("spark2", "connected"))
    await sup.keep_presence_once()
    assert kept == [] and sup.reboots == ()
    nodes.boot_ids["spark2"] = "boot-2a"
    await sup.keep_presence_once()
    assert sup.reboots == ()   # not at every look: a few seconds later
    clock.now += BOOT_RETRY
    await sup.keep_presence_once()
    await asyncio.gather(*sup.reboots)
    assert [k[0] for k in kept] == ["rebooted"]


async def test_a_clean_end_says_ended() -> None:
    sup, backend, _order, lines = supervisor(Desired.SERVING)
    head = backend.controller
    task = asyncio.create_task(sup.run())
    await wait_until(lambda: head.writes, "the supervisor's first record")
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert head.writes[-1].ended is not None and lines[-1]["event"] == "ended"
    assert "ended" in head.writes[-1].describe(time.time())


def test_a_reboots_line_reads_as_one_sentence_in_the_journal() -> None:
    from sparktui.commands.supervise import text_line

    line = {"at": "2026-12-04T14:02:00+00:00", "event": "rebooted", "node": "spark2", "id": "inc-1",
            "detail": "spark2 rebooted (boot id boot-2-b → boot-2a); previous boot: the kernel's OOM killer "
                      "killed python3 (pid 4242) [kernel_oom]"}
    assert text_line(line) == f"{line['at']} {line['detail']} (incident inc-1)"
