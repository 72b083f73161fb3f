"""Incidents: each failure the supervisor acts on, with its evidence, kept before the action (pure records,
plain files).

One directory per incident under ``$XDG_STATE_HOME/sparktui/incidents/`` (``~/.local/state``): its
``incident.json`` (id, time, cause, node, detail, the action, when it served again) and one file per piece
of evidence (the vLLM log's last lines, each node's Ray worker log, stacks, kernel messages, the NCCL lines
and environment, Ray's node list, the engine's argv and config, the timeline, the last minutes of
telemetry). Retention is bounded by count and size: the oldest go first.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from sparktui.domain.history import state_dir
from sparktui.domain.wall_time import iso

INCIDENTS_DIR = "incidents"
RECORD = "incident.json"
#: Kept at most: incidents, and bytes in all (the oldest removed first; the newest always kept).
KEEP_COUNT = 50
KEEP_BYTES = 500 * 1024 * 1024


@dataclass(frozen=True)
class EvidenceFile:
    name: str
    bytes: int
    #: What it holds, in a few words ("the vLLM log's last 400 lines").
    what: str


@dataclass(frozen=True)
class Incident:
    id: str
    at: float            # epoch seconds
    cause: str
    node: str | None
    detail: str
    #: What the supervisor did about it: restart, full_restart, start, give_up, needs_person, none.
    action: str = ""
    #: Seconds from the incident to a verified serving engine, once known.
    serving_again_after: float | None = None
    files: tuple[EvidenceFile, ...] = field(default=())
    #: Pieces of evidence that could not be taken, with why (a node unreachable …).
    missing: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["at"] = iso(self.at)
        data["at_epoch"] = self.at
        data["files"] = [asdict(f) for f in self.files]
        data["missing"] = list(self.missing)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Incident:
        return cls(str(data["id"]), float(data.get("at_epoch", 0.0)), str(data["cause"]),
                   data.get("node"), str(data.get("detail", "")), str(data.get("action", "")),
                   data.get("serving_again_after"),
                   tuple(EvidenceFile(str(f["name"]), int(f["bytes"]), str(f.get("what", "")))
                         for f in data.get("files", [])),
                   tuple(str(m) for m in data.get("missing", [])))


def new_id(at: float) -> str:
    """Sortable by time, unique per process: ``20261204-131502-4242``."""
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(at)) + f"-{os.getpid()}"


class IncidentStore:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else state_dir() / INCIDENTS_DIR

    def open(self, incident: Incident) -> Path:
        """The incident's directory, created (evidence files are written into it)."""
        path = self.root / incident.id
        path.mkdir(parents=True, exist_ok=True)
        return path

    def write_file(self, incident: Incident, name: str, text: str) -> EvidenceFile:
        data = text.encode("utf-8", "replace")
        (self.open(incident) / name).write_bytes(data)
        return EvidenceFile(name, len(data), "")

    def save(self, incident: Incident) -> None:
        path = self.open(incident) / RECORD
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(incident.to_json(), indent=1))
        tmp.replace(path)
        self.prune()

    def update(self, incident_id: str, **changes: Any) -> Incident | None:
        found = self.get(incident_id)
        if found is None:
            return None
        updated = replace(found, **changes)
        self.save(updated)
        return updated

    def all(self) -> list[Incident]:
        """Every incident kept, oldest first (unreadable records skipped)."""
        out: list[Incident] = []
        if not self.root.is_dir():
            return out
        for entry in sorted(self.root.iterdir()):
            record = entry / RECORD
            try:
                out.append(Incident.from_json(json.loads(record.read_text())))
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return sorted(out, key=lambda i: (i.at, i.id))

    def get(self, incident_id: str) -> Incident | None:
        return next((i for i in self.all() if i.id == incident_id), None)

    def read(self, incident: Incident, name: str) -> str:
        return (self.root / incident.id / name).read_text(encoding="utf-8", errors="replace")

    def prune(self, keep_count: int = KEEP_COUNT, keep_bytes: int = KEEP_BYTES) -> list[str]:
        """Remove the oldest incidents past the bounds; the ids removed."""
        kept = self.all()
        sizes = {i.id: _size(self.root / i.id) for i in kept}
        removed = []
        while len(kept) > 1 and (len(kept) > keep_count or sum(sizes[i.id] for i in kept) > keep_bytes):
            oldest = kept.pop(0)
            shutil.rmtree(self.root / oldest.id, ignore_errors=True)
            removed.append(oldest.id)
        return removed


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def describe(incidents: Sequence[Incident]) -> list[str]:
    """One line per incident, newest last: what ``sparktui incidents`` prints."""
    lines = []
    for i in incidents:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(i.at))
        again = f", serving again after {i.serving_again_after:.0f} s" if i.serving_again_after else ""
        node = f" on {i.node}" if i.node else ""
        lines.append(f"{i.id}  {when}  {i.cause}{node} → {i.action or 'none'}{again}  "
                     f"({len(i.files)} files)  {i.detail[:120]}")
    return lines
