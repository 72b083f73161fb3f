"""``sparktui [--config PATH] [--demo [SCENARIO]] [--readonly]``: the dashboard.

Which backend: ``--demo`` → the built-in simulation; an explicit config (``--config`` or
``$SPARKTUI_CONFIG``) → the real nodes over SSH; a config found by the default lookup that is still the
shipped example (``cluster.example = true``) → the demo, with a notice saying how to point it at real Sparks;
no config at all → the demo. Textual is imported only here, when the dashboard really opens.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sparktui.commands.exit_status import ExitStatus

if TYPE_CHECKING:   # the config module brings pydantic: loaded when the dashboard opens, not for --help
    from collections.abc import Awaitable, Callable, Mapping

    from sparktui.config import SparkConfig
    from sparktui.domain.bench import BenchRecord, PowerTap
    from sparktui.domain.bench_chart import BenchDone
    from sparktui.domain.events import ClusterBackend, EventObserver
    from sparktui.domain.history import RunRecord



def example_notice(path: Path, environ: Mapping[str, str]) -> str:
    """The demo's notice when the default lookup found only the shipped example, naming what it looked at."""
    from sparktui.commands.common import looked_at, shown_path
    from sparktui.config import user_config_path

    return (f"This is the demo: no config of yours found ({looked_at(path, environ)}). To watch your Sparks, "
            f"run `sparktui init` (it writes {user_config_path(environ)}), or describe them in "
            f"{shown_path(path)} and "
            "delete its `example = true` line, or run sparktui --config PATH.")


