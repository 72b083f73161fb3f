"""Recorded real vLLM startup logs, split into lines the stand-in engine (and the demo) can replay.

The files under ``sparktui/assets/recorded/logs`` are byte-faithful copies of real `vllm serve`
outputs. This module only *reads* them: it classifies each physical line as printed by the head
process (the API server / Ray driver) or forwarded by Ray from a worker actor, peels off the outer
Ray prefix and Ray's de-duplication suffix (both are added again by the real Ray when a line is
replayed through an actor), and gives every line an offset in seconds from the log's own timestamps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import Literal

Role = Literal["head", "worker"]

DEFAULT_RECORDING = "multinode-ray-tp4pp2-llama3.3-70b-ready_v0.8.3"
"""A real two-node Ray TP×PP start that reaches ready: the stand-in's default."""

DGX_SPARK_RECORDING = "dgx-spark-gb10-qwen3.6-35b-a3b-ready_v0.19.2"

_ANSI = r"(?:\x1b\[[0-9;]*m)*"
# Ray's own prefix on a forwarded line: "(RayWorkerWrapper pid=N, ip=X) " or "(pid=N) ", usually cyan.
# vLLM's process prefixes ("(APIServer pid=1) ") have the same shape, so a group only counts as Ray's
# when it is coloured, names a Ray actor, has no name at all, or carries "ip=".
_RAY_PREFIX = re.compile(
    rf"^(?P<pre>{_ANSI}\((?P<name>[^()]*?) ?pid=(?P<pid>\d+)(?:, ip=(?P<ip>[^)]+))?\){_ANSI}) ?"
)
_RAY_ACTOR_NAMES = {"", "RayWorkerWrapper", "RayWorkerProc"}
# A Ray prefix glued to the end of a line: Ray printed it, then the forwarded text began with "\r"
# (a tqdm bar), which the capture turned into a line break. The text on the next line is the worker's.
_TRAILING_RAY_PREFIX = re.compile(
    r"\x1b\[36m\((?P<name>[^()]*?) ?pid=(?P<pid>\d+)(?:, ip=(?P<ip>[^)]+))?\)\x1b\[0m$"
)
_DEDUP_SUFFIX = re.compile(
    r"(?:\x1b\[32m)? \[repeated \d+x across cluster\]"
    r"(?: \(Ray deduplicates logs by default\..*?\))?(?:\x1b\[0m)?$"
)
_VLLM_TS = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<md>\d\d-\d\d) (?P<hms>\d\d:\d\d:\d\d) ")
_RAY_TS = re.compile(r"^(?P<ymd>\d{4}-\d\d-\d\d) (?P<hms>\d\d:\d\d:\d\d),\d{3}\t")
_LEVEL = re.compile(
    r"^(?:\((?:[^()]*?) ?pid=\d+(?:, ip=[^)]+)?\) )*(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\t)?"
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)[ :]"
)
#: Where vLLM states its version: the V0/V1 engine-init line, the API server banner, "vLLM version X".
VERSION_STATEMENT = re.compile(r"(?:LLM engine \(v|API server version |\bversion )(\d+\.\d+\.\d+[\w.+]*)")
# A launcher script's shell trace ("+ python3 -m vllm.entrypoints..." / "+ vllm serve ...") marks where
# the vLLM process's own output begins; anything above it (e.g. `ray start` output) is not vLLM's.
_LAUNCH_TRACE = re.compile(r"^\+ .*(?:python3? -m vllm\.|\bvllm serve\b)")


@dataclass(frozen=True)
class RecordedLine:
    """One physical line of a recorded log, ready to replay."""

    offset_seconds: float
    """Seconds since the first timestamped line (monotonic; untimed lines inherit the previous offset)."""
    text: str
    """The line without Ray's outer prefix and dedup suffix (worker lines); head lines verbatim."""
    role: Role
    """"head" = printed by the head process itself; "worker" = forwarded by Ray from a worker actor."""
    level: str | None
    """vLLM / uvicorn / Ray log level of the line when it has one."""
    source: str | None = None
    """For worker lines: the recorded Ray source, e.g. "RayWorkerWrapper pid=327, ip=10.244.1.18"."""
    remote: bool = False
    """For worker lines: the recorded worker ran on another node than the head (Ray printed ``ip=``)."""
    raw: str = ""
    """The physical line exactly as recorded."""


@dataclass(frozen=True)
class RecordingInfo:
    name: str
    vllm_version: str
    line_count: int
    duration_seconds: float


def _logs_dir() -> resources.abc.Traversable:
    return resources.files("sparktui").joinpath("assets", "recorded", "logs")


