"""Preflight's slow facts of an image, kept per image ID on the controller.

`vllm --version` and `vllm serve --help=all` each start a throw-away container of the image and import
vLLM (10 s and more on a Spark); what they answer is fixed by the image's content, which its ID names.
So they are asked once per image ID and kept in ``$XDG_CACHE_HOME/sparktui/vllm-facts/<id>.json``
(default ``~/.cache``). A new image (another ID) is asked afresh; an unreadable entry is ignored and
replaced. Host runtimes have no ID to key on and are always asked.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/sparktui/vllm-facts``, or ``~/.cache/sparktui/vllm-facts`` (XDG spec)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path(env.get("HOME", "~")) / ".cache"
    return root.expanduser() / "sparktui" / "vllm-facts"


_ID = re.compile(r"^(?:sha256:)?[0-9a-f]{12,64}$")


@dataclass
class VllmFactsCache:
    """``version`` and ``help`` text per image ID; ``get``/``put`` one field at a time."""

    root: Path

    def _path(self, image_id: str) -> Path | None:
        image_id = image_id.strip()
        if not _ID.match(image_id):
            return None   # not an ID docker gave (never a path piece from elsewhere)
        return self.root / (image_id.removeprefix("sha256:") + ".json")

    def _load(self, path: Path) -> dict[str, str]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)} \
            if isinstance(data, dict) else {}

    def get(self, image_id: str | None, field: str) -> str | None:
        path = self._path(image_id) if image_id else None
        return None if path is None else self._load(path).get(field)

    def put(self, image_id: str | None, field: str, value: str) -> None:
        """Kept when the directory is writable; a cache that cannot be written only costs time."""
        path = self._path(image_id) if image_id else None
        if path is None:
            return
        data = {**self._load(path), field: value}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data), encoding="utf-8")
            tmp.replace(path)
        except OSError:
            pass
