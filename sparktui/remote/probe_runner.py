"""Runs the node-side probe over a node's existing transport and turns its lines into ``Sample`` objects.

How the probe gets to the node: ``python3 -c BOOTSTRAP <n> <probe args>`` with the probe's source
written to its stdin. The tiny constant bootstrap reads exactly ``n`` bytes, compiles and runs them.
Why this way rather than ``python3 -`` (which reads the script until EOF) or an uploaded file:
- stdin stays open after the source, so the probe's stdin is the channel's lifeline: when the SSH
  channel (or the local pipe) closes, the probe sees EOF at once and exits (no orphan), instead of
  noticing only at its next failed write;
- nothing is written to the node's disk, so there is no cache to invalidate and the probe always
  matches the controller's version;
- the command line stays short and constant (no script text in ``ps`` or in the SSH exec request).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

from sparktui import node
from sparktui.config import EngineConfig, NodeConfig
from sparktui.domain.backoff import Backoff
from sparktui.domain.node_reading import NodeFeed
from sparktui.domain.telemetry import NodeTelemetry, Sample
from sparktui.remote.line_stream import LineStream
from sparktui.remote.transport import Transport, TransportError

log = logging.getLogger(__name__)

#: Reads exactly argv[1] bytes of source from stdin, then runs it as ``__main__`` with the rest of argv.
BOOTSTRAP = (
    "import os,sys\n"
    "n=int(sys.argv[1]);b=b''\n"
    "while len(b)<n:\n"
    " c=os.read(0,n-len(b))\n"
    " if not c:raise SystemExit('sparktui-probe: source cut short')\n"
    " b+=c\n"
    "sys.argv=['sparktui-probe']+sys.argv[2:]\n"
    "exec(compile(b,'sparktui-probe','exec'),{'__name__':'__main__'})\n"
)

#: Seconds between restarts of a probe whose channel ended; doubled (``Backoff``) while it keeps failing.
RESTART_DELAY = 1.0
MAX_RESTART_DELAY = 30.0

#: Seconds between the two samples of a one-shot reading (two, so that it carries rates too).
ONCE_GAP = 0.5


@functools.cache
def probe_source() -> bytes:
    """The probe's source as shipped (``sparktui/node/probe/``, one script; built once: every probe start
    sends it)."""
    return node.source("probe.main").encode()


def probe_argv(
    node: NodeConfig,
    interval: float,
    *,
    count: int = 0,
    name_prefix: str = "sparktui",
    follow_stdin: bool = True,
    extra_args: Sequence[str] = (),
    source: bytes | None = None,
) -> list[str]:
    """The argv that starts the probe on ``node``; ``probe_source()`` (or ``source``) goes to its stdin."""
    src = probe_source() if source is None else source
    argv = [node.python, "-c", BOOTSTRAP, str(len(src)),
            "--interval", repr(float(interval)),
            "--proc-root", node.proc_root, "--sys-root", node.sys_root,
            "--name-prefix", name_prefix]
    if count:
        argv += ["--count", str(count)]
    if follow_stdin:
        argv.append("--until-stdin-closes")
    return [*argv, *extra_args]


def engine_probe_args(engine: EngineConfig) -> list[str]:
    """Probe options that follow from how the engine runs: no container checks when it runs on the host
    (a node without docker would otherwise report "docker not found" as a problem)."""
    return ["--no-containers"] if engine.runtime == "host" else []


#: Seconds the probe gives one engine API request (``--engine-timeout``), as ``EngineApi`` gives ``/health``.
PROBE_REQUEST_TIMEOUT = 5.0


def engine_api_probe_args(engine: EngineConfig) -> list[str]:
    """For the head's probe in the dashboard: read the engine's ``/health`` and the serving panel's
    ``/metrics`` families beside it, into each sample (``sparktui.remote.probed_api``)."""
    from sparktui.domain.serving import WANTED_FAMILIES

    return ["--engine-port", str(engine.api_port), "--engine-families", ",".join(WANTED_FAMILIES),
            "--engine-timeout", repr(PROBE_REQUEST_TIMEOUT)]


def parse_sample_line(line: str | bytes, received: float) -> Sample | None:
    try:
        return Sample.from_json(json.loads(line), received=received)
    except ValueError as exc:   # json.JSONDecodeError is a ValueError
        log.warning("probe: unreadable line (%s): %.200r", exc, line)
        return None


async def stream_samples(
    transport: Transport,
    node: NodeConfig,
    interval: float,
    *,
    name_prefix: str = "sparktui",
    env: Mapping[str, str] | None = None,
    extra_args: Sequence[str] = (),
    on_error: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    restart_delay: float = RESTART_DELAY,
    feed: NodeFeed | None = None,
) -> AsyncGenerator[Sample, None]:
    """Samples of ``node`` as they arrive, for as long as the caller iterates; with ``feed``, each one is
    read by it first (its ``NodeSampled`` posted: units, rates, the charts' history).

    When the channel ends (transport dropped, probe died), the probe is started again once the
    transport is connected again. Ends only when the transport is closed. Closing the generator
    closes the probe's channel, and the probe exits.
    """
    argv = probe_argv(node, interval, name_prefix=name_prefix, extra_args=extra_args)
    stream = LineStream(transport, argv, name=f"{node.name}: probe", env=env, stdin=probe_source,
                        backoff=Backoff(initial=restart_delay, maximum=MAX_RESTART_DELAY),
                        on_error=on_error)
    async with contextlib.aclosing(stream.lines()) as lines:
        async for line in lines:
            sample = parse_sample_line(line, clock())
            if sample is not None:
                if feed is not None:
                    feed.sampled(node.name, sample)
                yield sample


async def sample_once(
    transport: Transport,
    node: NodeConfig,
    *,
    name_prefix: str = "sparktui",
    env: Mapping[str, str] | None = None,
    extra_args: Sequence[str] = (),
    gap: float = ONCE_GAP,
    timeout: float = 30.0,
) -> dict[str, Any]:
    """One reading of ``node`` for ``sparktui status --json``: two samples ``gap`` s apart, so the dict
    carries rates too (``NodeTelemetry.to_json`` shape plus ``"error"`` when no sample came)."""
    argv = probe_argv(node, gap, count=2, name_prefix=name_prefix, follow_stdin=False,
                      extra_args=extra_args)
    try:
        result = await transport.run(argv, input=probe_source(), timeout=timeout, env=env)
    except TransportError as exc:
        return {**NodeTelemetry(node.name, rdma_devices=node.rdma_devices).to_json(), "error": str(exc)}
    return reading_of(node, result.stdout, result.returncode, result.stderr)


def reading_of(node: NodeConfig, stdout: str, returncode: int, stderr: str) -> dict[str, Any]:
    """A one-shot probe's output as ``sample_once`` returns it (also ``sparktui status``'s one round,
    which runs the probe on the node inside its script)."""
    telemetry = NodeTelemetry(node.name, rdma_devices=node.rdma_devices)
    now = time.monotonic()
    for line in stdout.splitlines():
        sample = parse_sample_line(line, now)
        if sample is not None:
            telemetry.update(sample, now)
    out = telemetry.to_json()
    if telemetry.latest is None:
        out["error"] = (f"probe exited with status {returncode}: "
                        f"{stderr.strip()[-500:] or 'no output'}")
    return out
