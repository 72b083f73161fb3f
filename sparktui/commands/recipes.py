"""`sparktui recipes [ID] [--json]`: the known-good per-model settings and the flags each implies.

Shipped recipes and the user's (``~/.config/sparktui/recipes/*.toml``, or ``$SPARKTUI_RECIPES``); a user
recipe with a shipped id replaces it. Use one with ``[engine] recipe = "ID"`` (explicit keys win).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import TYPE_CHECKING, Any

from sparktui.commands.common import print_json
from sparktui.commands.exit_status import ExitStatus

if TYPE_CHECKING:   # the recipes bring pydantic: loaded when the verb runs, not for its --help
    from sparktui.domain.recipes import FoundRecipe


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", nargs="?", metavar="ID", help="show only this recipe, in full")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def as_dict(found: FoundRecipe) -> dict[str, Any]:
    r = found.recipe
    return {
        "id": found.id, "name": r.name, "source": "shipped" if found.shipped else "user",
        "path": str(found.path),
        "model": r.model, "description": r.description,
        "tensor_parallel_size": r.tensor_parallel_size, "pipeline_parallel_size": r.pipeline_parallel_size,
        "flags": r.flags(), "env": dict(r.env), "weights_gib": r.weights_gib, "min_vllm": r.min_vllm,
        "notes": r.notes, "sources": list(r.sources),
    }


def render(found: FoundRecipe, full: bool) -> str:
    r = found.recipe
    where = "shipped" if found.shipped else f"user: {found.path}"
    lines = [f"{found.id}  —  {r.name} ({where})"]
    if r.model:
        size = f"  ({r.weights_gib:g} GiB of weights)" if r.weights_gib else ""
        lines.append(f"  model    {r.model}{size}")
    parallel = [f"TP {r.tensor_parallel_size}" if r.tensor_parallel_size else "",
                f"PP {r.pipeline_parallel_size}" if r.pipeline_parallel_size else ""]
    if any(parallel):
        lines.append("  engine   " + ", ".join(p for p in parallel if p))
    if r.flags():
        lines.append("  flags    " + shlex.join(r.flags()))
    if r.env:
        lines.append("  env      " + " ".join(f"{k}={shlex.quote(v)}" for k, v in r.env.items()))
    if r.min_vllm:
        lines.append(f"  vLLM     ≥ {r.min_vllm}")
    if full:
        if r.description:
            lines.append(f"  about    {r.description}")
        for note in r.notes.strip().splitlines():
            lines.append(f"  note     {note.strip()}")
        for src in r.sources:
            lines.append(f"  source   {src}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from sparktui.config import ConfigError
    from sparktui.domain.recipes import all_recipes, user_dirs

    try:
        found = all_recipes()
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return ExitStatus.USAGE
    if args.id:
        if args.id not in found:
            print(f"sparktui recipes: no recipe {args.id!r} (known: {', '.join(sorted(found))})",
                  file=sys.stderr)
            return ExitStatus.USAGE
        chosen = [found[args.id]]
    else:
        chosen = [found[k] for k in sorted(found)]
    if args.json:
        print_json([as_dict(f) for f in chosen])
        return ExitStatus.OK
    print("\n\n".join(render(f, full=bool(args.id)) for f in chosen))
    if not args.id:
        dirs = ", ".join(str(d) for d in user_dirs())
        print(f"\nuse one with [engine] recipe = \"ID\" (your config's keys win); "
              f"your own recipes go in {dirs}")
    return ExitStatus.OK
