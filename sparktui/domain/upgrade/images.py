"""Which engine image a start uses after an upgrade, and the record of every image tried (pure, but for the
history file's own reads and appends).

The image in use: ``sparktui upgrade`` promotes an image by writing ``image.json`` on the head, beside
``desired.json`` in ``engine.state_dir`` (by the same node script, which replaces the file atomically), so
every controller's later ``start`` uses it, and ``status`` and the dashboard can show it. The config is not
rewritten: a person who edits ``engine.image`` after the upgrade wins again (the override names the
``engine.image`` it overrode and applies only while that is still the configured one).

The record: one JSON line per upgrade outcome in ``$XDG_STATE_HOME/sparktui/images.jsonl``, beside the run
and bench histories and written the same way (one ``O_APPEND`` write per line); :func:`image_summaries` folds
it into one entry per image (its version, its figures, when it was promoted and rolled back, and why).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from sparktui.config import SparkConfig
from sparktui.domain.history import append_line, read_lines, state_dir
from sparktui.domain.json_report import last_json_object
from sparktui.domain.lifecycle import head_files

#: The override's name in ``engine.state_dir`` on the head (beside ``desired.json``).
IMAGE_FILE = "image.json"
#: The image history's name in the local state dir (beside ``runs.jsonl`` and ``bench.jsonl``).
IMAGES_HISTORY_FILE = "images.jsonl"
SCHEMA_VERSION = 1


def short_id(image_id: str | None) -> str:
    """``sha256:4f1c…`` → ``4f1c2a9b0d1e`` (docker's short form); ``?`` when unknown."""
    return image_id.removeprefix("sha256:")[:12] if image_id else "?"


# ---- the image in use ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ImageInUse:
    """The promoted image every start uses, and the one it replaced (``sparktui rollback``'s target)."""

    ref: str                       # tag or digest as the person named it
    image_id: str                  # docker's image ID, the same on every node (image sync copies by ID)
    vllm_version: str | None
    #: ``engine.image`` when the override was written: the override applies only while it is unchanged.
    configured: str
    previous_ref: str | None = None
    previous_id: str | None = None
    by: str = ""                   # who promoted it ("`sparktui upgrade`", "`sparktui rollback`")
    host: str = ""
    at: float = 0.0                # epoch seconds

    def to_json(self) -> str:
        return json.dumps({"v": SCHEMA_VERSION, **self.__dict__}, sort_keys=True)

    @classmethod
    def parse(cls, text: str) -> ImageInUse | None:
        """What the node script's ``read`` printed; None when none was written (``{}``) or it is not ours."""
        # The script prints the record last (``{}``: never written); noise lines around it are passed over.
        data = last_json_object(text)
        if data is None or not data.get("ref") or not data.get("image_id"):
            return None
        try:
            return cls(ref=str(data["ref"]), image_id=str(data["image_id"]),
                       vllm_version=_str_or_none(data.get("vllm_version")),
                       configured=str(data.get("configured", "")),
                       previous_ref=_str_or_none(data.get("previous_ref")),
                       previous_id=_str_or_none(data.get("previous_id")),
                       by=str(data.get("by", "")), host=str(data.get("host", "")),
                       at=float(data.get("at", 0.0)))
        except (TypeError, ValueError):
            return None

    def applies_to(self, config: SparkConfig) -> bool:
        """Docker only (a host runtime runs the nodes' own vLLM), and only while ``engine.image`` is the
        one it overrode."""
        return config.engine.runtime == "docker" and config.engine.image == self.configured

    def describe(self) -> str:
        """``vllm/vllm-openai:v0.22.0 (4f1c2a9b0d1e, vLLM 0.22.0), promoted by `sparktui upgrade` on laptop
        at 2026-12-04 15:30``."""
        version = f", vLLM {self.vllm_version}" if self.vllm_version else ""
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.at))
        by = f" by {self.by}" if self.by else ""
        on = f" on {self.host}" if self.host else ""
        return f"{self.ref} ({short_id(self.image_id)}{version}), promoted{by}{on} at {when}"


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def start_image(config: SparkConfig, override: ImageInUse | None) -> str:
    """The image a start runs: the promoted image's ID (not its tag, which a later pull may move) while the
    override applies, else ``engine.image``."""
    if override is not None and override.applies_to(config):
        return override.image_id
    return config.engine.image


def with_image(config: SparkConfig, image: str) -> SparkConfig:
    """``config`` with ``engine.image`` replaced (the rest shared, as pydantic's copies are)."""
    if config.engine.image == image:
        return config
    return config.model_copy(update={"engine": config.engine.model_copy(update={"image": image})})


def kept_images(override: ImageInUse | None) -> frozenset[str]:
    """Image IDs no clean-up may remove on any node: the one in use and the rollback target."""
    if override is None:
        return frozenset()
    return frozenset(i for i in (override.image_id, override.previous_id) if i)


def image_path(config: SparkConfig, homes: Mapping[str, str] | None) -> str:
    return head_files.head_file(config, homes, IMAGE_FILE)


def write_argv(config: SparkConfig, homes: Mapping[str, str] | None, override: ImageInUse) -> list[str]:
    return head_files.write_argv(config, homes, IMAGE_FILE, override.to_json())


