"""What an engine image makes of the stand-in: its vLLM version, the flags its vLLM lacks, how fast it serves.

The test bed stages ``sparktui upgrade``'s cases without a GPU by building tiny images ``FROM`` the CI image
with ``ENV`` lines (``tests/testbed/docker_image.py``); the stand-in reads them:

  SPARKTUI_STANDIN_VERSION=0.22.0     ``vllm --version``, ``/version`` and the log's version lines say
                                      it; from 0.10 on, ``vllm serve --help`` prints only the option groups
                                      and ``--help=all`` every flag (as vLLM does), before 0.10
                                      ``--help=all`` is argparse's error
  SPARKTUI_STANDIN_LACKS=--foo,--bar  this vLLM lacks those flags: absent from ``--help``, and ``vllm serve …
                                      --foo`` exits 2 with vLLM's "vllm serve: error: unrecognized arguments"
  SPARKTUI_STANDIN_SPEED=0.5          serves at this share of the speed (token rate × 0.5, TTFT ÷ 0.5): a
                                      slower image (SPARKTUI_STANDIN_TOKEN_RATE stays the base rate)

A broken image needs nothing new: ``SPARKTUI_STANDIN_FAIL=crash_after_ready:0`` or ``…=oom`` (its vllm fails
at start), or an image whose ``vllm`` is not the stand-in at all.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Mapping

from sparktui.domain.lifecycle.vllm_help import normalise

VERSION_ENV = "SPARKTUI_STANDIN_VERSION"
LACKS_ENV = "SPARKTUI_STANDIN_LACKS"
SPEED_ENV = "SPARKTUI_STANDIN_SPEED"
#: The first vLLM whose plain ``serve --help`` lists only the option groups (``--help=all``: every flag).
GROUPED_HELP_SINCE = (0, 10)


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def reported_version(recorded: str, environ: Mapping[str, str] | None = None) -> str:
    """The version this image's vLLM says it is: the image's override, else the recording's."""
    return _env(environ).get(VERSION_ENV, "").strip() or recorded


def lacked_flags(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The flags this image's vLLM lacks, normalised (``--max_model_len`` → ``--max-model-len``)."""
    raw = _env(environ).get(LACKS_ENV, "")
    return frozenset(normalise(w) for w in raw.replace(",", " ").split() if w.startswith("-"))


def speed(environ: Mapping[str, str] | None = None) -> float:
    """The serving speed factor (0 < x ≤ 100); anything else is 1."""
    try:
        value = float(_env(environ).get(SPEED_ENV, "") or 1.0)
    except ValueError:
        return 1.0
    return value if 0.0 < value <= 100.0 else 1.0


def hide_lacked(parser: argparse.ArgumentParser, lacks: frozenset[str]) -> None:
    """Leave the lacked flags out of the help (parsing rejects them: :func:`lacked_in`)."""
    for action in parser._actions:
        if any(normalise(o) in lacks for o in action.option_strings):
            action.help = argparse.SUPPRESS


def lacked_in(args: Iterable[str], lacks: frozenset[str]) -> list[str]:
    """The words of a ``vllm serve`` argument list that name a lacked flag (``--foo`` or ``--foo=1``)."""
    return [a for a in args if a.startswith("-") and normalise(a) in lacks]


def grouped_summary(parser: argparse.ArgumentParser) -> str:
    """vLLM ≥ 0.10's plain ``vllm serve --help``: the usage, the groups, and where the flags are."""
    groups = [g.title for g in parser._action_groups if g.title]
    width = max(len(t) for t in groups) + 1 if groups else 0
    lines = [parser.format_usage().rstrip(), "", parser.description or "", "",
             "Search by using: `--help=<ConfigGroup>` to explore options by section (e.g.,",
             "--help=ModelConfig, --help=Frontend)",
             "  Use `--help=all` to show all available flags at once.",
             "", "Config Groups:"]
    lines += [f"  {title:<{width}}" for title in groups]
    lines += ["", "For full list:            vllm serve --help=all"]
    return "\n".join(lines) + "\n"
