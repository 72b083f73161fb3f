"""The engine image every start uses, kept on the head beside the desired state (pure).

``engine.image`` in a config is where a cluster begins; ``sparktui upgrade`` promotes a new image by
keeping it here, so every sparktui that starts this engine — a dashboard on a laptop, the supervisor on the
head, a CLI verb with another config file — starts the same image, and ``sparktui rollback`` returns to the
one before it. An upgrade's trial is never kept here: a trial interrupted by anything (even SIGKILL) leaves
the promoted image in use, so the next start is the way back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from sparktui.config import SparkConfig
from sparktui.domain.lifecycle import scripts as S
from sparktui.domain.lifecycle.plan import state_dir

#: The file's name in ``engine.state_dir`` on the head.
IMAGE_FILE = "image.json"


@dataclass(frozen=True)
class ImageInUse:
    image: str
    #: ``sha256:…`` as ``docker image inspect`` gives it (the same on every node after distribution).
    image_id: str
    vllm_version: str | None
    #: The image it replaced (what ``sparktui rollback`` returns to), and that one's ID.
    previous: str | None
    previous_id: str | None
    #: Who promoted it ("`sparktui upgrade`"), on which machine, when (epoch seconds).
    by: str
    host: str
    at: float

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def parse(cls, text: str) -> ImageInUse | None:
        """What the node script's ``read`` printed; ``None`` when nothing was kept (or it is not ours)."""
        try:
            data = json.loads(text.strip().splitlines()[-1]) if text.strip() else {}
        except ValueError:
            return None
        if not isinstance(data, Mapping) or not isinstance(data.get("image"), str) or not data["image"]:
            return None

        def text_or_none(key: str) -> str | None:
            value = data.get(key)
            return str(value) if value not in (None, "") else None

        try:
            at = float(str(data.get("at", 0.0)))
        except ValueError:
            at = 0.0
        return cls(str(data["image"]), str(data.get("image_id") or ""), text_or_none("vllm_version"),
                   text_or_none("previous"), text_or_none("previous_id"), str(data.get("by", "")),
                   str(data.get("host", "")), at)

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.at))
        version = f", vLLM {self.vllm_version}" if self.vllm_version else ""
        return f"{self.image} ({short_id(self.image_id)}{version}; set by {self.by} on {self.host} at {when})"


def short_id(image_id: str | None) -> str:
    """``sha256:0123456789ab…`` → ``0123456789ab`` (as ``docker images`` shows it)."""
    if not image_id:
        return "?"
    return image_id.removeprefix("sha256:")[:12]


def image_path(config: SparkConfig, homes: Mapping[str, str] | None) -> str:
    return state_dir(config, homes, config.head.name).rstrip("/") + "/" + IMAGE_FILE


def write_argv(config: SparkConfig, homes: Mapping[str, str] | None, record: ImageInUse) -> list[str]:
    """Run on the head's host (not in a container); the atomic JSON record script (node/json_file.py)."""
    return [config.head.python, "-c", S.JSON_FILE_PY, "write", image_path(config, homes), record.to_json()]


def read_argv(config: SparkConfig, homes: Mapping[str, str] | None) -> list[str]:
    return [config.head.python, "-c", S.JSON_FILE_PY, "read", image_path(config, homes)]


def with_image(config: SparkConfig, image: str) -> SparkConfig:
    """``config`` with ``engine.image`` replaced (the rest shared, as pydantic's copies do)."""
    if config.engine.image == image:
        return config
    return config.model_copy(update={"engine": config.engine.model_copy(update={"image": image})})
