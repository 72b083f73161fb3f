"""The stand-in's torch.compile cache, kept where and as vLLM keeps it.

vLLM (V1) compiles the model's graphs during the first dummy forward and saves them under its cache root
(``VLLM_CACHE_ROOT``, default ``$XDG_CACHE_HOME/vllm`` = ``~/.cache/vllm``), in
``torch_compile_cache/<hash>/rank_<r>_<dp>/backbone`` where ``<hash>`` covers every config factor; the
next start with the same factors finds the entry and loads the compiled graphs instead of compiling
(``VLLM_DISABLE_COMPILE_CACHE=1`` turns that off). The stand-in does the same with a replayed recording
that compiles (one with vLLM's "Compiling a graph for … takes … s" lines):

* **cold** (no entry): the recording's compile lines are replayed with their time, and after the
  "torch.compile took … s in total" line an entry is written (atomically: a start killed while
  "compiling" leaves none, as vLLM saves only after compiling);
* **warm** (an entry): those lines become vLLM's cache-hit lines — "Directly load the compiled graph(s)
  for compile range (1, 2048) from the cache, took 3.784 s" (``… for dynamic shape …`` / ``… for shape …``
  in older dialects), "Directly load AOT compilation from path …" where the recording saved one — the
  "Cache the graph …", "saved AOT …" (and, with AOT, Dynamo's) lines go, "torch.compile took" and
  "init engine … (compilation: … s)" say the shorter time, and the replay skips the compile time.

Loading a compiled graph is modelled as ``WARM_LOAD_FRACTION`` of the time it took to compile (a real
warm start of vLLM 0.1x reads Inductor's artifacts back in seconds: 2.5 s and 6.0 s in the warm logs of
the vLLM log corpus). Only rank 0's entry on the node running the stand-in's head is kept: the stand-in's
worker actors replay no compile of their own.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sparktui.sim.recording import RecordedLine
from sparktui.sim.standin_script import capped_span

#: A compiled graph loads from the cache in this fraction of the time it took to compile.
WARM_LOAD_FRACTION = 0.2
#: The file vLLM's CompilerManager writes into a cache directory (a Python literal of its entries).
CACHE_FILE = "vllm_compile_cache.py"

_CACHE_DIR = re.compile(r"Using cache directory: (?P<dir>\S+) for vLLM's torch\.compile")
_DYNAMO = re.compile(r"Dynamo bytecode transform time: (?P<s>[\d.]+) s")
_CACHE_GRAPH = re.compile(r"Cache the graph (?:of|for) ")
_COMPILING = re.compile(
    r"Compiling a graph for (?P<what>compile range \(\d+, \d+\)|dynamic shape|general shape|shape \S+) "
    r"takes (?P<s>[\d.]+) s"
)
_AOT_SAVED = re.compile(r"sav(?:ed|ing) AOT compiled function to (?P<path>\S+)")
_DONE = re.compile(r"torch\.compile t(?:akes|ook) (?P<s>[\d.]+) s in total")
_INIT_COMPILATION = re.compile(r"took (?P<total>[\d.]+) (?P<unit>s|seconds) \(compilation: (?P<s>[\d.]+) s")
#: "(EngineCore pid=153) INFO 05-05 08:50:50 [backends.py:1065] " → the part before the message.
_HEAD = re.compile(
    r"^(?P<head>.*?\b(?:DEBUG|INFO|WARNING|ERROR) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]*\] )"
)


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    """vLLM's cache root: ``VLLM_CACHE_ROOT``, else ``$XDG_CACHE_HOME/vllm``, else ``~/.cache/vllm``."""
    env = os.environ if env is None else env
    root = env.get("VLLM_CACHE_ROOT")
    if root:
        return Path(os.path.expanduser(root))
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vllm"


