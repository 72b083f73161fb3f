"""Which flags a vLLM version accepts, read from its own ``vllm serve --help`` text.

vLLM ≥ 0.10 prints only the option groups for ``--help`` and everything for ``--help=all``; older
versions reject ``--help=all``. Both texts are argparse help: an option line starts (after indent) with
``-`` and lists its spellings separated by ``, ``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_FLAG = re.compile(r"^--?[A-Za-z][\w.-]*$")
_VERSION = re.compile(r"(\d+\.\d+(?:\.\d+)?(?:[.+-]?[\w.]+)?)")

#: Flags sparktui sets from config.toml; in ``extra_args`` they would fight the generated ones.
RESERVED: dict[str, str] = {
    "--tensor-parallel-size": "engine.tensor_parallel_size",
    "-tp": "engine.tensor_parallel_size",
    "--pipeline-parallel-size": "engine.pipeline_parallel_size",
    "-pp": "engine.pipeline_parallel_size",
    "--distributed-executor-backend": "engine.executor",
    "--port": "engine.api_port",
    "--served-model-name": "engine.served_model_name",
    "--nnodes": "engine.executor = \"mp\" (set per node by sparktui)",
    "--node-rank": "engine.executor = \"mp\" (set per node by sparktui)",
    "--master-addr": "engine.executor = \"mp\" (set per node by sparktui)",
    "--master-port": "engine.master_port",
    "--headless": "engine.executor = \"mp\" (set per node by sparktui)",
}


def normalise(flag: str) -> str:
    """``--max_model_len=4`` → ``--max-model-len`` (vLLM accepts ``_`` for ``-`` in long flags)."""
    name = flag.split("=", 1)[0]
    if name.startswith("--"):
        return "--" + name[2:].replace("_", "-")
    return name


def flags_in_help(text: str) -> frozenset[str]:
    flags: set[str] = set()
    for line in text.replace("\r", "").splitlines():
        s = line.strip()
        if not s.startswith("-"):
            continue
        for piece in s.split(", "):
            word = piece.split(" ", 1)[0].split("=", 1)[0]
            if _FLAG.match(word):
                flags.add(normalise(word))
    return frozenset(flags)


def help_is_summary(text: str) -> bool:
    """True for vLLM ≥ 0.10's short ``--help`` that only lists option groups."""
    return "--help=all" in text or "--help=<" in text


def flags_of(args: Iterable[str]) -> list[str]:
    """The flag words of an argument list (values, including negative numbers, are skipped)."""
    return [a for a in args if _FLAG.match(a.split("=", 1)[0])]


#: In a flag's name these mean two words glued into one list item (or a shell line pasted in).
_GLUE = (" ", "\t", "\n", "\r", ";", "|", "&")


def malformed_flags(args: Iterable[str]) -> list[str]:
    """Words that start with ``--`` but are no flag: ``"--max-model-len 4096"`` (one list item where two
    were meant), ``"--help; touch x"``. Only the name (before ``=``) is judged: a value may hold spaces
    (``--override-generation-config={"temperature": 0.6}``)."""
    return [a for a in args if a.startswith("--") and a != "--" and not _FLAG.match(a.split("=", 1)[0])]


def _malformed_reason(word: str) -> str:
    name = word.split("=", 1)[0]
    if any(c in name for c in _GLUE):
        return f"{word!r} is not one flag (did you mean two list items?)"
    return f"{word!r} is not a flag name"


@dataclass(frozen=True)
class FlagCheck:
    unknown: tuple[str, ...]
    reserved: tuple[tuple[str, str], ...]
    #: Words starting with ``--`` that are no flag at all (see ``malformed_flags``).
    malformed: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.unknown and not self.reserved and not self.malformed

    def message(self, version: str | None) -> str:
        parts = [f"malformed in engine.extra_args: {_malformed_reason(w)}" for w in self.malformed]
        if self.unknown:
            parts.append(f"unknown to vLLM {version or '(version unknown)'}: " + ", ".join(self.unknown))
        for flag, key in self.reserved:
            parts.append(f"{flag} is set by sparktui from {key}; remove it from engine.extra_args")
        return "; ".join(parts) if parts else "every flag in engine.extra_args is known"


def check_flags(extra_args: Sequence[str], known: frozenset[str]) -> FlagCheck:
    unknown: list[str] = []
    reserved: list[tuple[str, str]] = []
    for arg in flags_of(extra_args):
        flag = normalise(arg)
        if flag in RESERVED:
            reserved.append((flag, RESERVED[flag]))
            continue
        if flag in known:
            continue
        # Nested config keys (``--compilation-config.level``) are accepted when their base flag is.
        if "." in flag and flag.split(".", 1)[0] in known:
            continue
        # Short flags with a glued value (``-O3``).
        if not flag.startswith("--") and any(k.startswith("-") and not k.startswith("--")
                                             and flag.startswith(k) for k in known):
            continue
        unknown.append(arg)
    return FlagCheck(tuple(unknown), tuple(reserved), tuple(malformed_flags(extra_args)))


def parse_version(text: str) -> str | None:
    """``vllm --version`` prints the bare version (``0.11.0``); tolerate noise lines before it."""
    for line in reversed(text.strip().splitlines()):
        m = _VERSION.search(line)
        if m:
            return m.group(1)
    return None
