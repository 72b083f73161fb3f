"""What a vLLM build accepts on ``vllm serve``, read from its own help text (pure; no I/O).

Which command prints every flag depends on the version line (vLLM's CLI guide, docs.vllm.ai/en/stable/cli/):

- vLLM ≥ 0.10: ``vllm serve --help`` prints only the option *groups* ("Config Groups: … For full list:
  vllm serve --help=all"); ``vllm serve --help=all`` prints every flag, grouped under ``ModelConfig:``,
  ``Frontend:`` … headings.
- older: ``vllm serve --help`` prints every flag (one flat ``options:`` list, sorted since vLLM PR #10017);
  ``--help=all`` is an argparse error there.

So the orchestration runs :func:`help_argvs` in order and keeps the first answer that is not a summary
(:func:`ServeHelp.summary`). Both texts are argparse help: an option's entry starts at a two-space indent
with its spellings (``--compilation-config COMPILATION_CONFIG, -O COMPILATION_CONFIG``), booleans print both
halves (``--enable-prefix-caching, --no-enable-prefix-caching``; ``[--foo | --no-foo]`` in the usage block),
and its help text follows at a deeper indent, where vLLM writes ``[DEPRECATED]`` and what replaces a flag.

Spelling: vLLM's ``FlexibleArgumentParser`` rewrites ``--foo_bar`` to ``--foo-bar`` (and ``--foo_bar=1``) and
splits ``-O3`` into ``-O 3`` before argparse sees them (``vllm/utils`` ``parse_args``), so both spellings of a
long flag are one flag here (:func:`sparktui.domain.lifecycle.vllm_help.normalise`). vLLM ≥ 0.10 also
accepts a JSON flag's keys one by one (``--compilation-config.level 3``), and its help says so
("--json-arg.key1 value1").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sparktui.config import SparkConfig
from sparktui.domain.lifecycle import argv as A
from sparktui.domain.lifecycle.vllm_help import normalise, parse_version

#: The help argument that lists every flag on vLLM ≥ 0.10.
HELP_ALL = "--help=all"

_FLAG = re.compile(r"^--?[A-Za-z][\w.-]*$")
#: ``[--foo FOO]``, ``[--foo | --no-foo]``, ``[-h]`` in the usage block.
_USAGE_FLAG = re.compile(r"(?:\[|\|\s)(--?[A-Za-z][\w.-]*)")
#: A heading at column 0: ``options:``, ``Frontend:``, ``ModelConfig:``, ``positional arguments:``.
_HEADING = re.compile(r"^([A-Za-z][\w ]*):\s*$")
#: The deepest indent argparse gives an option's own line (its help text is indented 24 by default).
_OPTION_INDENT = 6
#: "vLLM API server version 0.9.2" (the server's first log line), "vllm 0.11.0".
_VERSION_IN_TEXT = re.compile(r"\bvLLM(?: API server)? version v?(\d+\.\d+(?:\.\d+)?[\w.+-]*)", re.I)
#: Where the help text names the flag to use instead: "use --enable-log-requests instead", "replaced by
#: --x", "in favor of --x", "renamed to --x", "please use `--x`".
_REPLACEMENT = re.compile(
    r"(?:use|replaced by|in favou?r of|renamed to|superseded by)\s+[`'\"]*(--[A-Za-z][\w.-]*)", re.I)
#: The option itself is deprecated ("[DEPRECATED] …", "This flag is deprecated; …", "Deprecated: …"), not a
#: help text that merely uses the word ("Whether to allow deprecated quantization methods").
_DEPRECATED = re.compile(r"\[DEPRECATED\]|\b(?:is|are|was|been|now)\s+deprecated\b|^\s*deprecated\b"
                         r"|\bdeprecated\s*(?:[:;,.)]|$)|\bdeprecated (?:since|in|as of)\b", re.I)


@dataclass(frozen=True)
class OptionHelp:
    """One option entry of the help: its spellings as printed and its help text (lines joined)."""

    spellings: tuple[str, ...]
    text: str = ""
    group: str | None = None

    @property
    def name(self) -> str:
        """The first long spelling, normalised (what the option is called in messages)."""
        longs = [s for s in self.spellings if s.startswith("--")]
        return normalise(longs[0] if longs else self.spellings[0])

    @property
    def deprecated(self) -> bool:
        return bool(_DEPRECATED.search(self.text))

    @property
    def replacement(self) -> str | None:
        """The flag the help text says to use instead (only for a deprecated option)."""
        if not self.deprecated:
            return None
        m = _REPLACEMENT.search(self.text)
        return normalise(m.group(1).rstrip(".")) if m else None   # not the sentence's full stop

    @property
    def deprecation_note(self) -> str:
        """The help text from the word "deprecated" on (the sentence vLLM wrote), or ``""``."""
        m = _DEPRECATED.search(self.text)
        if m is None:
            return ""
        # From the start of the sentence that says so.
        start = self.text.rfind(". ", 0, m.start())
        return self.text[start + 2 if start >= 0 else 0:].strip()


@dataclass(frozen=True)
class ServeHelp:
    """``vllm serve``'s options as one vLLM build prints them."""

    options: tuple[OptionHelp, ...]
    #: Spellings seen only in the usage block (``[--foo | --no-foo]``): accepted, no help text.
    usage_flags: frozenset[str] = frozenset()
    version: str | None = None
    #: vLLM ≥ 0.10's plain ``--help``: groups only, so it cannot say a flag is missing.
    summary: bool = False
    #: vLLM ≥ 0.10 reads a JSON flag's keys as ``--flag.key value``.
    dotted_keys: bool = False
    _by_flag: Mapping[str, OptionHelp] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        index = {normalise(s): opt for opt in self.options for s in opt.spellings}
        object.__setattr__(self, "_by_flag", index)

    @property
    def flags(self) -> frozenset[str]:
        """Every accepted spelling, normalised (``--foo-bar``, ``--no-foo``, ``-O``)."""
        return frozenset(self._by_flag) | self.usage_flags

    def option(self, flag: str) -> OptionHelp | None:
        """The entry that lists ``flag`` (any spelling, ``_`` or ``-``, with or without ``=value``)."""
        name = normalise(flag)
        found = self._by_flag.get(name)
        if found is None and self.dotted_keys and "." in name:
            found = self._by_flag.get(name.split(".", 1)[0])
        return found

    def accepts(self, flag: str) -> bool:
        """Would this build's parser take ``flag``? ``--max_model_len=4`` and ``-O3`` are judged as vLLM
        rewrites them; a JSON key (``--compilation-config.level``) only where the build reads keys."""
        name = normalise(flag)
        if name in self.flags:
            return True
        if "." in name and self.dotted_keys:
            return name.split(".", 1)[0] in self.flags
        if not name.startswith("--"):
            # A short option with its value glued on (``-O3``, ``-tp2``): argparse takes the longest
            # short spelling the word starts with.
            return any(f.startswith("-") and not f.startswith("--") and len(f) > 1 and name.startswith(f)
                       for f in self.flags)
        return False

    def deprecations(self) -> dict[str, OptionHelp]:
        """Every spelling of every option whose help text says it is deprecated."""
        return {normalise(s): opt for opt in self.options if opt.deprecated for s in opt.spellings}


