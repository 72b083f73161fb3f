"""The three walks of docs/architecture.md, measured: each path run with the real code, and the sparktui
modules and functions it enters counted with ``sys.setprofile``.

1. a log line → its stage bar: a vLLM log line leaves the head's log follower channel, goes through the
   log feed into the stage machine, is posted by the flush loop, drained by the dashboard, drawn by the bar;
2. a telemetry sample → its panel: a probe line from a node's channel, read into a sample and its reading,
   posted, drained, drawn by the node panel;
3. the ``s`` key → the first remote command of a start (the operation lock on the head).

What runs: the dashboard (``SparkApp``, headless in Textual's ``run_test``) over the real ``SshBackend``,
observed as ``sparktui`` observes it (the bench key's ``PowerTap`` subscribed to its events); only the SSH
edge is replaced, by a transport whose channels the script writes into (the vLLM log as the node-side
follower frames it, a probe line recorded on a real node) and which answers commands as a node where
nothing of ours runs. A walk is cut where the product itself waits (a timer, a queue, another task): each
such *hop* is left to the product (its flush loop, its drain timer, Textual's compositor, a worker), and
the script waits for it and asserts what it did, so a change in the code breaks this script rather than
making it report an old path.

Counted: the frames whose code file is under ``sparktui/`` (Textual's, asyncio's and the standard
library's calls between are not counted), in the task(s) of the segment, from the segment's first event to
its end. A *call* is one function activation that ran in the segment (a generator or coroutine resumed
again is the same activation); a module is entered when one of its functions runs. Modules are listed in
the order first entered, each with the function entered first.

    .venv/bin/python benchmarks/walks.py [--json | --markdown]

``--markdown`` prints the walks as docs/architecture.md's "Three walks" lists them;
``tests/test_architecture_doc.py`` checks the doc against ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sparktui
from sparktui.config import load_config
from sparktui.domain.bench import PowerTap
from sparktui.domain.events import EngineChanged, NodeSampled
from sparktui.domain.history import HistoryStore
from sparktui.domain.lifecycle import scripts
from sparktui.domain.lifecycle.frames import FrameKind
from sparktui.remote.backend import SshBackend
from sparktui.remote.host_facts import HOME_SH
from sparktui.remote.probe_runner import BOOTSTRAP
from sparktui.remote.transport import (
    CommandResult,
    LinkPhase,
    LinkState,
    RemoteProcess,
    Transport,
    TransportError,
)
from sparktui.ui.app import AppSwitches, SparkApp
from sparktui.ui.widgets.node_panel import NodePanel
from sparktui.ui.widgets.stage_bar import StageBar
from sparktui.ui.widgets.util import node_widget_id
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[1]
PACKAGE = str(Path(sparktui.__file__).resolve().parent) + os.sep
CONFIG = REPO / "config.toml"
#: A real vLLM 0.17 start (tests/public_logs): its lines up to the weights. first shards warm the parser up;
#: the next shard line (2/4) is the walked one.
VLLM_LOG = REPO / "tests" / "public_logs" / "06-qwen2.5-7b-v0.17-ready-exit.log"
WARM_LINES = 25
#: Probe lines recorded on a real node (an H200): the first warms the node's rates up, the second is walked.
PROBE_LINES = REPO / "tests" / "fixtures" / "telemetry" / "h200-nvml-stream.jsonl"
HOME = "/home/walk"


def module_of(path: str) -> str:
    return "sparktui/" + path[len(PACKAGE):].replace(os.sep, "/")


# ---- counting ------------------------------------------------------------------------------------
Where = tuple[str, str]   # (module path relative to sparktui/'s parent, function's qualified name)


def where(module: str, qualname: str) -> Where:
    return (module, qualname)


@dataclass
class Segment:
    """One synchronous stretch of a walk: what ran under sparktui/ between its start and its end."""

    label: str
    #: What the product waits for before this segment (empty for the first): a timer, a queue, a task.
    hop: str = ""
    #: Only frames of tasks this accepts count (None: any task).
    tasks: Callable[[asyncio.Task[Any] | None], bool] | None = None
    #: Opened by the first call of this function (else by the script), closed when that activation returns.
    entry: Where | None = None
    #: Closed (after its own frame returns) by the return of this function with ``close_when`` true of its
    #: frame; else by the script (``end``).
    close_at: Where | None = None
    close_when: Callable[[FrameType], bool] = lambda _frame: True
    #: Closed by the transport's start of a remote command (the walk's SSH edge).
    close_at_edge: bool = False
    #: Whether the entry's activation returning ends the segment (a coroutine's suspension does not).
    until_entry_returns: bool = True
    #: Where the walked value arrives in this segment (the first call of this function with ``arrive_when``
    #: true of its frame; with ``close_at_edge``, the transport's start): the path is read there.
    arrive: Where | None = None
    arrive_when: Callable[[FrameType], bool] = lambda _frame: True
    #: The path: the functions on the call stack when the value arrives, with the generators that fed them
    #: in this segment (the pipeline the value came through), as (module, function) in call order.
    path: list[tuple[str, str]] = field(default_factory=list)
    state: str = "armed"     # armed → open → closed
    frames: dict[int, tuple[FrameType, str, str, str]] = field(default_factory=dict)
    _entry_frame: FrameType | None = None

    def modules(self) -> list[tuple[str, str]]:
        seen: dict[str, str] = {}
        for _frame, module, function, _task in self.frames.values():
            seen.setdefault(module, function)
        return list(seen.items())

    def path_modules(self) -> list[tuple[str, str]]:
        seen: dict[str, str] = {}
        for module, function in self.path:
            seen.setdefault(module, function)
        return list(seen.items())

    def task_switches(self) -> list[str]:
        """Tasks the segment's frames ran in, in order (more than one: the product hands over inside it)."""
        order: list[str] = []
        for *_rest, task in self.frames.values():
            if not order or order[-1] != task:
                order.append(task)
        return order


