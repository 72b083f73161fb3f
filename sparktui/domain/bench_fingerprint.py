"""What a benchmark measured (pure): the image ID, vLLM version, model, flags, nodes and the link's state,
so that a result is compared only with results of the same setup (``key``) and a difference between two runs
can be named (``bench --compare``).

``key`` leaves the link out on purpose: a run on a degraded cable is the same setup serving worse, and must be
compared with the same setup's baseline to show it.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Fingerprint:
    model: str
    image: str
    image_id: str | None
    vllm_version: str | None
    flags: tuple[str, ...]
    nodes: tuple[str, ...]
    tensor_parallel: int
    pipeline_parallel: int
    link: str

    @property
    def key(self) -> str:
        same = {k: v for k, v in asdict(self).items() if k != "link"}
        if self.image_id:
            same["image"] = ""   # the ID names the image; a tag may move
        return hashlib.sha256(json.dumps(same, sort_keys=True).encode()).hexdigest()[:12]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["flags"], data["nodes"] = list(self.flags), list(self.nodes)
        return {**data, "key": self.key}

    def describe(self) -> str:
        image = self.image + (f" ({self.image_id.removeprefix('sha256:')[:12]})" if self.image_id else "")
        flags = " ".join(self.flags) or "–"
        return (f"{self.model} on {image}, vLLM {self.vllm_version or '?'}, TP {self.tensor_parallel} × PP "
                f"{self.pipeline_parallel} over {', '.join(self.nodes)}, flags {flags}, link: {self.link} "
                f"[fingerprint {self.key}]")


def link_state(linktests: Sequence[Mapping[str, Any]]) -> str:
    """The newest linktest in words (its busbw, verdict and date), or that none was run."""
    if not linktests:
        return "not measured (no linktest)"
    last = linktests[-1]
    busbw = last.get("busbw_gbs")
    verdict = "pass" if last.get("ok") else "FAIL"
    at = last.get("at")
    when = time.strftime("%Y-%m-%d", time.gmtime(at)) if isinstance(at, (int, float)) else "?"
    figure = f"{busbw:g} GB/s " if isinstance(busbw, (int, float)) else ""
    return f"linktest {figure}{verdict} ({last.get('tool', '?')}, {when})"


__all__ = ["Fingerprint", "link_state"]
