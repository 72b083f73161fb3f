"""`sparktui init [HOST…]`: discover the Sparks over SSH and write a commented, validated config.toml.

Hosts are the arguments, or the aliases of ``~/.ssh/config``. Discovery (``sparktui.remote.
init_discovery``) finds each node's hostname, arch, GPU, unified memory, the ConnectX-7 ports with link up
and their RDMA twins, the cable address and that the others answer on it, docker and the images that
carry vLLM, the models (HF cache, ``~/models``) and free disk; ``sparktui.domain.init_setup`` turns that
into a config. The config is validated before it is written, then ``start --dry-run`` shows what
``sparktui start`` would run. Non-interactive: ``--yes`` writes without asking, ``--json`` prints
everything as one object.
"""

from __future__ import annotations

import argparse
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

from sparktui.commands.common import positive_int, print_json, run_async
from sparktui.commands.exit_status import ExitStatus

DEFAULT_OUTPUT = Path("~/.config/sparktui/config.toml")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("exit status: 0 written (or shown), 1 a host unreachable, 2 bad usage (a --set "
                     "value the config refuses)")
    parser.add_argument("hosts", nargs="*", metavar="HOST",
                        help="SSH aliases or addresses (default: the Host aliases of ~/.ssh/config)")
    parser.add_argument("--yes", "-y", action="store_true", help="write the config without asking")
    parser.add_argument("--json", action="store_true", help="print the discovery and the config as JSON")
    parser.add_argument("--no-tui", action="store_true",
                        help="on a terminal, ask y/N instead of opening the picking screen")
    parser.add_argument("--output", "-o", metavar="PATH", default=str(DEFAULT_OUTPUT),
                        help=f"where to write the config (default {DEFAULT_OUTPUT})")
    parser.add_argument("--force", action="store_true", help="replace an existing file at --output")
    parser.add_argument("--head", metavar="NAME", help="the head node (default: the first host)")
    parser.add_argument("--model", metavar="PATH|HF_ID|NAME",
                        help="the model (default: the largest found on every node)")
    parser.add_argument("--recipe", metavar="ID", help="a recipe id (default: the one for the model, if any)")
    parser.add_argument("--image", metavar="REPO:TAG", help="the vLLM image (default: found on every node)")
    parser.add_argument("--runtime", choices=("docker", "host"), help="default: docker when an image "
                        "with vLLM is on every node, else host when vLLM is installed there")
    ssh = parser.add_argument_group("SSH and node settings (for every host; default: ~/.ssh/config)")
    ssh.add_argument("--user")
    ssh.add_argument("--port", type=positive_int)
    ssh.add_argument("--identity-file", metavar="PATH")
    ssh.add_argument("--known-hosts", metavar="PATH", help="an extra known_hosts file")
    ssh.add_argument("--python", default="python3", help="the node's Python (default python3)")
    ssh.add_argument("--proc-root", default="/proc", help=argparse.SUPPRESS)
    ssh.add_argument("--sys-root", default="/sys", help=argparse.SUPPRESS)
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="set any config key, VALUE in TOML (engine.runtime=host, "
                        "'engine.ray_start_args=[\"--num-gpus\", \"1\"]'); applied last, repeatable")


def _hosts(args: argparse.Namespace) -> list[str]:
    from sparktui.domain.init_setup import ssh_config_hosts

    if args.hosts:
        return list(args.hosts)
    path = Path("~/.ssh/config").expanduser()
    try:
        return ssh_config_hosts(path.read_text())
    except OSError:
        return []