def help_argvs(vllm: Sequence[str]) -> list[list[str]]:
    """The commands to try, in order: ``--help=all`` (every flag on vLLM ≥ 0.10), then plain ``--help``
    (every flag on older builds, which reject ``--help=all``)."""
    return [A.vllm_serve_help(vllm, HELP_ALL), A.vllm_serve_help(vllm)]


def image_version_argv(config: SparkConfig, image: str) -> list[str]:
    """``vllm --version`` in a throw-away container of ``image`` (no network), before any downtime."""
    return A.docker_run_once(image, A.vllm_version(config.engine.vllm_command))


def image_help_argvs(config: SparkConfig, image: str) -> list[list[str]]:
    """:func:`help_argvs` in throw-away containers of ``image``, in the order to try them."""
    return [A.docker_run_once(image, argv) for argv in help_argvs(config.engine.vllm_command)]


def read_help(answers: Sequence[tuple[bool, str]], version_text: str | None = None) -> ServeHelp:
    """The help of the first answer that lists flags, given each :func:`help_argvs` command's (succeeded,
    stdout) in order; else what the last successful one said (a group summary: undecided), else nothing."""
    last = ServeHelp(())
    for ok, text in answers:
        if not ok:
            continue
        last = parse_serve_help(text, version_text)
        if not last.summary and last.flags:
            return last
    return last