def list_recordings() -> list[RecordingInfo]:
    """Every recorded log shipped with the package, by name (the file name without ``.txt``)."""
    infos = []
    for entry in sorted(_logs_dir().iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".txt"):
            continue
        name = entry.name.removesuffix(".txt")
        lines = load_recording(name)
        version = name.rsplit("_v", 1)[-1] if "_v" in name else "unknown"
        duration = lines[-1].offset_seconds if lines else 0.0
        infos.append(RecordingInfo(name, version, len(lines), duration))
    return infos


def recording_version(name: str) -> str:
    """The vLLM version that wrote a recording (as its banner or engine-init line states it)."""
    m = VERSION_STATEMENT.search(recording_text(name))
    return m.group(1) if m else name.rsplit("_v", 1)[-1]


def recording_text(name: str) -> str:
    """The recorded file's text, unchanged."""
    entry = _logs_dir().joinpath(f"{name}.txt")
    if not entry.is_file():
        known = ", ".join(sorted(e.name.removesuffix(".txt") for e in _logs_dir().iterdir()))
        raise KeyError(f"no recording named {name!r}; known: {known}")
    return entry.read_bytes().decode("utf-8", errors="surrogateescape")


def load_recording(name: str = DEFAULT_RECORDING) -> list[RecordedLine]:
    """The recorded vLLM output as replayable lines, starting at the vLLM process's first line."""
    physical = recording_text(name).split("\n")
    if physical and physical[-1] == "":
        physical.pop()
    start = 0
    for i, line in enumerate(physical[:200]):
        if _LAUNCH_TRACE.match(line):
            start = i + 1
            break
    return _classify(physical[start:])


def parse_recorded(text: str) -> list[RecordedLine]:
    """Log text (e.g. the demo's composed start) as replayable lines, the same way a recording is read."""
    physical = text.split("\n")
    if physical and physical[-1] == "":
        physical.pop()
    return _classify(physical)


def _classify(physical: list[str]) -> list[RecordedLine]:
    out: list[RecordedLine] = []
    first_ts: datetime | None = None
    offset = 0.0
    carried: re.Match[str] | None = None  # a trailing Ray prefix that owns the next line
    for raw in physical:
        stamp = _timestamp(raw)
        if stamp is not None:
            if first_ts is None:
                first_ts = stamp
            # Worker clocks and Ray's batching make timestamps go backwards now and then: keep the
            # replay monotonic instead of reordering real lines.
            offset = max(offset, (stamp - first_ts).total_seconds())
        body = raw
        glued = _TRAILING_RAY_PREFIX.search(body)
        if glued is not None:
            body = body[: glued.start()]
        if carried is not None:
            out.append(_worker_line(offset, body, carried, raw))
        else:
            prefix = _RAY_PREFIX.match(body)
            if prefix is not None and _is_ray_prefix(prefix):
                out.append(_worker_line(offset, body[prefix.end() :], prefix, raw))
            else:
                out.append(RecordedLine(offset, body, "head", _level(body), raw=raw))
        carried = glued
    return out


def _is_ray_prefix(m: re.Match[str]) -> bool:
    return (
        m.group("pre").startswith("\x1b[36m")
        or m.group("ip") is not None
        or m.group("name") in _RAY_ACTOR_NAMES
    )


def _worker_line(offset: float, body: str, prefix: re.Match[str], raw: str) -> RecordedLine:
    text = _DEDUP_SUFFIX.sub("", body)
    name = prefix.group("name")
    ip = prefix.group("ip")
    source = f"{name + ' ' if name else ''}pid={prefix.group('pid')}{f', ip={ip}' if ip else ''}"
    return RecordedLine(offset, text, "worker", _level(text), source=source, remote=ip is not None, raw=raw)


def _level(text: str) -> str | None:
    m = _LEVEL.match(text)
    return m.group("level") if m else None


def _timestamp(line: str) -> datetime | None:
    m = _VLLM_TS.search(line)
    if m is not None:
        # vLLM timestamps carry no year; a fixed leap year keeps "02-29" valid.
        return datetime.strptime(f"2024-{m.group('md')} {m.group('hms')}", "%Y-%m-%d %H:%M:%S")
    r = _RAY_TS.match(line)
    if r is not None:
        stamp = datetime.strptime(f"{r.group('ymd')} {r.group('hms')}", "%Y-%m-%d %H:%M:%S")
        return stamp.replace(year=2024)
    return None


def ready_index(lines: list[RecordedLine]) -> int | None:
    """Index of uvicorn's "Application startup complete." (the ready edge), if the capture has it."""
    for i, line in enumerate(lines):
        if "Application startup complete." in line.text:
            return i
    return None