class Recorder:
    """``sys.setprofile`` for the walk's length: each event under sparktui/ goes to the segments open."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []
        self._code_where: dict[CodeType, Where | None] = {}
        self.edges: list[tuple[str, list[str]]] = []
        #: Returns of watched functions (``watch``), counted: what the script synchronises with.
        self.returns: dict[Where, int] = {}
        #: A generator's frame → the frame it last yielded to (its consumer): the pipeline behind a stack.
        self._fed: dict[int, tuple[FrameType, FrameType]] = {}

    def __enter__(self) -> Recorder:
        sys.setprofile(self._event)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)

    def add(self, segment: Segment) -> Segment:
        self.segments.append(segment)
        if segment.entry is None:
            segment.state = "open"
        return segment

    def watch(self, at: Where) -> Callable[[], int]:
        self.returns.setdefault(at, 0)
        return lambda: self.returns[at]

    def end(self, segment: Segment) -> None:
        segment.state = "closed"

    def edge(self, node: str, argv: Sequence[str]) -> None:
        """The transport was asked to start a remote command: segments waiting for it end here."""
        hit = False
        for segment in self.segments:
            if segment.state == "open" and segment.close_at_edge and self._accepts(segment):
                if not segment.path:
                    segment.path = self._path(segment, sys._getframe(1))
                segment.state = "closed"
                hit = True
        if hit:
            self.edges.append((node, list(argv)))

    def _where(self, code: CodeType) -> Where | None:
        try:
            return self._code_where[code]
        except KeyError:
            path = code.co_filename
            found = where(module_of(path), code.co_qualname) if path.startswith(PACKAGE) else None
            self._code_where[code] = found
            return found

    @staticmethod
    def _accepts(segment: Segment) -> bool:
        if segment.tasks is None:
            return True
        try:
            task = asyncio.current_task()
        except RuntimeError:
            task = None
        return segment.tasks(task)

    def _path(self, segment: Segment, frame: FrameType | None) -> list[tuple[str, str]]:
        """The call stack above ``frame`` (ours only, outermost first), each function followed by the
        generators that fed it in this segment (and the ones that fed those)."""
        stack: list[FrameType] = []
        while frame is not None:
            if self._where(frame.f_code) is not None:
                stack.append(frame)
            frame = frame.f_back
        consumers: dict[int, list[FrameType]] = {}
        for producer, consumer in self._fed.values():
            if id(producer) in segment.frames:
                consumers.setdefault(id(consumer), []).append(producer)
        path: list[tuple[str, str]] = []
        on_stack = {id(at) for at in stack}

        def add(at: FrameType) -> None:
            where_ = self._where(at.f_code)
            assert where_ is not None
            path.append(where_)
            for producer in consumers.pop(id(at), []):
                if id(producer) not in on_stack:   # a generator running now is on the stack already
                    add(producer)

        for at in reversed(stack):
            add(at)
        return path

    def _event(self, frame: FrameType, event: str, _arg: object) -> None:
        if event != "call" and event != "return":
            return
        at = self._where(frame.f_code)
        if at is None:
            return
        if event == "return" and at in self.returns:
            self.returns[at] += 1
        if event == "return" and frame.f_code.co_flags & _GENERATORS and frame.f_back is not None:
            consumer = frame.f_back
            while consumer is not None and self._where(consumer.f_code) is None:
                consumer = consumer.f_back
            if consumer is not None:
                self._fed[id(frame)] = (frame, consumer)
        for segment in self.segments:
            if segment.state == "armed":
                if event == "call" and at == segment.entry and self._accepts(segment):
                    segment.state = "open"
                    segment._entry_frame = frame
                else:
                    continue
            if segment.state != "open" or not self._accepts(segment):
                continue
            if id(frame) not in segment.frames or segment.frames[id(frame)][0] is not frame:
                name = task_name(asyncio.current_task())
                segment.frames[id(frame)] = (frame, at[0], at[1], name)
            if (event == "call" and not segment.path and at == segment.arrive
                    and segment.arrive_when(frame)):
                segment.path = self._path(segment, frame)
            if event == "return":
                entry_ended = frame is segment._entry_frame and segment.until_entry_returns
                if entry_ended or (at == segment.close_at and segment.close_when(frame)):
                    segment.state = "closed"


#: Generators and async generators: a "return" of theirs may be a yield to their consumer.
_GENERATORS = inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR


def task_name(task: asyncio.Task[Any] | None) -> str:
    """A task by what it runs (its coroutine's function; the app's own message loop as ``the app``)."""
    if task is None:
        return "-"
    if task.get_name().startswith("run_test"):
        return "the app"
    if task.get_name() == "screen_update":
        return "Textual's screen update"
    return getattr(task.get_coro(), "__qualname__", task.get_name())


# ---- the SSH edge --------------------------------------------------------------------------------
class FedProcess(RemoteProcess):
    """A remote command's channel: its output is what the script writes into it (``feed``)."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.argv = list(argv)
        self._out: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.stdin = bytearray()
        self._ended = asyncio.Event()
        #: The task that reads it (the product's stream): the segment it starts is counted in this task.
        self.reader = asyncio.current_task()

    def feed(self, data: bytes) -> None:
        self._out.put_nowait(data)

    async def chunks(self) -> Any:
        while (data := await self._out.get()) is not None:
            yield data

    async def write(self, data: bytes) -> None:
        self.stdin += data

    async def close_stdin(self) -> None:
        pass

    async def wait(self) -> int | None:
        await self._ended.wait()
        return 0

    async def stderr_text(self) -> str:
        return ""

    def terminate(self) -> None:
        self._ended.set()
        self._out.put_nowait(None)


