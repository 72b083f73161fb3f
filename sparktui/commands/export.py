"""`sparktui export [--listen 127.0.0.1:9866]`: node telemetry, the engine's state and stage durations,
serving figures and the newest bench sweep as Prometheus metrics, for as long as it runs.

It watches the cluster as the dashboard does (the same backend and event stream, read-only: it never
starts or stops anything) and sends ``[notify]`` notifications too. The listener is bound to loopback
unless told otherwise (a warning says so when it is not). ``sparktui --export HOST:PORT`` serves the same
from the dashboard process.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from sparktui.commands.common import config_from_args, refuse_example, run_async
from sparktui.commands.exit_status import ExitStatus
from sparktui.domain.bench import BenchRecord

if TYPE_CHECKING:
    from sparktui.config import SparkConfig
    from sparktui.domain.export_state import ExportState
    from sparktui.remote.exporter import Exporter

DEFAULT_LISTEN = "127.0.0.1:9866"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = "exit status: 2 no usable config or a bad --listen; runs until interrupted"
    parser.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                        help=f"address of the /metrics listener (default {DEFAULT_LISTEN}; "
                             "anything but loopback is exposed to the network)")


def latest_bench_for(config: SparkConfig) -> Callable[[], BenchRecord | None]:
    """The newest bench sweep of this config's model, read at each scrape (the file is small)."""
    from sparktui.domain.bench_history import BenchStore

    store = BenchStore()

    def latest() -> BenchRecord | None:
        runs = [r for r in store.load() if r.model == config.engine.model]
        return runs[-1] if runs else None

    return latest


def start_exporter(config: SparkConfig | None, listen: str,
                   node_names: tuple[str, ...]) -> tuple[ExportState, Exporter]:
    """Parse ``listen``, warn off loopback, start the listener: (ExportState to feed, Exporter).
    Raises ``ValueError`` for a bad address and ``OSError`` when it cannot listen."""
    from sparktui.domain.addresses import is_loopback
    from sparktui.domain.export_state import ExportState
    from sparktui.remote.exporter import Exporter, parse_listen

    host, port = parse_listen(listen)
    if not is_loopback(host):
        print(f"sparktui: warning: the metrics listener on {host}:{port} is reachable from the network "
              "(no authentication); use 127.0.0.1 unless that is meant", file=sys.stderr)
    state = ExportState(node_names)
    exporter = Exporter(state, latest_bench_for(config) if config is not None else None)
    bound_host, bound_port = exporter.start(host, port)
    print(f"serving Prometheus metrics on http://{bound_host}:{bound_port}/metrics", flush=True)
    return state, exporter


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if refuse_example(args, config, "export", ""):
        return ExitStatus.USAGE
    try:
        state, exporter = start_exporter(config, args.listen, tuple(n.name for n in config.nodes))
    except (ValueError, OSError) as exc:
        print(f"sparktui export: --listen {args.listen}: {exc}", file=sys.stderr)
        return ExitStatus.USAGE
    try:
        return run_async(_watch(config, state))
    finally:
        exporter.stop()


async def _watch(config: SparkConfig, state: ExportState) -> int:
    from sparktui.remote.backend import SshBackend
    from sparktui.remote.notifier import Notifier

    backend = SshBackend(config, readonly=True)
    notifier = Notifier(config.notify, config.cluster.name)
    backend.events.observe(notifier, notifier.kinds)
    await backend.run(state)
    return ExitStatus.OK
