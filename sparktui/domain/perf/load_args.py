"""A recipe's fast-load flags (its ``load_args``), kept for a start only where the image's vLLM accepts
them (pure but for reading the recipe).

On a DGX Spark vLLM's default (mmap) read of the weights is the start's slowest part by far (field notes:
8 min 41 s through mmap, 1 min 28 s with ``--safetensors-load-strategy eager``); but a flag an image's vLLM
does not know stops the start ("unrecognized arguments"). So the Spark recipes name the fast path as
``load_args`` (a recipe key, not merged into the config), and each start keeps those the image's ``vllm
serve --help`` (read by preflight) accepts, with the value its help lists, and drops the others, saying
so. No help, or only vLLM >= 0.10's group summary: nothing is kept (nothing is known). A flag
``engine.extra_args`` already gives is the user's word and wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sparktui.config import SparkConfig
from sparktui.domain.config_faults import ConfigError
from sparktui.domain.events import StepStatus, StepView
from sparktui.domain.lifecycle.vllm_help import normalise
from sparktui.domain.recipes import find_recipe
from sparktui.domain.upgrade.serve_help import parse_serve_help


@dataclass(frozen=True)
class GatedLoadArgs:
    kept: tuple[str, ...] = ()
    #: (flag, why) for each flag left out.
    dropped: tuple[tuple[str, str], ...] = ()

    def message(self) -> str:
        parts = []
        if self.kept:
            parts.append("using " + " ".join(self.kept))
        parts += [f"{flag} left out: {why}" for flag, why in self.dropped]
        return "; ".join(parts) or "no fast-load flags"


def pairs(args: Sequence[str]) -> list[tuple[str, str | None]]:
    """``["--a", "x", "--b", "--c=y"]`` → ``[("--a", "x"), ("--b", None), ("--c", "y")]``."""
    out: list[tuple[str, str | None]] = []
    i = 0
    while i < len(args):
        word = args[i]
        if "=" in word and word.startswith("--"):
            flag, value = word.split("=", 1)
            out.append((flag, value))
            i += 1
        elif i + 1 < len(args) and not args[i + 1].startswith("-"):
            out.append((word, args[i + 1]))
            i += 2
        else:
            out.append((word, None))
            i += 1
    return out


def gate_load_args(load_args: Sequence[str], extra_args: Sequence[str], help: Any | None) -> GatedLoadArgs:
    """``help``: a :class:`~sparktui.domain.upgrade.serve_help.ServeHelp` (None: not read)."""
    given = {normalise(a) for a in extra_args if a.startswith("-")}
    kept: list[str] = []
    dropped: list[tuple[str, str]] = []
    for flag, value in pairs(load_args):
        name = normalise(flag)
        if name in given:
            dropped.append((flag, "engine.extra_args gives it"))
        elif help is None or help.summary:
            dropped.append((flag, "the image's vllm serve --help was not read in full"))
        elif not help.accepts(name):
            dropped.append((flag, f"vLLM {help.version or '(version unknown)'} does not accept it"))
        elif value is not None and not _lists(help.option(name), value):
            dropped.append((flag, f"this vLLM's --help does not list {value!r} for it"))
        else:
            kept += [flag] if value is None else [flag, value]
    return GatedLoadArgs(tuple(kept), tuple(dropped))


def _lists(option: Any, value: str) -> bool:
    """Whether the option's help names ``value`` among its choices (``"eager"``, ``{lazy,eager}``); an
    option whose help enumerates nothing takes any value."""
    text = getattr(option, "text", "") or ""
    spellings = " ".join(getattr(option, "spellings", ()))
    if "{" in spellings:
        return value in spellings
    if '"' not in text:
        return True
    return f'"{value}"' in text


def recipe_load_args(config: SparkConfig) -> tuple[str, ...]:
    """The fast-load flags of the recipe ``[engine]`` names (none without one, or when it cannot be read:
    the config's load already reported a broken recipe)."""
    rid = config.engine.recipe
    if not rid:
        return ()
    try:
        found = find_recipe(rid)
    except ConfigError:
        return ()
    return found.recipe.load_args if found is not None else ()


def with_load_args(config: SparkConfig, help_text: str | None,
                   load_args: Sequence[str] | None = None) -> tuple[SparkConfig, GatedLoadArgs | None]:
    """The config this start runs: the recipe's ``load_args`` (or ``load_args``) the image accepts appended
    to ``engine.extra_args`` (None: no load flags named, nothing to say)."""
    e = config.engine
    wanted = recipe_load_args(config) if load_args is None else tuple(load_args)
    if not wanted:
        return config, None
    gated = gate_load_args(wanted, e.extra_args, parse_serve_help(help_text) if help_text else None)
    if not gated.kept:
        return config, gated
    engine = e.model_copy(update={"extra_args": (*e.extra_args, *gated.kept)})
    return config.model_copy(update={"engine": engine}), gated


def load_args_step(config: SparkConfig, help_text: str | None) -> tuple[SparkConfig, StepView | None]:
    """``with_load_args`` with the start's row saying what was kept or left out (None: nothing named)."""
    config, gated = with_load_args(config, help_text)
    if gated is None:
        return config, None
    status = StepStatus.OK if gated.kept else StepStatus.WARNING
    return config, StepView(name="fast weights load", node=config.head.name, status=status,
                            message=gated.message())