class EdgeTransport(Transport):
    """A node at the SSH edge: streaming commands are ``FedProcess``es; one-shot commands are answered as
    on a node where nothing of ours runs ($HOME known, every other command exits 1 without output)."""

    def __init__(self, name: str, recorder: Recorder) -> None:
        super().__init__(name)
        self.recorder = recorder
        self.started: list[FedProcess] = []

    async def connect(self) -> None:
        self._set_state(LinkState(LinkPhase.CONNECTED))

    async def close(self) -> None:
        self._set_state(LinkState(LinkPhase.CLOSED))

    async def run(self, argv: Sequence[str], *, input: bytes | None = None, timeout: float | None = None,
                  env: Mapping[str, str] | None = None) -> CommandResult:
        if list(argv) == ["sh", "-c", HOME_SH]:
            return CommandResult(tuple(argv), 0, HOME + "\n", "", 0.0)
        return CommandResult(tuple(argv), 1, "", "", 0.0)

    async def start(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> RemoteProcess:
        self.recorder.edge(self.name, argv)
        proc = FedProcess(argv)
        self.started.append(proc)
        return proc

    async def forward_port(self, remote_host: str, remote_port: int) -> int:
        raise TransportError("no port forwarding at the walk's edge")

    def process(self, is_it: Callable[[list[str]], bool]) -> FedProcess | None:
        return next((p for p in self.started if is_it(p.argv)), None)


def follower_frame(data: bytes, kind: FrameKind = FrameKind.DATA) -> bytes:
    """``data`` framed as the node-side follower sends it (``sparktui/node/follow.py``): a header line
    ``<kind> <n>``, then n bytes."""
    return f"{kind.value} {len(data)}\n".encode() + data


# ---- the walks -----------------------------------------------------------------------------------
@dataclass
class Walk:
    name: str
    segments: list[Segment]
    #: What the walk ended on (the remote command's argv, the bar's progress …).
    ended: str

    def report(self) -> dict[str, Any]:
        modules: dict[str, str] = {}
        path: dict[str, str] = {}
        calls = steps = 0
        segments = []
        for segment in self.segments:
            assert segment.path, f"{self.name}: the value never arrived in {segment.label!r}"
            calls += len(segment.frames)
            steps += len(segment.path)
            for module, function in segment.modules():
                modules.setdefault(module, function)
            for module, function in segment.path_modules():
                path.setdefault(module, function)
            segments.append({
                "label": segment.label, "hop": segment.hop, "calls": len(segment.frames),
                "modules": [{"module": m, "function": f} for m, f in segment.modules()],
                "path": [{"module": m, "function": f} for m, f in segment.path],
                "steps": len(segment.path),
                "tasks": segment.task_switches(),
            })
        # A hop: the walk waits for the event loop to run a timer's callback or another task (between
        # segments, and inside one where it hands over to another task, e.g. ``asyncio.gather``'s).
        hops = sum(1 for s in self.segments if s.hop) + sum(len(s.task_switches()) - 1 for s in self.segments)
        return {"walk": self.name, "modules": len(modules), "calls": calls, "hops": hops, "ended": self.ended,
                "path_modules": len(path), "path_steps": steps,
                "path": [{"module": m, "function": f} for m, f in path.items()],
                "order": [{"module": m, "function": f} for m, f in modules.items()], "segments": segments}


def is_follower(argv: list[str]) -> bool:
    return scripts.FOLLOW_PY in argv


def is_probe(argv: list[str]) -> bool:
    return BOOTSTRAP in argv


def not_before(tasks: set[asyncio.Task[Any]]) -> Callable[[asyncio.Task[Any] | None], bool]:
    return lambda task: task not in tasks


def only(task: asyncio.Task[Any] | None) -> Callable[[asyncio.Task[Any] | None], bool]:
    return lambda current: current is task


def posts(kind: type) -> Callable[[FrameType], bool]:
    """The dashboard's sink is returning from an event of ``kind``."""
    return lambda frame: isinstance(frame.f_locals.get("event"), kind)


SINK = where("sparktui/ui/event_drain.py", "EventDrain.sink")
DRAIN = where("sparktui/ui/event_drain.py", "EventDrain._timed_drain")


async def walk_all() -> list[Walk]:
    recorder = Recorder()
    with tempfile.TemporaryDirectory(prefix="sparktui-walks-") as home:
        config = load_config(CONFIG)
        edges = {n.name: EdgeTransport(n.name, recorder) for n in config.nodes}
        for transport in edges.values():
            await transport.connect()
        # A run record, if one were written, never lands in the user's history.
        backend = SshBackend(config, transports=dict(edges), history=HistoryStore(Path(home) / "runs.jsonl"))
        # As `sparktui` runs the dashboard over real nodes: observed by the bench key's power tap.
        tap = PowerTap()
        backend.events.observe(tap, tap.kinds)
        app = SparkApp(backend, config.ui,
                       roles={n.name: n.role for n in config.nodes}, cluster_name=config.cluster.name,
                       switches=AppSwitches(tick_seconds=3600.0))
        head = edges[config.head.name]
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_until(lambda: head.process(is_follower) is not None, "the log follower's channel")
            await wait_until(lambda: backend.controller is not None and bool(backend.controller.homes),
                             "the nodes' homes read at attach", pilot=pilot)
            with recorder:
                walks = [await walk_log(app, backend, head, recorder, pilot),
                         await walk_sample(app, edges[config.nodes[0].name], recorder, pilot),
                         await walk_start_key(app, head, recorder, pilot)]
    return walks


async def walk_log(app: SparkApp, backend: SshBackend, head: EdgeTransport, recorder: Recorder,
                   pilot: Any) -> Walk:
    follower = head.process(is_follower)
    assert follower is not None
    lines = VLLM_LOG.read_bytes().splitlines(keepends=True)
    follower.feed(follower_frame(b"1", FrameKind.RESET))
    follower.feed(follower_frame(b"".join(lines[:WARM_LINES])))

    def weights() -> StageBar:
        return app.query_one("#stage-weights").query_one(StageBar)

    await wait_until(lambda: weights().total == 4, "the weights bar (4 shards)",
                     pilot=pilot, state=lambda: (weights().total, weights().progress))
    await pilot.pause()
    progress = weights().progress
    flush_task = next(t for t in asyncio.all_tasks()
                      if getattr(t.get_coro(), "__qualname__", "") == "LogFeed.flush_loop")
    # Fed right after the flush loop's quiet tick: it then waits for the line (not in a tick's own sleep).
    ticks = recorder.watch(where("sparktui/domain/engine_session.py", "EngineSession.tick"))
    seen = ticks()
    await wait_until(lambda: ticks() > seen, "the flush loop's quiet tick")

    read = recorder.add(Segment("the follower's channel delivers the line", tasks=only(follower.reader),
                                arrive=where("sparktui/domain/logs/stages.py", "Timeline._touch")))
    flush = recorder.add(Segment("the flush loop posts the timeline", "timer: the log feed's flush loop, "
                                 "woken by the line, FLUSH_INTERVAL later", tasks=only(flush_task),
                                 entry=where("sparktui/remote/log_feed.py", "LogFeed.flush_loop"),
                                 close_at=SINK, close_when=posts(EngineChanged), until_entry_returns=False,
                                arrive=SINK, arrive_when=posts(EngineChanged)))
    drain = recorder.add(Segment("the dashboard drains the event", "timer: the dashboard's drain "
                                 "(FLUSH_HZ), armed by the sink", entry=DRAIN,
                                 arrive=where("sparktui/ui/widgets/stage_bar.py", "StageBar.update")))
    draw = recorder.add(Segment("the bar is drawn", "Textual's compositor, on the refresh the bar asked for",
                                entry=where("sparktui/ui/widgets/stage_bar.py", "StageBar.render"),
                                arrive=where("sparktui/ui/widgets/stage_bar.py", "StageBar.render")))
    follower.feed(follower_frame(lines[WARM_LINES]))
    await wait_until(lambda: backend.logs.arrived.is_set() or flush.state != "armed", "the line read")
    recorder.end(read)
    await wait_until(lambda: draw.state == "closed", "the bar drawn", pilot=pilot,
                     state=lambda: [(s.label, s.state) for s in (flush, drain, draw)])
    assert weights().progress == progress + 1, (progress, weights().progress)
    return Walk("A log line → its stage bar", [read, flush, drain, draw],
                f"the weights bar drawn at {weights().progress:.0f}/4")


async def walk_sample(app: SparkApp, node: EdgeTransport, recorder: Recorder, pilot: Any) -> Walk:
    probe = node.process(is_probe)
    assert probe is not None
    first, second = PROBE_LINES.read_bytes().splitlines(keepends=True)[:2]
    probe.feed(first)
    await wait_until(lambda: app.state.nodes[node.name].reading is not None, "the first reading",
                     pilot=pilot)
    await pilot.pause()
    read = recorder.add(Segment("the probe's channel delivers the line", tasks=only(probe.reader),
                                close_at=SINK, close_when=posts(NodeSampled),
                                arrive=SINK, arrive_when=posts(NodeSampled)))
    drain = recorder.add(Segment("the dashboard drains the event", "timer: the dashboard's drain "
                                 "(FLUSH_HZ), armed by the sink", entry=DRAIN,
                                 arrive=where("sparktui/ui/widgets/node_panel.py",
                                              "NodeSummary.update_from_state")))
    draw = recorder.add(Segment("the panel's first line is drawn", "Textual's compositor, on the refresh "
                                "the panel asked for",
                                entry=where("sparktui/ui/widgets/node_panel.py", "NodeSummary.render_line"),
                                arrive=where("sparktui/ui/widgets/node_panel.py", "NodeSummary.render_line")))
    before = app.state.nodes[node.name].reading
    probe.feed(second)
    await wait_until(lambda: draw.state == "closed", "the panel drawn", pilot=pilot,
                     state=lambda: [(s.label, s.state) for s in (read, drain, draw)])
    reading = app.state.nodes[node.name].reading
    assert reading is not None and reading is not before and reading.gpu_name == "NVIDIA H200"
    assert app.query_one(f"#{node_widget_id(node.name)}", NodePanel).is_attached
    return Walk("A telemetry sample → its panel", [read, drain, draw], "the node panel's first line drawn")


async def walk_start_key(app: SparkApp, head: EdgeTransport, recorder: Recorder, pilot: Any) -> Walk:
    before = set(asyncio.all_tasks())
    key = recorder.add(Segment("the key's action", tasks=not_before({t for t in before if _ours(t)}),
                               close_at=where("sparktui/ui/operations.py", "Operations.action_start"),
                               arrive=where("sparktui/ui/operations.py", "Operations.action_start")))
    work = recorder.add(Segment("the start, up to its first remote command", "a task: Textual's worker "
                                "(@work) runs the backend's start", tasks=not_before(before),
                                entry=where("sparktui/ui/operations.py", "Operations._call_backend"),
                                close_at_edge=True, until_entry_returns=False))
    await pilot.press("s")
    await wait_until(lambda: work.state == "closed", "the first remote command", pilot=pilot,
                     state=lambda: [(s.label, s.state) for s in (key, work)])
    node, argv = recorder.edges[-1]
    assert node == head.name and argv[1:4] == ["-c", scripts.LOCK_PY, "take"], argv[:4]
    return Walk("The `s` key → the first remote command", [key, work],
                f"{node}: {' '.join(argv[:2])} … (the operation lock)")


def _ours(task: asyncio.Task[Any]) -> bool:
    code = getattr(task.get_coro(), "cr_code", None)
    return code is not None and code.co_filename.startswith(PACKAGE)


# ---- output --------------------------------------------------------------------------------------
def markdown(reports: list[dict[str, Any]]) -> str:
    """The walks as docs/architecture.md lists them (its "Three walks" section)."""
    out: list[str] = []
    for report in reports:
        out.append(f"**{report['walk']}** ({report['path_modules']} modules on the path; "
                   f"{report['modules']} modules, {report['calls']} calls touched; {report['hops']} hops):")
        out.append("")
        seen: set[str] = set()
        for segment in report["segments"]:
            if segment["hop"]:
                out.append(f"⏱ *{segment['hop']}*")
                out.append("")
            tasks = segment["tasks"]
            handed = f", handed over in tasks {' → '.join(tasks)}" if len(tasks) > 1 else ""
            calls = f"{segment['calls']} call{'s' if segment['calls'] != 1 else ''}"
            out.append(f"*{segment['label']}: {calls}{handed}*")
            out.append("")
            out.append("Path: " + " → ".join(f"`{e['module']}` `{e['function']}`" for e in segment["path"]))
            out.append("")
            new = [e for e in segment["modules"] if e["module"] not in seen]
            for entry in new:
                seen.add(entry["module"])
                out.append(f"{len(seen)}. `{entry['module']}` — `{entry['function']}`")
            if not new:
                again = ", ".join(f"`{e['function']}`" for e in segment["modules"])
                out.append(f"(no module new: {again})")
            out.append("")
        out.append(f"Ends: {report['ended']}.")
        out.append("")
    return "\n".join(out)


def render(reports: list[dict[str, Any]]) -> str:
    out: list[str] = []
    for report in reports:
        out.append(f"{report['walk']}: path {report['path_modules']} modules ({report['path_steps']} steps); "
                   f"touched {report['modules']} modules, {report['calls']} calls; "
                   f"{report['hops']} timed hops (ends: {report['ended']})")
        for segment in report["segments"]:
            chain = " → ".join(f"{e['module'].removeprefix('sparktui/')}:{e['function']}"
                               for e in segment["path"])
            out.append(f"   path [{segment['label']}]: {chain}")
        seen: set[str] = set()
        n = 0
        for segment in report["segments"]:
            if segment["hop"]:
                out.append(f"   ── hop: {segment['hop']}")
            tasks = " → ".join(segment["tasks"])
            out.append(f"   [{segment['label']}: {segment['calls']} calls; task {tasks}]")
            for entry in segment["modules"]:
                if entry["module"] in seen:
                    out.append(f"       ({entry['module']} — {entry['function']})")
                    continue
                seen.add(entry["module"])
                n += 1
                out.append(f"   {n:2}. {entry['module']} — {entry['function']}")
        out.append("")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="the walks as JSON")
    shown.add_argument("--markdown", action="store_true", help="the walks as docs/architecture.md lists them")
    args = parser.parse_args(argv)
    reports = [w.report() for w in asyncio.run(walk_all())]
    print(json.dumps(reports, indent=1) if args.json else markdown(reports) if args.markdown
          else render(reports))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
