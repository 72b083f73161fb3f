"""The recipe's ``vllm serve`` flags against a new vLLM build's help: what it no longer takes, and what to
write instead (pure; no I/O).

The replacement comes first from the build's own words (an option whose help says "[DEPRECATED] … use --x"),
then from :data:`KNOWN_CHANGES`, a small table of renames and removals with the vLLM change that made them.
A deprecated flag the build still takes is a warning, never a refusal: it still starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sparktui.config import SparkConfig
from sparktui.domain.lifecycle.plan import serve_argv, vllm_nodes
from sparktui.domain.lifecycle.vllm_help import flags_of, normalise
from sparktui.domain.upgrade.serve_help import ServeHelp


@dataclass(frozen=True)
class KnownChange:
    """A flag vLLM dropped or renamed, and where that is written down."""

    flag: str
    #: What to write instead; None when nothing replaces it (``note`` says what to do).
    replacement: str | None
    #: The first vLLM release known to reject it, when a source says so.
    gone_in: str | None
    #: The vLLM change (or report) that says so.
    source: str
    note: str = ""


#: Renames and removals across vLLM releases, each with its source. Only what a source states is here.
KNOWN_CHANGES: dict[str, KnownChange] = {c.flag: c for c in (
    # vllm-project/vllm#21470 deprecated --task for --runner/--convert (July 2025); vllm#30397 removed it;
    # vLLM 0.13.0 rejects it (gpustack/gpustack#3991: "--task=embed can not be recognized by vllm 0.13.0").
    KnownChange("--task", "--runner", "0.13", "vllm-project/vllm#21470, #30397",
                "--runner generate|pooling, and --convert for a pooling model"),
    # vllm-project/vllm#22772 (Aug 2025): "There will be no `--guided-decoding-*` option anymore. Instead, you
    # should use `--structured-outputs-config '{...}'` or `--structured-outputs-config.backend outlines`".
    KnownChange("--guided-decoding-backend", "--structured-outputs-config.backend", None,
                "vllm-project/vllm#22772"),
    # vllm-project/vllm#21739 replaced it with --enable-log-requests (request logging became opt-in);
    # vllm-project/vllm#35723 (March 2026) removed it, "deprecated for 6 months already".
    KnownChange("--disable-log-requests", None, None, "vllm-project/vllm#21739, #35723",
                "request logging is off by default now: drop it (--enable-log-requests turns it on)"),
    # Its own help text in vLLM 0.6-0.8: "[DEPRECATED] block manager v1 has been removed … Setting this flag
    # to True or False has no effect on vLLM behavior."
    KnownChange("--use-v2-block-manager", None, None, "its help text in vLLM 0.6-0.8",
                "it had no effect since block manager v1 was removed: drop it"),
)}


@dataclass(frozen=True)
class FlagFinding:
    """One of the recipe's flags the new build does not take (``missing``) or calls deprecated."""

    flag: str                     # as the recipe writes it (``--max_model_len=4``)
    missing: bool
    replacement: str | None = None
    #: Where the replacement comes from: "vLLM's help" or a :class:`KnownChange`'s source.
    source: str = ""
    gone_in: str | None = None
    note: str = ""

    def describe(self, version: str | None) -> str:
        """``--task: not accepted by vLLM 0.14.0 (renamed --runner in 0.13; …)``."""
        name = normalise(self.flag)
        build = f"vLLM {version}" if version else "the new vLLM"
        head = f"{name}: not accepted by {build}" if self.missing else f"{name}: deprecated in {build}"
        why: list[str] = []
        if self.replacement:
            when = f" in {self.gone_in}" if self.gone_in else ""
            why.append(f"renamed {self.replacement}{when}")
        elif self.gone_in:
            why.append(f"removed in {self.gone_in}")
        if self.note:
            why.append(self.note)
        if self.source and self.source != "vLLM's help":
            why.append(self.source)
        return head + (f" ({'; '.join(why)})" if why else "")


@dataclass(frozen=True)
class FlagReport:
    version: str | None
    checked: tuple[str, ...]
    findings: tuple[FlagFinding, ...]
    #: The help was vLLM ≥ 0.10's group summary: nothing can be judged (run ``--help=all``).
    undecided: bool = False

    @property
    def missing(self) -> tuple[FlagFinding, ...]:
        return tuple(f for f in self.findings if f.missing)

    @property
    def deprecated(self) -> tuple[FlagFinding, ...]:
        return tuple(f for f in self.findings if not f.missing)

    @property
    def ok(self) -> bool:
        """No flag is refused (deprecations only warn); an undecided check is not ok."""
        return not self.undecided and not self.missing

    def lines(self) -> list[str]:
        if self.undecided:
            return ["vLLM printed only its option groups: run `vllm serve --help=all` to check the flags"]
        return [f.describe(self.version) for f in self.findings]

    def message(self) -> str:
        if self.ok and not self.findings:
            build = f"vLLM {self.version}" if self.version else "the new vLLM"
            return f"{build} takes every flag the recipe passes ({len(self.checked)})"
        return "; ".join(self.lines())


def recipe_flags(config: SparkConfig) -> list[str]:
    """The flag words sparktui passes to ``vllm serve`` for this config (every rank's, engine.extra_args
    included), in order, each once: exactly what a start would send."""
    out: list[str] = []
    for rank, _node in enumerate(vllm_nodes(config)):
        argv = serve_argv(config, rank)
        for word in flags_of(argv[len(config.engine.vllm_command) + 2:]):   # past "vllm serve MODEL"
            if normalise(word) not in (normalise(w) for w in out):
                out.append(word)
    return out


def _finding(flag: str, help_: ServeHelp) -> FlagFinding | None:
    name = normalise(flag)
    if help_.accepts(flag):
        option = help_.option(flag)
        if option is None or not option.deprecated:
            return None
        known = KNOWN_CHANGES.get(name)
        replacement = option.replacement or (known.replacement if known else None)
        source = "vLLM's help" if option.replacement or known is None else known.source
        return FlagFinding(flag, False, replacement, source, note=option.deprecation_note if not replacement
                           else "")
    known = KNOWN_CHANGES.get(name)
    if known is not None:
        return FlagFinding(flag, True, known.replacement, known.source, known.gone_in, known.note)
    return FlagFinding(flag, True)


def check_serve_flags(flags: Sequence[str], help_: ServeHelp) -> FlagReport:
    """Each flag word (``flags_of`` of an argv) against the build's help."""
    words = flags_of(flags)
    if help_.summary or not help_.flags:
        return FlagReport(help_.version, tuple(words), (), undecided=True)
    findings = [f for f in (_finding(w, help_) for w in words) if f is not None]
    return FlagReport(help_.version, tuple(words), tuple(findings))


def check_recipe(config: SparkConfig, help_: ServeHelp) -> FlagReport:
    """The recipe's flags (:func:`recipe_flags`) against the build's help."""
    return check_serve_flags(recipe_flags(config), help_)