def is_summary(text: str) -> bool:
    """vLLM ≥ 0.10's plain ``--help``: it lists groups and points at ``--help=all``, with no option entry
    beyond ``-h``."""
    points_on = "--help=all" in text or "--help=<" in text
    entries = sum(1 for line in text.splitlines() if _option_line(line) is not None)
    return points_on and entries <= 2


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _option_line(line: str) -> tuple[tuple[str, ...], str] | None:
    """``  --foo FOO, -f FOO   help…`` → (``("--foo", "-f")``, ``"help…"``); None for any other line."""
    if not line.strip().startswith("-") or _indent(line) > _OPTION_INDENT or _indent(line) == 0:
        return None
    # argparse puts two spaces or more between an option's spellings and its help on the same line.
    spec, *rest = re.split(r"\s{2,}", line.strip(), maxsplit=1)
    words = [piece.split(" ", 1)[0].split("=", 1)[0] for piece in spec.split(", ")]
    if not _FLAG.match(words[0]):
        return None
    # Later pieces that are no flag belong to a metavar that itself holds ", ".
    return tuple(w for w in words if _FLAG.match(w)), rest[0].strip() if rest else ""


def _usage_flags(lines: Iterable[str]) -> set[str]:
    """The spellings of the usage block (``usage: vllm serve [-h] [--model MODEL] …``), to its first blank
    line: a help text cut after the usage (as pasted in reports) still says what the build accepts."""
    out: set[str] = set()
    inside = False
    for line in lines:
        if line.lower().startswith("usage:"):
            inside = True
        elif inside and not line.strip():
            break
        if inside:
            out.update(normalise(m.group(1)) for m in _USAGE_FLAG.finditer(line))
    return out


def parse_serve_help(text: str, version_text: str | None = None) -> ServeHelp:
    """Read a ``vllm serve --help`` / ``--help=all`` text. ``version_text``: what ``vllm --version``
    printed (the help itself seldom names the version; a server log line before it may). Garbage in gives
    an empty help, never an exception."""
    lines = text.replace("\r", "").splitlines()
    options: list[OptionHelp] = []
    group: str | None = None
    current: tuple[tuple[str, ...], list[str], str | None] | None = None

    def close() -> None:
        if current is not None:
            spellings, words, where = current
            options.append(OptionHelp(spellings, " ".join(words), where))

    for line in lines:
        heading = _HEADING.match(line)
        if heading:
            close()
            current, group = None, heading.group(1)
            continue
        parsed = _option_line(line)
        if parsed is not None:
            close()
            spellings, rest = parsed
            current = (spellings, [rest] if rest else [], group)
            continue
        if current is not None and line.strip() and _indent(line) > _OPTION_INDENT:
            current[1].append(line.strip())
        elif current is not None and not line.strip():
            close()
            current = None
    close()
    version = parse_version(version_text) if version_text else None
    if version is None:
        m = _VERSION_IN_TEXT.search(text)
        version = m.group(1) if m else None
    return ServeHelp(
        options=tuple(options),
        usage_flags=frozenset(_usage_flags(lines)),
        version=version,
        summary=is_summary(text),
        dotted_keys="--json-arg." in text,
    )