def read_argv(config: SparkConfig, homes: Mapping[str, str] | None) -> list[str]:
    return head_files.read_argv(config, homes, IMAGE_FILE)


# ---- the record of images ------------------------------------------------------------------------------
class ImageEvent(StrEnum):
    PROMOTED = "promoted"
    ROLLED_BACK = "rolled back"     # tried, and the previous image serves again
    REFUSED = "refused"             # failed a check before any downtime (a flag it lacks …)


@dataclass(frozen=True)
class ImageRecord:
    """One upgrade outcome for one image."""

    at: float                      # epoch seconds
    event: ImageEvent
    ref: str
    image_id: str | None
    vllm_version: str | None
    reason: str
    #: The verdict's figures, level by level (``LevelFigures.to_json``): old and new output tok/s.
    figures: tuple[Mapping[str, Any], ...] = ()
    #: Stop → serving again, seconds (None: no downtime, or it was not measured).
    downtime_s: float | None = None
    previous_ref: str | None = None
    previous_id: str | None = None
    cluster: str = ""

    def to_json(self) -> str:
        data = {"v": SCHEMA_VERSION, **self.__dict__, "event": self.event.value,
                "figures": [dict(f) for f in self.figures]}
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> ImageRecord:
        """Raises ``ValueError`` for anything that is not a line we wrote."""
        data: Any = json.loads(line)
        if not isinstance(data, dict):
            raise ValueError("not an object")
        figures = data.get("figures") or []
        if not isinstance(figures, list) or not all(isinstance(f, dict) for f in figures):
            raise ValueError("figures is not a list of objects")
        try:
            return cls(at=float(data["at"]), event=ImageEvent(data["event"]), ref=str(data["ref"]),
                       image_id=_str_or_none(data.get("image_id")),
                       vllm_version=_str_or_none(data.get("vllm_version")),
                       reason=str(data.get("reason", "")),
                       figures=tuple(figures),
                       downtime_s=None if data.get("downtime_s") is None else float(data["downtime_s"]),
                       previous_ref=_str_or_none(data.get("previous_ref")),
                       previous_id=_str_or_none(data.get("previous_id")),
                       cluster=str(data.get("cluster", "")))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"bad image record: {exc!r}") from exc


def default_images_path() -> Path:
    return state_dir() / IMAGES_HISTORY_FILE


class ImageHistory:
    """The images file. Reading skips lines it cannot parse (a crash mid-write, a newer schema)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else default_images_path()

    def append(self, record: ImageRecord) -> None:
        append_line(self.path, record.to_json())

    def load(self) -> list[ImageRecord]:
        """Oldest first."""
        return sorted(read_lines(self.path, ImageRecord.from_json), key=lambda r: r.at)


@dataclass(frozen=True)
class ImageSummary:
    """One image over its whole record: the latest of each fact."""

    ref: str
    image_id: str | None
    vllm_version: str | None
    promoted_at: float | None = None
    rolled_back_at: float | None = None
    refused_at: float | None = None
    #: The reason of its latest outcome.
    reason: str = ""
    figures: tuple[Mapping[str, Any], ...] = field(default=())

    @property
    def last_event(self) -> ImageEvent | None:
        times = {ImageEvent.PROMOTED: self.promoted_at, ImageEvent.ROLLED_BACK: self.rolled_back_at,
                 ImageEvent.REFUSED: self.refused_at}
        known = {e: t for e, t in times.items() if t is not None}
        return max(known, key=lambda e: known[e]) if known else None


def image_summaries(records: Iterable[ImageRecord], cluster: str | None = None) -> list[ImageSummary]:
    """One entry per image (by ID, else by ref), in the order each was first tried."""
    out: dict[str, ImageSummary] = {}
    for r in sorted(records, key=lambda r: r.at):
        if cluster is not None and r.cluster != cluster:
            continue
        key = r.image_id or r.ref
        s = out.get(key) or ImageSummary(r.ref, r.image_id, r.vllm_version)
        stamp = {ImageEvent.PROMOTED: "promoted_at", ImageEvent.ROLLED_BACK: "rolled_back_at",
                 ImageEvent.REFUSED: "refused_at"}[r.event]
        out[key] = ImageSummary(
            ref=r.ref, image_id=r.image_id or s.image_id, vllm_version=r.vllm_version or s.vllm_version,
            promoted_at=r.at if stamp == "promoted_at" else s.promoted_at,
            rolled_back_at=r.at if stamp == "rolled_back_at" else s.rolled_back_at,
            refused_at=r.at if stamp == "refused_at" else s.refused_at,
            reason=r.reason, figures=r.figures or s.figures)
    return list(out.values())


def rollback_target(override: ImageInUse | None, records: Sequence[ImageRecord],
                    configured: str) -> tuple[str, str | None] | None:
    """``sparktui rollback``'s target as (ref, image ID): the image the one in use replaced; without an
    override nothing was upgraded (the configured image is in use) and there is nothing to return to."""
    if override is None:
        return None
    if override.previous_ref:
        return override.previous_ref, override.previous_id
    # An override without its predecessor (written by hand): the latest other promoted image, else the config.
    for r in reversed(sorted(records, key=lambda r: r.at)):
        if r.event is ImageEvent.PROMOTED and r.image_id != override.image_id:
            return r.ref, r.image_id
    return configured, None
