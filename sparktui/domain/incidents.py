"""Incidents: one record per failure with the evidence kept before anything was done about it.

Each incident is a folder ``$XDG_STATE_HOME/sparktui/incidents/<id>/`` (the state dir of the run history,
:func:`sparktui.domain.history.state_dir`) holding ``incident.json`` and the evidence files. The id is the
UTC moment it was taken (``20261204-131700-123``), so ids sort by time and a folder listing is the list.
Retention (``[incidents]``: ``keep`` incidents, ``max_size`` bytes in all) removes the oldest first, never
the one just written. Pure file handling: no node, no transport.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from sparktui.domain.history import state_dir
from sparktui.domain.wall_time import iso

SCHEMA_VERSION = 1
INCIDENTS_DIR = "incidents"
RECORD = "incident.json"
_ID = re.compile(r"^\d{8}-\d{6}-\d{3}(?:-\d+)?\Z")
#: An evidence file's name: a plain file name (it is written inside the incident's folder).
_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z")


def incident_id(epoch: float) -> str:
    """The UTC moment as an id that sorts by time: ``20261204-131700-123`` (milliseconds)."""
    moment = dt.datetime.fromtimestamp(epoch, dt.UTC)
    return moment.strftime("%Y%m%d-%H%M%S-") + f"{moment.microsecond // 1000:03d}"


def is_incident_id(text: str) -> bool:
    return bool(_ID.match(text))


@dataclass(frozen=True)
class EvidenceFile:
    name: str
    size: int


@dataclass(frozen=True)
class Incident:
    """One failure: when, what (``cause``, a supervisor cause or ``manual``), where, what was done about it,
    how long until the engine served again (filled in later, :meth:`IncidentStore.update`), the evidence."""

    id: str
    at: float                                  # epoch seconds, when the evidence was taken
    cause: str
    node: str | None = None
    detail: str = ""
    action: str = ""                           # what was done after: "restart", "none (manual)", …
    serving_again_s: float | None = None       # from the incident to a verified serving engine
    files: tuple[EvidenceFile, ...] = ()
    #: Evidence that could not be taken (a node that did not answer, a command that failed), one line each.
    missing: tuple[str, ...] = ()
    cluster: str = ""

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["time"] = iso(self.at)
        data["files"] = [asdict(f) for f in self.files]
        data["missing"] = list(self.missing)
        return {"v": SCHEMA_VERSION, **data}

    @classmethod
    def from_json(cls, data: Any) -> Incident:
        """``to_json``'s output back; ``ValueError`` for anything else."""
        if not isinstance(data, dict):
            raise ValueError("not an object")
        try:
            return cls(
                id=str(data["id"]), at=float(data["at"]), cause=str(data["cause"]),
                node=None if data.get("node") is None else str(data["node"]),
                detail=str(data.get("detail", "")), action=str(data.get("action", "")),
                serving_again_s=(None if data.get("serving_again_s") is None
                                 else float(data["serving_again_s"])),
                files=tuple(EvidenceFile(str(f["name"]), int(f["size"])) for f in data.get("files", ())),
                missing=tuple(str(m) for m in data.get("missing", ())),
                cluster=str(data.get("cluster", "")),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"bad incident record: {exc}") from exc


def default_incidents_dir(environ: Mapping[str, str] | None = None) -> Path:
    return state_dir(environ) / INCIDENTS_DIR


class UnknownIncident(LookupError):
    """No incident with that id; ``known`` are the ids there are (oldest first)."""

    def __init__(self, wanted: str, known: Sequence[str]) -> None:
        super().__init__(wanted)
        self.wanted = wanted
        self.known = tuple(known)


@dataclass
class IncidentStore:
    """The incidents under ``root``, each in its own folder; ``keep``/``max_size``: the retention bounds."""

    root: Path = field(default_factory=default_incidents_dir)
    keep: int = 50
    max_size: int = 200 * 1024 * 1024

    def new_id(self, epoch: float) -> str:
        """An id for ``epoch`` not used yet (two incidents in one millisecond get ``-1``, ``-2`` …)."""
        base = incident_id(epoch)
        candidate, n = base, 0
        while (self.root / candidate).exists():
            n += 1
            candidate = f"{base}-{n}"
        return candidate

    def save(self, incident: Incident, evidence: Mapping[str, bytes]) -> Incident:
        """Write the evidence files and the record (files listed with their sizes), then apply retention.
        The folder appears whole or not at all (written beside it, then renamed)."""
        for name in evidence:
            if not _FILE_NAME.match(name) or name == RECORD:
                raise ValueError(f"not an evidence file name: {name!r}")
        self.root.mkdir(parents=True, exist_ok=True)
        files = tuple(EvidenceFile(name, len(data)) for name, data in evidence.items())
        incident = replace(incident, files=files)
        work = Path(tempfile.mkdtemp(prefix=".new-", dir=self.root))
        try:
            for name, data in evidence.items():
                (work / name).write_bytes(data)
            (work / RECORD).write_text(json.dumps(incident.to_json(), indent=2) + "\n", encoding="utf-8")
            os.rename(work, self.root / incident.id)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        self.prune(protect=incident.id)
        return incident

    def ids(self) -> list[str]:
        """The incidents' ids, oldest first."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir()
                      if is_incident_id(p.name) and (p / RECORD).is_file())

    def get(self, incident_id: str) -> Incident:
        path = self.root / incident_id / RECORD
        if not is_incident_id(incident_id) or not path.is_file():
            raise UnknownIncident(incident_id, self.ids())
        return Incident.from_json(json.loads(path.read_text(encoding="utf-8")))

    def all(self) -> list[Incident]:
        """Every readable incident, oldest first (an unreadable record is skipped, never fatal)."""
        out: list[Incident] = []
        for iid in self.ids():
            try:
                out.append(self.get(iid))
            except (ValueError, OSError, UnknownIncident):
                continue
        return out

    def evidence_path(self, incident_id: str, name: str) -> Path:
        return self.root / incident_id / name

    def update(self, incident_id: str, *, action: str | None = None,
               serving_again_s: float | None = None) -> Incident:
        """Fill in what was done and when the engine served again (the record is rewritten whole)."""
        incident = self.get(incident_id)
        if action is not None:
            incident = replace(incident, action=action)
        if serving_again_s is not None:
            incident = replace(incident, serving_again_s=serving_again_s)
        path = self.root / incident_id / RECORD
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(incident.to_json(), indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
        return incident

    def prune(self, protect: str | None = None) -> list[str]:
        """Remove the oldest incidents until at most ``keep`` remain and they hold at most ``max_size``
        bytes; ``protect`` (the newest one) stays even when it alone is over. Returns the removed ids."""
        incidents = self.all()
        removed: list[str] = []
        total = sum(i.total_size for i in incidents)
        while incidents and (len(incidents) > self.keep or total > self.max_size):
            oldest = incidents[0]
            if oldest.id == protect:
                break
            shutil.rmtree(self.root / oldest.id, ignore_errors=True)
            removed.append(oldest.id)
            total -= oldest.total_size
            incidents.pop(0)
        return removed
