"""`sparktui status [--json]`: each node's reachability, SSH state, host facts, telemetry and the engine.

All nodes are asked at once, each bounded by ``--timeout``; the exit status is 0 only when every node
answered. Each node is asked once after connecting (``sparktui.remote.status_round``: host facts, one
probe reading, what of ours runs, and on the head Ray, its reach of the others and the vLLM log), and the
engine's state is judged from those answers as re-attach discovery would (``EngineJudge``).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import TYPE_CHECKING, Any

from sparktui.commands.common import config_from_args, positive_seconds, print_json, refuse_example
from sparktui.commands.exit_status import ExitStatus
from sparktui.domain.deadline import within

if TYPE_CHECKING:  # `sparktui status --help` imports this module: no config, pydantic or SSH for it
    from collections.abc import Mapping

    from sparktui.config import NodeConfig, SparkConfig
    from sparktui.domain.logs import TimelineSnapshot
    from sparktui.remote.engine_status import EngineJudge
    from sparktui.remote.status_round import NodeRound
    from sparktui.remote.transport import Transport

DEFAULT_TIMEOUT = 20.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("exit status: 0 every node answered, 1 some node did not, 2 no usable config, "
                     "4 the engine was ready and cannot serve now (degraded or wedged)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"give up on a node after this long (default {DEFAULT_TIMEOUT:.0f})")


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if refuse_example(args, config, "status", "Or try the simulated cluster: `sparktui --demo`."):
        return ExitStatus.USAGE
    from sparktui.config import find_config

    report = asyncio.run(gather_status(config, timeout=args.timeout))
    path = find_config(getattr(args, "config", None))
    report["config"] = str(path) if path else None
    if args.json:
        print_json(report)
    else:
        print(render(report))
    return exit_code(report)


#: Engine states in which an engine that was ready cannot serve (exit status 4).
CANNOT_SERVE = ("degraded", "wedged")


def exit_code(report: dict[str, Any]) -> int:
    if not report["all_reachable"]:
        return ExitStatus.NOT_WELL
    engine = report.get("engine")
    if isinstance(engine, dict) and engine.get("state") in CANNOT_SERVE:
        return ExitStatus.CANNOT_SERVE
    return ExitStatus.OK


# -- gathering -------------------------------------------------------------------------------------
def _link(transport: Transport) -> dict[str, Any]:
    state = transport.state
    retry_in = state.retry_in()
    return {
        "phase": state.phase.value,
        "endpoint": transport.endpoint,
        "detail": state.describe(),
        "last_error": state.last_error,
        "retry_in": None if retry_in is None else round(retry_in, 1),
        "attempts": state.attempts,
    }


def _unreachable(node: NodeConfig, transport: Transport, error: str | None = None) -> dict[str, Any]:
    return {
        "name": node.name, "host": node.host, "role": node.role, "reachable": False,
        "ssh": _link(transport), "hostname": None, "kernel": None, "uptime_seconds": None, "error": error,
    }


async def _node_facts(config: SparkConfig, node: NodeConfig, transport: Transport,
                      entry: dict[str, Any]) -> None:
    """The previous way's node part: host facts and one probe reading into ``entry``, at once (two
    channels of the one connection)."""
    # Imported here: `sparktui --help` imports every verb's module, and these are not needed for it.
    from sparktui.remote.host_facts import read_host_facts
    from sparktui.remote.probe_runner import engine_probe_args, sample_once
    from sparktui.remote.transport import TransportError

    async def sample() -> dict[str, Any]:
        try:
            return await sample_once(transport, node, name_prefix=config.engine.name_prefix,
                                     extra_args=engine_probe_args(config.engine))
        except TransportError as exc:
            return {"error": str(exc)}

    sampling = asyncio.ensure_future(sample())
    try:
        result, facts = await read_host_facts(transport, node, timeout=15)
    except TransportError as exc:
        entry["error"] = str(exc)
        sampling.cancel()
        return
    entry.update(reachable=True, hostname=facts.hostname, kernel=facts.kernel,
                 uptime_seconds=facts.uptime_seconds)
    if not result.ok:
        entry["error"] = result.stderr.strip()[-500:] or f"exit status {result.returncode}"
    entry["sample"] = await sampling


async def _reach(node: NodeConfig, transport: Transport, timeout: float) -> str | None:
    """Connect (the transport's own fail-fast TCP connect); the reason when the node cannot be reached."""
    from sparktui.remote.transport import LinkPhase

    try:
        await within(transport.connect(), timeout)
    except TimeoutError:
        return f"no answer within {timeout:.0f} s"
    if transport.state.phase is not LinkPhase.CONNECTED:
        # One line, said once: `spark2 (10.0.0.2:22): connection refused — is sshd running?`
        return transport.unreachable_message()
    return None


async def gather_status(config: SparkConfig, *, timeout: float = DEFAULT_TIMEOUT,
                        one_round: bool = True) -> dict[str, Any]:
    """Everything ``status`` reports, as a JSON-ready dict (also used by tests).

    ``one_round`` (the default): every node is connected at once and asked one command as soon as it is
    connected (``_gather_round``), so the answer takes about as long as the slowest node's connect plus
    its one round trip, and a node that cannot be reached costs only its own connect attempt. ``False``:
    the previous way (``_gather_overlapped``: several commands per node, the engine's part beside the
    nodes'), kept for ``benchmarks/bench_status.py``'s same-run comparison.
    """
    from sparktui.remote.cluster import close_cluster, open_cluster

    t0 = time.monotonic()
    transports = await open_cluster(config, connect=False)
    try:
        if one_round:
            report = await _gather_round(config, transports, timeout)
        else:
            report = await _gather_overlapped(config, transports, timeout)
    finally:
        await close_cluster(transports)
    report["seconds"] = round(time.monotonic() - t0, 2)
    return report


async def _gather_round(config: SparkConfig, transports: dict[str, Transport],
                        timeout: float) -> dict[str, Any]:
    from sparktui.remote.engine_status import snapshot_of
    from sparktui.remote.status_round import status_round
    from sparktui.remote.transport import LinkPhase, TransportError

    links: dict[str, str] = {}
    #: Why a node's part of the engine is not known (discovery's "unreachable").
    unknown: dict[str, str] = {}
    #: The head's log as its timeline.
    snapshots: dict[str, TimelineSnapshot] = {}

    async def node_part(node: NodeConfig) -> tuple[dict[str, Any], NodeRound | None]:
        transport = transports[node.name]
        error = await _reach(node, transport, timeout)
        links[node.name] = transport.state.phase.value
        answer: NodeRound | None = None
        if error is None:
            try:
                answer = await within(status_round(config, node, transport), timeout)
            except TimeoutError:
                error = f"no answer within {timeout:.0f} s"
            except TransportError as exc:
                error = str(exc)
        if answer is None:
            unknown[node.name] = error or "unreachable"
            if transport.state.phase is not LinkPhase.CONNECTED:
                await transport.close()  # no retries in the background while the others are read
        entry = _unreachable(node, transport, error)
        if answer is not None:
            facts = answer.facts
            entry.update(reachable=True, hostname=facts.hostname, kernel=facts.kernel,
                         uptime_seconds=facts.uptime_seconds, sample=answer.sample)
        entry["ssh"] = _link(transport)
        entry["ssh"]["phase"] = links[node.name]  # as found, not "closed" by us just now
        if node is config.head and answer is not None:
            # Parsed now, while the other nodes may still be answering (or timing out).
            detached = answer.detached
            if detached is not None and detached.log_size and answer.log:
                snapshots[node.name] = snapshot_of(answer.log, len(config.nodes))
        return entry, answer

    parts = await asyncio.gather(*(node_part(n) for n in config.nodes))
    rounds = {n.name: answer for n, (_, answer) in zip(config.nodes, parts, strict=True)}
    # In config order, as the multi-command path lists them (the engine's detail names nodes in it).
    order = [n.name for n in config.nodes]
    nodes = [entry for entry, _ in parts]
    engine = await _engine_of(config, rounds, {n: links[n] for n in order},
                              {n: unknown[n] for n in order if n in unknown}, snapshots.get(config.head.name),
                              transports[config.head.name])
    return {
        "cluster": config.cluster.name,
        "all_reachable": all(n["reachable"] for n in nodes),
        "nodes": nodes,
        "engine": engine,
        "supervisor": _supervisor(rounds[config.head.name]),
        "image": _image(config, rounds[config.head.name]),
        "upgrade": _upgrade(rounds[config.head.name]),
    }


def _image(config: SparkConfig, head_round: NodeRound | None) -> dict[str, Any] | None:
    """The engine image a start uses (docker): the one ``sparktui upgrade`` promoted while it applies,
    else ``engine.image`` (``sparktui.domain.upgrade.images``)."""
    from sparktui.domain.upgrade.images import ImageInUse

    if config.engine.runtime != "docker":
        return None
    kept = ImageInUse.parse(head_round.image) if head_round is not None and head_round.image else None
    if kept is None or not kept.applies_to(config):
        return {"ref": config.engine.image, "image_id": None, "vllm_version": None, "source": "config",
                "text": f"image: {config.engine.image} (engine.image)"}
    return {"ref": kept.ref, "image_id": kept.image_id, "vllm_version": kept.vllm_version,
            "source": "upgrade", "previous": kept.previous_ref, "text": f"image: {kept.describe()}"}


def _upgrade(head_round: NodeRound | None) -> dict[str, Any] | None:
    """The last ``sparktui upgrade``, in progress or ended, as the head keeps it
    (``sparktui.domain.upgrade.progress``): ``None`` when none ever ran (or the head was not read)."""
    from sparktui.domain.upgrade.progress import UpgradeRecord

    if head_round is None or head_round.upgrade is None:
        return None
    record = UpgradeRecord.parse(head_round.upgrade)
    return None if record is None else record.report(time.time())


def _supervisor(head_round: NodeRound | None) -> dict[str, Any] | None:
    """The supervisor's presence as the head keeps it (``sparktui.domain.presence``): ``None`` when there
    never was one (or the head was not read)."""
    from sparktui.domain.presence import SupervisorPresence

    if head_round is None or head_round.supervisor is None:
        return None
    presence = SupervisorPresence.parse(head_round.supervisor)
    return None if presence is None else presence.report(time.time())


async def _engine_of(config: SparkConfig, rounds: Mapping[str, NodeRound | None], links: Mapping[str, str],
                     unknown: Mapping[str, str], snap: TimelineSnapshot | None,
                     head_transport: Transport) -> dict[str, Any]:
    """The engine's part of the report from the nodes' answers, judged as re-attach discovery judges;
    a ready engine's token counter is then watched a few seconds while requests run (a wedge)."""
    from sparktui.domain.lifecycle import plan as P
    from sparktui.domain.lifecycle.discovery import DetachedState, discovery_of
    from sparktui.domain.lifecycle.preflight import DockerContainer
    from sparktui.remote.engine_status import EngineJudge

    head = config.head.name
    head_round = rounds[head]
    if head_round is None:
        if links[head] != "connected":
            return {"error": f"unknown: the head ({head}) is unreachable"}
        return {"error": unknown[head]}
    vllm: dict[str, DetachedState] = {}
    containers: dict[str, list[DockerContainer]] = {}
    processes: dict[str, list[dict[str, object]]] = {}
    for name, answer in rounds.items():
        if answer is None:
            continue
        processes[name] = answer.processes
        if answer.containers is not None:
            containers[name] = list(answer.containers)
        if answer.detached is not None:
            vllm[name] = answer.detached
    found = discovery_of(vllm, containers, processes, unknown, head_round.ray, head=head,
                         expected=P.expected_nodes(config))
    detached = vllm.get(head)
    homes = {head: head_round.home} if head_round.home else None
    log_path = detached.log_path if detached and detached.log_path else P.vllm_log_path(config, homes, head)
    judge = EngineJudge(config, found, links, log_path, snap)
    if judge.wants_reach:
        if head_round.reach is not None:
            judge.reach(head_round.reach)
        if config.engine.executor == "ray":
            judge.raylets({name: raylet_running(answer.processes) for name, answer in rounds.items()
                           if answer is not None})
        if judge.ready:
            await _watch_tokens(config, judge, head_transport)
    report = judge.report()
    if judge.ready:
        report["pace"] = await _serving_pace(config, head_transport)
    return report


def raylet_running(processes: list[dict[str, object]]) -> bool:
    """Whether a node's processes of ours include its raylet (by the probe's own rule for a raylet)."""
    from sparktui.node.probe.processes import classify

    return any(classify(str(p.get("cmdline") or "").split(), "") == "raylet" for p in processes)


async def _watch_tokens(config: SparkConfig, judge: EngineJudge, head_transport: Transport) -> None:
    """``EngineJudge.watch_tokens`` over the head's link (the API port as the head sees it)."""
    from sparktui.remote.api_client import EngineApi, EngineApiError
    from sparktui.remote.engine_status import STATUS_WEDGE_SECONDS
    from sparktui.remote.transport import TransportError

    try:
        api = await EngineApi.connect(head_transport, "127.0.0.1", config.engine.api_port)
    except (TransportError, OSError):
        return     # no evidence: the rest of the reading stands
    async with api:
        try:
            await within(judge.watch_tokens(api.metrics_text, config.engine.served_model_name
                                            or config.engine.model), STATUS_WEDGE_SECONDS + 10)
        except (TimeoutError, EngineApiError):
            return


#: Seconds between the two /metrics scrapes that give status its one window of the serving pace.
PACE_WINDOW_SECONDS = 2.0


async def _serving_pace(config: SparkConfig, head_transport: Transport,
                        window: float = PACE_WINDOW_SECONDS) -> dict[str, Any] | None:
    """The serving pace as one short window shows it (``domain/pace_status.py``: no verdict, which needs
    minutes): two scrapes ``window`` apart while requests run, against the last benchmark of this engine.
    None when the API cannot be read."""
    from sparktui.domain.bench_history import BenchStore
    from sparktui.domain.pace_status import pace_status
    from sparktui.domain.serving import MetricsParseError, SampleReader, ServingTracker
    from sparktui.domain.serving_pace import ServingPace, baseline_for, settings_from
    from sparktui.remote.api_client import EngineApi, EngineApiError
    from sparktui.remote.transport import TransportError

    try:
        history = BenchStore().load()
    except OSError:
        history = []
    baseline = baseline_for(config, history)
    settings = settings_from(config.serving)
    if baseline is None:
        return pace_status(None, settings, None, None)
    reader, tracker = SampleReader(config.engine.served_model_name or config.engine.model), ServingTracker()
    pace = ServingPace(settings, baseline)
    try:
        api = await EngineApi.connect(head_transport, "127.0.0.1", config.engine.api_port)
    except (TransportError, OSError):
        return None
    async with api:
        try:
            snap = tracker.update(reader.read(await api.metrics_text()), time.monotonic())
            if snap.requests_running:
                await asyncio.sleep(window)   # a rate needs two scrapes some time apart
                snap = tracker.update(reader.read(await api.metrics_text()), time.monotonic())
        except (EngineApiError, MetricsParseError, TransportError, OSError):
            return None
    reading = pace.observe(snap, time.monotonic()) if snap.window_seconds else None
    return pace_status(baseline, settings, snap, reading)


async def _gather_overlapped(config: SparkConfig, transports: dict[str, Transport],
                             timeout: float) -> dict[str, Any]:
    from sparktui.remote.engine_status import engine_status
    from sparktui.remote.transport import TransportError

    errors = dict(zip([n.name for n in config.nodes],
                      await asyncio.gather(*(_reach(n, transports[n.name], timeout) for n in config.nodes)),
                      strict=True))
    links = {name: t.state.phase.value for name, t in transports.items()}
    for name, error in errors.items():
        if error is not None:
            # Discovery would wait out its dead link again: it finds it closed and names it.
            await transports[name].close()

    async def node_part(node: NodeConfig) -> dict[str, Any]:
        transport = transports[node.name]
        entry = _unreachable(node, transport, errors[node.name])
        if errors[node.name] is None:
            try:
                await within(_node_facts(config, node, transport, entry), timeout)
            except TimeoutError:
                entry = _unreachable(node, transport, f"no answer within {timeout:.0f} s")
        entry["ssh"] = _link(transport)
        if errors[node.name] is not None:
            entry["ssh"]["phase"] = links[node.name]  # as found, not "closed" by us just now
        return entry

    async def engine_part() -> dict[str, Any]:
        if errors[config.head.name] is not None:
            return {"error": f"unknown: the head ({config.head.name}) is unreachable"}
        try:
            return await within(engine_status(config, transports, links), timeout)
        except (TransportError, TimeoutError) as exc:
            return {"error": str(exc) or f"no answer within {timeout:.0f} s"}

    nodes, engine = await asyncio.gather(asyncio.gather(*(node_part(n) for n in config.nodes)),
                                         engine_part())
    return {
        "cluster": config.cluster.name,
        "all_reachable": all(n["reachable"] for n in nodes),
        "nodes": list(nodes),
        "engine": engine,
    }


# -- rendering -------------------------------------------------------------------------------------
def _uptime(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes = int(seconds // 60)
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m"


def _telemetry(entry: dict[str, Any]) -> str:
    sample = entry.get("sample")
    if not isinstance(sample, dict):
        return ""
    if sample.get("error"):
        return f"probe: {sample['error']}"
    problems = sample.get("problems") or {}
    if not problems:
        return "probe: ok"
    listed = "; ".join(str(text) for text in problems.values())
    return f"probe: {listed[:200]}"


def render(report: dict[str, Any]) -> str:
    headers = ("NODE", "ROLE", "SSH", "HOSTNAME", "KERNEL", "UPTIME")
    rows = []
    notes = []
    for n in report["nodes"]:
        ssh = n["ssh"] or {}
        rows.append((n["name"], n["role"], ssh.get("phase", "?"), n["hostname"] or "-", n["kernel"] or "-",
                     _uptime(n["uptime_seconds"])))
        if not n["reachable"] or n.get("error"):
            # The link's own error, not its "retrying in N s" countdown (stale by the time it is printed).
            why = n.get("error") or ssh.get("last_error") or ssh.get("detail") or "unreachable"
            # An unreachable node's line already starts with its name (and address).
            notes.append(f"  {why}" if why.startswith(f"{n['name']} (") else f"  {n['name']}: {why}")
        tele = _telemetry(n)
        if tele:
            notes.append(f"  {n['name']}: {tele}")
    widths = [max(len(str(row[i])) for row in (headers, *rows)) for i in range(len(headers))]
    lines = ["  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in (headers, *rows)]
    lines += notes
    engine = report.get("engine")
    if isinstance(engine, dict):
        state = engine.get("state") or engine.get("error") or "?"
        # "unknown" alone says nothing: say what is not known and why; a state that cannot serve says why.
        shown = state == "unknown" or engine.get("state") in (*CANNOT_SERVE, "failed")
        detail = engine.get("detail") if shown else None
        lines.append(f"engine: {state}" + (f" — {detail}" if detail else ""))
        pace = engine.get("pace")
        if isinstance(pace, dict) and pace.get("text"):
            lines.append(str(pace["text"]))
    for part in ("image", "upgrade", "supervisor"):
        said = report.get(part)
        if isinstance(said, dict) and said.get("text"):
            lines.append(str(said["text"]))
    reachable = sum(1 for n in report["nodes"] if n["reachable"])
    lines.append(f"{reachable}/{len(report['nodes'])} nodes reachable ({report['cluster']})")
    return "\n".join(lines)