def run(args: argparse.Namespace) -> int:
    # Imported here, not for --help: the config and the recipes bring pydantic.
    from sparktui.config import ConfigError, parse_config
    from sparktui.domain.init_setup import InitOptions, parse_set, propose_config, render_toml
    from sparktui.domain.recipes import all_recipes
    from sparktui.remote.init_discovery import discover

    hosts = _hosts(args)
    if not hosts:
        print("sparktui init: no hosts: name them (`sparktui init spark1 spark2`) or add Host entries to "
              "~/.ssh/config", file=sys.stderr)
        return ExitStatus.USAGE
    try:
        sets = [parse_set(s) for s in args.set]
    except ValueError as exc:
        print(f"sparktui init: {exc}", file=sys.stderr)
        return ExitStatus.USAGE
    opts = InitOptions(head=args.head, model=args.model, recipe=args.recipe, image=args.image,
                       runtime=args.runtime, user=args.user, port=args.port, identity_file=args.identity_file,
                       known_hosts=args.known_hosts, python=args.python, proc_root=args.proc_root,
                       sys_root=args.sys_root, sets=sets)
    try:
        recipes = {rid: f.recipe for rid, f in all_recipes().items()}
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return ExitStatus.USAGE
    if opts.recipe and opts.recipe not in recipes:
        known = ", ".join(sorted(recipes))
        print(f"sparktui init: no recipe {opts.recipe!r} (known: {known})", file=sys.stderr)
        return ExitStatus.USAGE
    t0 = time.monotonic()
    if not args.json:
        print(f"discovering {', '.join(hosts)} over SSH …", flush=True)
    facts = run_async(discover(hosts, opts))
    down = [f for f in facts if not f.reachable or f.error]
    if not args.hosts and down:
        # Aliases from ~/.ssh/config may name other machines (a git server): keep the ones that answered.
        for f in down:
            print(f"sparktui init: skipping {f.host} (from ~/.ssh/config): {f.error or 'unreachable'}",
                  file=sys.stderr)
        facts = [f for f in facts if f not in down]
        down = [] if facts else down
    report: dict[str, Any] = {"hosts": [f.to_json() for f in facts],
                              "seconds": round(time.monotonic() - t0, 2)}
    if down:
        port = f":{args.port}" if args.port else ""
        for f in down:
            print(f"sparktui init: {f.host}{port}: {f.error or 'unreachable'}", file=sys.stderr)
        print("sparktui init: nothing written", file=sys.stderr)
        if args.json:
            print_json({**report, "config": None, "written": None})
        return ExitStatus.NOT_WELL
    confirmed = False
    if not args.yes and not args.json and not args.no_tui and sys.stdin.isatty() and sys.stdout.isatty():
        from sparktui.ui.init_app import InitApp

        picked = InitApp(facts, opts, recipes, str(Path(args.output).expanduser())).run()
        if picked is None:
            print("sparktui init: left without writing")
            return ExitStatus.OK
        opts, confirmed = picked, True
    proposal = propose_config(facts, opts, recipes)
    header = ("sparktui config written by `sparktui init` on " + time.strftime("%Y-%m-%d %H:%M")
              + " from what it found on " + ", ".join(hosts)
              + ".\nEvery key is explained in the shipped config.toml and the README's config reference; "
              "edit freely.")
    text = render_toml(proposal.data, proposal.comments, header)
    out = Path(args.output).expanduser()
    try:
        config = parse_config(tomllib.loads(text), out)
    except ConfigError as exc:
        print(text, file=sys.stderr)
        print(f"sparktui init: the proposed config does not validate (a --set value?):\n{exc}",
              file=sys.stderr)
        return ExitStatus.USAGE   # what discovery found is valid: only the user's --set can break it
    written = _write(args, out, text, confirmed)
    # Asked to write (--yes, or Write on the screen) and could not: a failure; only shown: a success.
    code = 1 if (args.yes or confirmed) and not written else 0
    report.update(config=proposal.data, toml=text, notes=proposal.notes, warnings=proposal.warnings,
                  written=str(out) if written else None)
    if args.json:
        print_json(report)
        return code
    _print_summary(facts, proposal)
    if not written:
        print(text)
    if code == 0:
        from sparktui.commands.start import print_plan

        print(f"\n# `sparktui start --dry-run{'' if written else ' --config FILE'}` for this config:")
        print_plan(config, "start")
    return code


def _write(args: argparse.Namespace, out: Path, text: str, confirmed: bool = False) -> bool:
    if out.exists() and not args.force:
        print(f"sparktui init: {out} exists; not replaced (use --force, or --output PATH)", file=sys.stderr)
        return False
    if not args.yes and not confirmed:
        if args.json or not sys.stdin.isatty():
            return False
        answer = input(f"write {out}? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            return False
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(out)
    if not args.json:
        print(f"wrote {out}")
    return True


def _print_summary(facts: list[Any], proposal: Any) -> None:
    for f in facts:
        mem = (f"{f.mem_available / 2**30:.1f}/{f.mem_total / 2**30:.1f} GiB free" if f.mem_total
               else "memory ?")
        cable = [p.device for p in f.rdma if p.active]
        print(f"  {f.host}: {f.hostname} {f.arch}, {', '.join(f.gpus) or 'no GPU'}, {mem}, "
              f"RDMA up: {', '.join(cable) or 'none'}, docker {f.docker or 'no'}, "
              f"{len(f.images)} vLLM image(s), {len(f.models)} model(s)")
    for note in proposal.notes:
        print(f"  note: {note}")
    for warning in proposal.warnings:
        print(f"  warning: {warning}")
