"""`sparktui init [HOST…]`: discover the Sparks over SSH and write a commented, validated config.toml.

Hosts are the arguments, or the aliases of ``~/.ssh/config``. Discovery (``sparktui.remote.
init_discovery``) finds each node's hostname, arch, GPU, unified memory, the ConnectX-7 ports with link up
and their RDMA twins, the cable address and that the others answer on it, docker and the images that
carry vLLM, the models (HF cache, ``~/models``) and free disk; ``sparktui.domain.init_setup`` turns that
into a config. The config is validated before it is written, then ``start --dry-run`` shows what
``sparktui start`` would run. It goes to the user's config (``config.user_config_path``), the first place
the lookup reads. On a terminal the picking screen chooses; ``--no-tui`` prints the config, then asks.
``--yes`` writes without asking; ``--json`` prints everything as one object (and writes only with
``--yes``). Whenever nothing is written it says so; asked to write and unable to (no terminal to ask on,
the file there, an OS error) it exits 1, while leaving the screen or answering no is a choice (0).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparktui.commands.common import positive_int, print_json, run_async
from sparktui.commands.exit_status import ExitStatus

if TYPE_CHECKING:   # init_setup brings the recipes and pydantic: loaded when the verb runs, not for --help
    from sparktui.domain.init_setup import DiscoveredHost, InitOptions


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("exit status: 0 written, or left/declined without writing, or shown with --json; "
                     "1 a host unreachable, or asked to write and could not (no terminal to ask on "
                     "without --yes, the file exists without --force, an OS error); 2 bad usage (a --set "
                     "value the config refuses)")
    parser.add_argument("hosts", nargs="*", metavar="HOST",
                        help="SSH aliases or addresses (default: the Host aliases of ~/.ssh/config)")
    parser.add_argument("--yes", "-y", action="store_true",
                        help="write the config without asking (needed when there is no terminal to ask on)")
    parser.add_argument("--json", action="store_true", help="print the discovery and the config as JSON")
    parser.add_argument("--no-tui", action="store_true",
                        help="on a terminal, print the config and ask y/N instead of opening the picking "
                        "screen")
    parser.add_argument("--output", "-o", metavar="PATH", default=None,
                        help="where to write the config (default: the user's config, the first place "
                        "sparktui looks: $XDG_CONFIG_HOME/sparktui/config.toml, else "
                        "~/.config/sparktui/config.toml)")
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
    from sparktui.config import ConfigError, user_config_path
    from sparktui.domain.init_setup import InitOptions, parse_set
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
    if args.output is None:
        args.output = str(user_config_path())
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
    seconds = round(time.monotonic() - t0, 2)
    if down:
        port = f":{args.port}" if args.port else ""
        for f in down:
            print(f"sparktui init: {f.host}{port}: {f.error or 'unreachable'}", file=sys.stderr)
        print("sparktui init: nothing written", file=sys.stderr)
        if args.json:
            print_json({"hosts": [f.to_json() for f in facts], "seconds": seconds, "config": None,
                        "written": None})
        return ExitStatus.NOT_WELL
    confirmed = False
    if not args.yes and not args.json and not args.no_tui and sys.stdin.isatty() and sys.stdout.isatty():
        from sparktui.ui.init_app import InitApp

        picked = InitApp(facts, opts, recipes, str(Path(args.output).expanduser())).run()
        if picked is None:
            print("sparktui init: left the picking screen: nothing written")
            return ExitStatus.OK
        opts, confirmed = picked, True
    return conclude(args, hosts, facts, opts, recipes, confirmed, seconds)


def conclude(args: argparse.Namespace, hosts: list[str], facts: list[DiscoveredHost], opts: InitOptions,
             recipes: dict[str, Any], confirmed: bool = False, seconds: float = 0.0) -> int:
    """From the discovered ``facts`` and the options (picked on the screen when ``confirmed``): propose the
    config, validate it, show it, write it when asked to (``--yes``, the screen's Write, or y at the
    question that follows the config), say what happened, and return the exit status."""
    from sparktui.config import ConfigError, parse_config
    from sparktui.domain.init_setup import propose_config, render_toml

    proposal = propose_config(facts, opts, recipes)
    out = Path(args.output).expanduser()
    text = render_toml(proposal.data, proposal.comments, _header(hosts, "written"))
    # What is shown before (or instead of) writing says it is a proposal: nothing is written yet.
    shown = render_toml(proposal.data, proposal.comments, _header(hosts, "proposed"))
    try:
        config = parse_config(tomllib.loads(text), out)
    except ConfigError as exc:
        print(shown, file=sys.stderr)
        print(f"sparktui init: the proposed config does not validate (a --set value?):\n{exc}\n"
              "sparktui init: nothing written", file=sys.stderr)
        return ExitStatus.USAGE   # what discovery found is valid: only the user's --set can break it
    report: dict[str, Any] = {"hosts": [f.to_json() for f in facts], "seconds": seconds,
                              "config": proposal.data, "notes": proposal.notes, "warnings": proposal.warnings}
    if args.json:
        # --json alone shows; with --yes it also writes.
        code, written = _write(out, text, args.force, quiet=True) if args.yes else (0, False)
        print_json({**report, "toml": text if written else shown, "written": str(out) if written else None})
        return code
    _print_summary(facts, proposal)
    if args.yes or confirmed:
        code, written = _write(out, text, args.force)
    else:
        print(shown)
        code, written = _ask_and_write(out, text, args.force)
    if code == 0:
        _print_plan(out if written else None, config)
    return code


def _header(hosts: list[str], done: str) -> str:
    return (f"sparktui config {done} by `sparktui init` on " + time.strftime("%Y-%m-%d %H:%M")
            + " from what it found on " + ", ".join(hosts)
            + ".\nEvery key is explained in the shipped config.toml and in docs/configuration.md; "
            "edit freely.")


def _ask_and_write(out: Path, text: str, force: bool) -> tuple[int, bool]:
    """After the config was shown: ask on the terminal whether to write it. Returns the exit status and
    whether it was written. Declining is the user's choice (0); no terminal to ask on is a request to
    write that could not be met (1)."""
    if not sys.stdin.isatty():
        print(f"sparktui init: nothing written: no terminal to ask on; pass --yes to write {out} "
              "(or --json to only show the config)", file=sys.stderr)
        return ExitStatus.NOT_WELL, False
    if _refuse_existing(out, force):
        return ExitStatus.NOT_WELL, False
    try:
        answer = input(f"write {out}? [y/N] ").strip().lower()
    except EOFError:
        answer = ""
    if answer not in ("y", "yes"):
        print("sparktui init: nothing written (answered no)")
        return ExitStatus.OK, False
    return _write(out, text, force)


def _refuse_existing(out: Path, force: bool) -> bool:
    if out.exists() and not force:
        print(f"sparktui init: nothing written: {out} exists; not replaced (use --force, or --output PATH)",
              file=sys.stderr)
        return True
    return False


def _write(out: Path, text: str, force: bool, quiet: bool = False) -> tuple[int, bool]:
    """Write the config (atomically: a half-written config never replaces a good one). Returns the exit
    status and whether it was written, having said why not."""
    if _refuse_existing(out, force):
        return ExitStatus.NOT_WELL, False
    tmp = out.with_name(out.name + ".tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text)
        tmp.replace(out)
    except OSError as exc:
        with contextlib.suppress(OSError):   # a half-written temp file, if it got that far
            tmp.unlink(missing_ok=True)
        where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(out) else ""
        print(f"sparktui init: nothing written: cannot write {out}: {exc.strerror or exc}{where}",
              file=sys.stderr)
        return ExitStatus.NOT_WELL, False
    if not quiet:
        print(f"wrote {out}")
    return ExitStatus.OK, True


def _print_plan(written: Path | None, config: Any) -> None:
    """``start --dry-run`` for the config, and, when the lookup would not find the file just written, which
    file it finds instead and how to point sparktui at this one."""
    from sparktui.commands.start import print_plan
    from sparktui.config import find_config

    used = find_config(None)
    found = written is not None and used is not None and used.resolve() == written.resolve()
    if written is not None and not found:
        reads = (f"reads {used}" + (" ($SPARKTUI_CONFIG)" if os.environ.get("SPARKTUI_CONFIG") else "")
                 + f", not {written}" if used is not None else f"does not look at {written}")
        print(f"note: sparktui without --config {reads}: pass --config {written}")
    flag = "" if found else f" --config {written or 'FILE'}"
    print(f"\n# `sparktui start --dry-run{flag}` for this config:")
    print_plan(config, "start")


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