def no_config_notice(environ: Mapping[str, str]) -> str:
    """The demo's notice when no config was found at all, naming where it looked."""
    from sparktui.commands.common import looked_at
    from sparktui.config import user_config_path

    return (f"This is the demo: no config found ({looked_at(None, environ)}). To watch your Sparks, run "
            f"`sparktui init` (it writes {user_config_path(environ)}), or run sparktui --config PATH.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Hidden options for making the README's screenshot and for reproducible demo screens."""
    parser.add_argument("--screenshot", metavar="SVG", help=argparse.SUPPRESS)
    parser.add_argument("--screenshot-after", metavar="SECONDS", type=float, default=20.0,
                        help=argparse.SUPPRESS)
    parser.add_argument("--demo-frozen-at", metavar="SECONDS", type=float, default=None,
                        help=argparse.SUPPRESS)
    parser.add_argument("--size", metavar="COLSxROWS", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--web", action="store_true",
                        help="serve the dashboard to a browser (textual-serve) instead of this terminal")
    parser.add_argument("--host", default="127.0.0.1",
                        help="with --web: the address to listen on (default 127.0.0.1, loopback only)")
    parser.add_argument("--port", type=int, default=8566, help="with --web: the port (default 8566)")
    parser.add_argument("--export", metavar="HOST:PORT", default=None,
                        help="also serve Prometheus metrics from the dashboard (see `sparktui export`)")


@dataclass(frozen=True)
class Choice:
    demo: bool
    config: SparkConfig | None
    notice: str | None = None


def choose(args: argparse.Namespace, environ: dict[str, str] | None = None) -> Choice:
    """Pick demo or real backend from the flags and the config lookup (see the module docstring)."""
    from sparktui.config import find_config, load_config

    env = dict(os.environ) if environ is None else environ
    explicit = getattr(args, "config", None) or env.get("SPARKTUI_CONFIG")
    if getattr(args, "demo", False):
        return Choice(True, _load_quiet(find_config(explicit, env)) if explicit else None)
    path = find_config(getattr(args, "config", None), env)
    if path is None:
        return Choice(True, None, no_config_notice(env))
    config = load_config(path)
    if config.cluster.example and not explicit:
        return Choice(True, config, example_notice(path, env))
    return Choice(False, config)


def _load_quiet(path: Path | None) -> SparkConfig | None:
    from sparktui.config import load_config

    return load_config(path) if path is not None else None


def run(args: argparse.Namespace) -> int:
    from sparktui.config import ConfigError, UIConfig
    from sparktui.ui.web import served_by

    web_server = served_by()   # this process is a `--web` tab's
    if web_server is not None:
        from sparktui.ui.web_tab import end_with_server

        end_with_server(web_server)

    try:
        choice = choose(args)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return ExitStatus.USAGE
    if getattr(args, "web", False):
        from sparktui.ui.web import serve

        return serve(getattr(args, "argv", sys.argv[1:]), args.host, args.port)
    # ``--readonly``; the backend adds ``[ui] readonly`` and is the one the dashboard asks.
    readonly = bool(getattr(args, "readonly", False))
    ui = choice.config.ui if choice.config is not None else UIConfig()
    screenshot = None
    if getattr(args, "screenshot", None):
        screenshot = (Path(args.screenshot), float(args.screenshot_after))

    from sparktui.ui.app import AppSwitches, SparkApp

    backend: ClusterBackend
    history: Callable[[], list[RunRecord]] | None = None
    clock: Callable[[], float] | None = None   # the wall clock, unless the cluster is simulated
    if choice.demo:
        from sparktui.sim.demo import DemoBackend

        frozen = getattr(args, "demo_frozen_at", None)
        demo_arg = getattr(args, "demo", None)
        # `--demo` gives a scenario name; no config at all (demo_arg None) plays the default start.
        scenario = demo_arg if isinstance(demo_arg, str) else "start"
        demo = DemoBackend(readonly=readonly or ui.readonly, frozen_at=frozen, scenario=scenario)
        # Its own (made-up) history and its own clock, given here: observers may wrap the backend.
        backend, history, clock = demo, demo.history_runs, demo.clock
        roles: dict[str, str] = dict(demo.node_roles)
        addresses: dict[str, str] = {}
        name = "demo: two simulated DGX Sparks"
    else:
        assert choice.config is not None
        from sparktui.remote.backend import SshBackend

        real = backend = SshBackend(choice.config, readonly=readonly)
        roles = {n.name: n.role for n in choice.config.nodes}
        addresses = {n.address: n.name for n in choice.config.nodes}
        name = choice.config.cluster.name
        from sparktui.domain.history import HistoryStore, setup_of

        engine = choice.config.engine

        def history() -> list[RunRecord]:  # earlier starts of the same model and image, for ETAs
            return HistoryStore().runs_for(*setup_of(engine))

    bench: Callable[[], Awaitable[BenchDone]] | None = None
    bench_history: Callable[[], list[BenchRecord]] | None = None
    if choice.demo:   # simulated: figures made up in line with the demo's serving, kept in memory
        from sparktui.sim.demo_bench import DemoBench

        demo_bench = DemoBench(instant=getattr(args, "demo_frozen_at", None) is not None)
        bench_history = demo_bench.history

        def bench() -> Awaitable[BenchDone]:
            return demo_bench.run(demo.clock())
    linktest: Callable[[], Awaitable[str]] | None = None
    fix: Callable[[str], Awaitable[str]] | None = None
    power_tap = None
    if not choice.demo and choice.config is not None:
        from sparktui.commands.bench import quick_bench
        from sparktui.domain.bench import PowerTap

        power_tap = PowerTap()
        config = choice.config

        def bench() -> Awaitable[BenchDone]:  # the `b` key: through the head's link, power from our probe
            return quick_bench(config, real.transports[config.head.name], power_tap)

        def bench_history() -> list[BenchRecord]:  # the `B` key: this cluster's saved runs
            from sparktui.domain.bench_history import BenchStore

            return [r for r in BenchStore().load() if r.cluster == config.cluster.name]

        async def linktest() -> str:  # the `L` key: what `sparktui linktest` measures and keeps
            from sparktui.commands.linktest import linktest_kept

            return (await linktest_kept(config)).message

        async def fix(fix_id: str) -> str:  # the `F` key: image sync / model sync, as the verbs run them
            from sparktui.commands.fixes import run_fix

            return await run_fix(config, fix_id)

    backend, stop_exporter = _observed(backend, choice.config, getattr(args, "export", None), power_tap)
    app = SparkApp(backend, ui, roles=roles, cluster_name=name, notice=choice.notice, clock=clock,
                   node_addresses=addresses, history=history, bench=bench, bench_history=bench_history,
                   linktest=linktest, fix=fix, switches=AppSwitches(screenshot=screenshot))
    if web_server is not None:
        from sparktui.ui.web_tab import TabDriver

        app.driver_class = TabDriver
    size = _size(getattr(args, "size", None))
    if screenshot is not None:
        # Headless: the screenshot is made by the app itself, at the size asked for (default 160×48).
        app.run(headless=True, size=size or (160, 48))
    else:
        app.run(size=size)
    stop_exporter()
    return int(app.return_code or 0)


def _observed(backend: ClusterBackend, config: SparkConfig | None, export: str | None,
              *extra: PowerTap | None) -> tuple[ClusterBackend, Callable[[], None]]:
    """The backend with the event stream's observers: ``[notify]`` (real nodes), the exporter (with
    ``--export``) and ``extra`` ones. Returns it and a function that stops the exporter."""
    from sparktui.domain.events import SimulatedCluster

    observers: list[EventObserver] = [o for o in extra if o is not None]
    stop: Callable[[], None] = lambda: None  # noqa: E731
    if export:
        from sparktui.commands.export import start_exporter

        try:
            state, exporter = start_exporter(config, export, tuple(backend.node_names))
        except (ValueError, OSError) as exc:
            print(f"sparktui: --export {export}: {exc}", file=sys.stderr)
            raise SystemExit(ExitStatus.USAGE) from None
        observers.append(state)
        stop = exporter.stop
    if config is not None and config.notify.enabled and not isinstance(backend, SimulatedCluster):
        from sparktui.remote.notifier import Notifier

        observers.append(Notifier(config.notify, config.cluster.name))
    for observer in observers:
        backend.events.observe(observer, observer.kinds)
    return backend, stop


def _size(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    cols, _, rows = text.lower().partition("x")
    return int(cols), int(rows)
