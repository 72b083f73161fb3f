"""The disk's measured read rate for the model's files, per node: the node-side read test
(``sparktui/node/read_rate.py``), its report, and where the reports are kept.

Kept as JSON lines in ``$XDG_STATE_HOME/sparktui/disk_reads.jsonl`` beside the run history (one line per
node per test, with when and which file), so that the start's explanation
(:mod:`sparktui.domain.perf.start_explain`) and ``plan`` can use the latest rate of each node without a
new test: :meth:`DiskReadStore.latest`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sparktui.domain.history import append_line, read_lines, state_dir
from sparktui.domain.json_report import last_json_object
from sparktui.node import source

DISK_READS_FILE = "disk_reads.jsonl"
#: The test's bounds: at most this many MiB of the largest shard, for at most this many seconds (a Spark's
#: NVMe reads 1 GiB in well under a second; a slow disk stops at the time bound).
DEFAULT_MIB = 1024
DEFAULT_SECONDS = 10.0
#: ``sparktui/node/read_rate.py`` (its argv and output are said there).
READ_RATE_PY = source("read_rate")


def read_test_argv(python: str, request: Mapping[str, str], mib: int = DEFAULT_MIB,
                   seconds: float = DEFAULT_SECONDS) -> list[str]:
    """The node's command: ``request`` says where the model's files are (``{"path": DIR}`` or ``{"hf_id":
    ID, "hf_home": DIR}``, as ``preflight_plan.model_request`` gives it)."""
    return [python, "-c", READ_RATE_PY, json.dumps({**request, "mib": mib, "seconds": seconds})]


@dataclass(frozen=True)
class DiskRead:
    """One node's read test: what was read, how fast, how the page cache was kept out, and when."""

    node: str
    gib_s: float | None
    file: str = ""
    file_bytes: int = 0
    bytes: int = 0
    seconds: float = 0.0
    #: "direct" (O_DIRECT), "fadvise" (cached pages dropped first), "cached" (neither could be done: the
    #: figure may be the page cache's).
    method: str = ""
    at: float = 0.0            # epoch seconds
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.gib_s is not None and self.bytes > 0

    def describe(self) -> str:
        if not self.ok:
            return f"{self.node}: no read rate: {self.error or 'nothing read'}"
        name = self.file.rsplit("/", 1)[-1]
        note = "" if self.method == "direct" else (
            " (page cache dropped first)" if self.method == "fadvise" else " (may be the page cache's)")
        return (f"{self.node}: {self.gib_s:.2f} GiB/s reading {self.bytes / (1 << 20):.0f} MiB of {name} "
                f"in {self.seconds:.2f} s, {self.method}{note}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DiskRead:
        gib_s = data.get("gib_s")
        return cls(node=str(data["node"]), gib_s=None if gib_s is None else float(gib_s),
                   file=str(data.get("file") or ""), file_bytes=int(data.get("file_bytes") or 0),
                   bytes=int(data.get("bytes") or 0), seconds=float(data.get("seconds") or 0.0),
                   method=str(data.get("method") or ""), at=float(data.get("at") or 0.0),
                   error=data.get("error"))


def parse_read_test(node: str, text: str, at: float | None = None) -> DiskRead:
    """The node script's report (its last JSON object); a report that is none gives an error reading."""
    data = last_json_object(text)
    when = time.time() if at is None else at
    if data is None:
        return DiskRead(node, None, at=when, error="no report from the read test")
    try:
        return DiskRead.from_json({**data, "node": node, "at": when})
    except (TypeError, ValueError) as exc:
        return DiskRead(node, None, at=when, error=f"bad report: {exc}")


def default_disk_reads_path() -> Path:
    return state_dir() / DISK_READS_FILE


class DiskReadStore:
    """Reading skips lines it cannot parse (a crash mid-write, a newer schema)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else default_disk_reads_path()

    def append(self, reading: DiskRead) -> None:
        append_line(self.path, json.dumps({"v": 1, **reading.to_json()}, separators=(",", ":")))

    def load(self) -> list[DiskRead]:
        out = read_lines(self.path, _parse_line)
        out.sort(key=lambda r: r.at)
        return out

    def latest(self) -> dict[str, DiskRead]:
        """Node -> its latest good reading (a failed test does not hide an earlier rate)."""
        return {r.node: r for r in self.load() if r.ok}


def _parse_line(line: str) -> DiskRead:
    data = json.loads(line)
    if not isinstance(data, dict) or "node" not in data:
        raise ValueError("not a disk reading")
    try:
        return DiskRead.from_json(data)
    except (TypeError, KeyError) as exc:
        raise ValueError(str(exc)) from exc


def rates_by_log_node(latest: Mapping[str, DiskRead], head: str,
                      addresses: Mapping[str, str]) -> dict[str, float]:
    """The rates keyed as a vLLM log names nodes: the head's own lines as "head", a worker's by the address
    Ray prints (``ip=``), for :class:`~sparktui.domain.perf.start_explain.StartContext`."""
    out: dict[str, float] = {}
    for node, reading in latest.items():
        if reading.gib_s is None:
            continue
        out["head" if node == head else addresses.get(node, node)] = reading.gib_s
    return out
