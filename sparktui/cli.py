"""Entry point: ``sparktui`` opens the dashboard; verbs (``status``, ``start`` …) serve scripts.

Each verb lives in ``sparktui.commands.<verb>`` and is imported only when used: the top-level parser knows
the verbs by name and help text only, and a verb's own options are added when argparse reaches that verb
(``_LazyVerbs``). So ``sparktui --help`` loads no command module, and ``sparktui timeline`` never loads
Textual, asyncssh or pydantic (``tests/test_cli_imports.py``; ``benchmarks/bench_cli_start.py``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from sparktui import __version__
from sparktui.commands.exit_status import ExitStatus

VERBS: dict[str, str] = {
    "init": "discover the Sparks over SSH and write a commented, validated config.toml",
    "status": "show each node's reachability, SSH state, host facts, telemetry and the engine state",
    "start": "start the engine across the nodes (preflight, Ray head + workers, vllm serve)",
    "stop": "stop vLLM, Ray and our containers on every node, and verify nothing is left",
    "restart": "stop, then start",
    "logs": "print the head's vLLM log (--follow to keep streaming)",
    "timeline": "read a vLLM log and print its init-stage timeline, facts and failure",
    "history": "list earlier engine starts with their stage durations",
    "plan": "will the start fit each node, how long until ready, how fast can it decode (before starting)",
    "linktest": "measure the cable between the nodes (all_reduce_perf or ib_write_bw) against the pass mark",
    "image": "copy the head's engine image to the nodes that lack it (image sync)",
    "model": "copy the head's model directory to the other nodes over the cable (model sync)",
    "recipes": "list the known-good per-model settings and the vLLM flags each implies",
    "bench": "benchmark the running engine at several concurrencies, with energy per token, and compare",
    "export": "serve node telemetry, engine state and bench results as Prometheus metrics",
    "postmortem": "why a node rebooted or the engine was killed: each node's previous boot and kernel log",
    "supervise": "keep the engine serving with no dashboard open (--unit prints a systemd unit for it)",
    "incidents": "the failures kept with their evidence (logs, stacks, kernel, NCCL); show ID, collect",
    "upgrade": "switch to a new engine image: checked before any downtime, rolled back if it serves worse",
    "rollback": "return to the engine image before the one in use (as `upgrade` switches)",
    "audit": "compare the nodes: image, vLLM, model files, mounts, engine env, libnccl, addresses",
}
#: Verbs that read a file given to them and never the config: no --config in their usage.
WITHOUT_CONFIG = frozenset({"timeline", "history", "recipes", "init"})


def _add_config_option(p: argparse.ArgumentParser, *, verb: bool = False) -> None:
    # On a verb the default is SUPPRESS: otherwise the verb's None overwrites `sparktui --config X verb`.
    p.add_argument("--config", metavar="PATH", help="config file (default: $SPARKTUI_CONFIG, else "
                   "~/.config/sparktui/config.toml (under $XDG_CONFIG_HOME when set; the one `sparktui init` "
                   "writes), else ./config.toml)",
                   default=argparse.SUPPRESS if verb else None)


class _LazyVerbs(argparse._SubParsersAction):
    """The verbs' subparsers, each filled in by its command module only when argparse reaches it."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        name = values[0] if values else None
        sub = self._name_parser_map.get(name) if isinstance(name, str) else None
        if isinstance(name, str) and sub is not None and not sub.get_default("_verb_loaded"):
            _load_verb(name, sub)
        super().__call__(parser, namespace, values, option_string)


def _load_verb(verb: str, p: argparse.ArgumentParser) -> None:
    if verb not in WITHOUT_CONFIG:
        _add_config_option(p, verb=True)
    importlib.import_module(f"sparktui.commands.{verb}").add_arguments(p)
    p.set_defaults(_verb_loaded=True)


def build_parser(*, load_verbs: bool = False) -> argparse.ArgumentParser:
    """The whole command line. ``load_verbs``: fill in every verb's options now (for a test or a document
    that reads them all); otherwise only the verb being parsed is loaded."""
    parser = argparse.ArgumentParser(
        prog="sparktui",
        description="Run one vLLM model across several DGX Spark machines and watch it from one screen. "
        "Without a verb, opens the dashboard (the built-in demo when no config is found).",
    )
    parser.add_argument("--version", action="version", version=f"sparktui {__version__}")
    _add_config_option(parser)
    scenarios = importlib.import_module("sparktui.sim.demo_scenarios")
    listing = "; ".join(f"{name}: {sc.summary}" for name, sc in scenarios.SCENARIOS.items())
    listing = listing.replace("%", "%%")   # argparse formats help with %
    parser.add_argument("--demo", nargs="?", const=scenarios.DEFAULT_SCENARIO, default=None,
                        choices=list(scenarios.SCENARIOS), metavar="SCENARIO",
                        help=f"run on a built-in simulated two-node cluster; SCENARIO (default "
                        f"{scenarios.DEFAULT_SCENARIO}) shows what a start or a failure looks like — "
                        f"{listing}")
    parser.add_argument("--readonly", action="store_true", help="watch only: start/stop/restart disabled")
    importlib.import_module("sparktui.commands.dashboard").add_arguments(parser)
    sub = parser.add_subparsers(dest="verb", metavar="VERB", action=_LazyVerbs)
    for verb, help_text in VERBS.items():
        p = sub.add_parser(verb, help=help_text, description=help_text)
        if load_verbs:
            _load_verb(verb, p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if hasattr(args, "_verb_loaded"):
        del args._verb_loaded
    args.argv = list(sys.argv[1:] if argv is None else argv)   # --web runs the same command per browser tab
    verb = args.verb or "dashboard"
    module = importlib.import_module(f"sparktui.commands.{verb}")
    try:
        return int(module.run(args))
    except KeyboardInterrupt:
        return ExitStatus.INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`sparktui logs | head`): stop quietly, and keep Python's exit-time flush of
        # stdout from raising again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitStatus.BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