def cache_disabled(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get("VLLM_DISABLE_COMPILE_CACHE", "").strip().lower() in ("1", "true")


def config_hash(factors: Sequence[object]) -> str:
    """Ten hex digits over the factors that decide what is compiled (vLLM: its configs' compute_hash)."""
    return hashlib.sha256(repr(tuple(factors)).encode()).hexdigest()[:10]


@dataclass(frozen=True)
class Segment:
    """Where a recording compiles: from its first "Using cache directory" to its last "torch.compile took"."""

    first: int
    last: int


def compile_segment(lines: Sequence[RecordedLine]) -> Segment | None:
    """The recording's compile, or ``None`` when it compiles nothing (V0, eager, or a warm recording)."""
    first = next((i for i, line in enumerate(lines) if _CACHE_DIR.search(line.text)), None)
    if first is None:
        return None
    last = max((i for i in range(first, len(lines)) if _DONE.search(lines[i].text)), default=None)
    if last is None or not any(_COMPILING.search(lines[i].text) for i in range(first, last)):
        return None
    return Segment(first, last)


@dataclass
class CompileCache:
    """One start's view of the cache: where its entry lies, whether it was found, and the lines to replay."""

    directory: Path | None
    warm: bool
    lines: list[RecordedLine]
    #: Index (in ``lines``) after whose replay a cold start writes its entry; ``None``: nothing to write.
    save_after: int | None
    #: Recorded seconds the warm replay leaves out (0 when cold).
    saved_seconds: float = 0.0

    @classmethod
    def for_start(cls, lines: list[RecordedLine], factors: Sequence[object],
                  env: Mapping[str, str] | None = None) -> CompileCache:
        segment = compile_segment(lines)
        if segment is None:
            return cls(None, False, lines, None)
        if cache_disabled(env):
            text = _replace_message(lines[segment.first].text, "vLLM's torch.compile cache is disabled.")
            out = list(lines)
            out[segment.first] = dataclasses.replace(lines[segment.first], text=text)
            return cls(None, False, out, None)
        directory = cache_root(env) / "torch_compile_cache" / config_hash(factors) / "rank_0_0" / "backbone"
        with_dir = _with_cache_dir(lines, segment, directory)
        if _entry_ok(directory / CACHE_FILE):
            warm, saved = _warm_lines(with_dir, segment)
            return cls(directory, True, warm, None, saved)
        return cls(directory, False, with_dir, segment.last)

    def save(self) -> None:
        """The entry of a cold start, written once its compile is over (tmp + rename: all or nothing)."""
        if self.directory is None or self.warm:
            return
        graphs = [m.group("what") for line in self.lines if (m := _COMPILING.search(line.text))]
        entries = {(what, i, "inductor"): f"artifact_{i}" for i, what in enumerate(graphs)}
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f".{CACHE_FILE}.{os.getpid()}"
        tmp.write_text("# vLLM's compiled graphs (sparktui stand-in): (range, graph index, backend)\n"
                       + repr(entries) + "\n")
        os.replace(tmp, self.directory / CACHE_FILE)

    def pace(self, cold_pace: float, end: int) -> float:
        """The replay's length for ``lines[:end]``: the cold start's pace, less the compile time a warm start
        skips (at the same seconds-per-recorded-second as the cold replay)."""
        if not self.warm:
            return cold_pace
        warm_span = capped_span(self.lines, 0, end)
        cold_span = warm_span + self.saved_seconds
        return cold_pace * warm_span / cold_span if cold_span > 0 else cold_pace


def _entry_ok(path: Path) -> bool:
    try:
        entries = ast.literal_eval(path.read_text())
    except (OSError, ValueError, SyntaxError):
        return False  # none, or a half-written / corrupt one: compile again
    return isinstance(entries, dict) and bool(entries)


def _replace_message(text: str, message: str) -> str:
    m = _HEAD.match(text)
    return (m.group("head") if m else "") + message


def _with_cache_dir(lines: list[RecordedLine], segment: Segment, directory: Path) -> list[RecordedLine]:
    """The recorded cache paths as this run's: its hash directory, and its root for the AOT artifacts."""
    out = list(lines)
    recorded = _CACHE_DIR.search(lines[segment.first].text)
    assert recorded is not None
    old_root = recorded.group("dir").split("/torch_compile_cache/", 1)[0] + "/torch_compile_cache/"
    new_root = str(directory.parent.parent.parent) + "/"
    for i in range(segment.first, segment.last + 1):
        text = out[i].text
        if m := _CACHE_DIR.search(text):
            # The recorded rank's directory becomes this run's (the same rank_… tail where it has one).
            tail = re.search(r"/rank_\d+_\d+/\w+$", m.group("dir"))
            here = str(directory.parent.parent) + (tail.group(0) if tail else "/rank_0_0/backbone")
            text = text.replace(m.group("dir"), here)
        out[i] = dataclasses.replace(out[i], text=text.replace(old_root, new_root))
    return out


def _source_of(line: RecordedLine) -> str:
    """Which process printed a line (its prefix up to the level), so each rank's totals stay its own."""
    m = re.match(r"^(.*?)\b(?:DEBUG|INFO|WARNING|ERROR) ", line.text)
    return (line.source or "") + "|" + (m.group(1) if m else "")


def _warm_lines(lines: list[RecordedLine], segment: Segment) -> tuple[list[RecordedLine], float]:
    """The recording with its compile turned into vLLM's cache-hit lines, and the recorded seconds saved."""
    inside = lines[segment.first:segment.last + 1]
    # Each rank's "saved AOT compiled function to P" line becomes its "Directly load AOT compilation from
    # path P" (with the saving line's file tag), printed where the warm start looks in its cache.
    aot = {_source_of(line): line.text.replace(m.group(0), f"Directly load AOT compilation from path "
                                                           f"{m.group('path')}")
           for line in inside if (m := _AOT_SAVED.search(line.text))}
    spent: dict[str, float] = {}
    kept: list[RecordedLine] = []
    for line in inside:
        text, who = line.text, _source_of(line)
        if _CACHE_GRAPH.search(text) or _AOT_SAVED.search(text):
            continue  # nothing is stored on a cache hit
        if (m := _DYNAMO.search(text)) and who in aot:
            continue  # the AOT artifact replaces Dynamo's bytecode transform
        if m:
            spent[who] = spent.get(who, 0.0) + float(m.group("s"))
        elif m := _COMPILING.search(text):
            took = float(m.group("s")) * WARM_LOAD_FRACTION
            spent[who] = spent.get(who, 0.0) + took
            what = m.group("what").replace("general shape", "shape None")
            text = _replace_message(text, f"Directly load the compiled graph(s) for {what} from the cache, "
                                          f"took {took:.3f} s")
        elif m := _DONE.search(text):
            text = text[:m.start("s")] + f"{spent.get(who, 0.0):.2f}" + text[m.end("s"):]
        kept.append(dataclasses.replace(line, text=text))
        if _CACHE_DIR.search(line.text) and who in aot:
            kept.append(dataclasses.replace(line, text=aot[who]))
    begin = inside[0].offset_seconds
    recorded = inside[-1].offset_seconds - begin
    warm = max(spent.values(), default=0.0)
    saved = max(0.0, recorded - warm)
    scale = warm / recorded if recorded > 0 else 0.0
    kept = [dataclasses.replace(x, offset_seconds=begin + (x.offset_seconds - begin) * scale) for x in kept]
    after = []
    for line in lines[segment.last + 1:]:
        text = line.text
        if m := _INIT_COMPILATION.search(text):
            total = max(0.0, float(m.group("total")) - saved)
            text = (text[:m.start("total")] + f"{total:.2f}" + text[m.end("total"):m.start("s")]
                    + f"{warm:.2f}" + text[m.end("s"):])
        after.append(dataclasses.replace(line, text=text, offset_seconds=line.offset_seconds - saved))
    return [*lines[:segment.first], *kept, *after], saved
