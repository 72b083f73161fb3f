"""A model directory as sizing and ``init`` see it: config.json, safetensors headers, sizes (pure).

A safetensors file is an 8-byte little-endian header length N, N bytes of JSON (tensor name → dtype,
shape, ``data_offsets`` into the data section; an optional ``__metadata__``), then the data section.
So a file's weights are exactly ``size − 8 − N`` bytes, and reading 8 bytes per file on the node is
enough to know them; ``parse_safetensors_header`` reads a whole header (no library) to check it.

``MODEL_INFO_PY`` runs on a node (standard library only, like the probe): it reports one model
directory (``{"path": …}`` or a Hugging Face id resolved in the node's HF cache) or lists every model
under the HF cache and ``~/models`` (``{"scan": true}``).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparktui.domain.json_report import last_json_object
from sparktui.node import source

#: Bytes per element of the safetensors dtypes.
SAFETENSORS_DTYPE_BYTES: dict[str, float] = {
    "F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2, "U16": 2,
    "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I8": 1, "U8": 1, "BOOL": 1, "F4": 0.5, "F6_E2M3": 0.75,
    "F6_E3M2": 0.75,
}
#: Headers larger than this are refused (the format's own readers cap them at 100 MB).
MAX_HEADER_BYTES = 100_000_000


class SafetensorsError(ValueError):
    pass


@dataclass(frozen=True)
class SafetensorsHeader:
    header_len: int
    tensors: int
    #: Size of the data section the offsets describe.
    data_bytes: int
    #: Bytes per dtype (``{"BF16": …, "F8_E4M3": …}``): how a checkpoint is quantized.
    dtype_bytes: Mapping[str, int]
    metadata: Mapping[str, str] = field(default_factory=dict)


def header_length(first8: bytes) -> int:
    if len(first8) < 8:
        raise SafetensorsError(f"file too short for a safetensors header ({len(first8)} bytes)")
    (n,) = struct.unpack("<Q", first8[:8])
    if n > MAX_HEADER_BYTES:
        raise SafetensorsError(f"header length {n} is over {MAX_HEADER_BYTES} bytes: not a safetensors file")
    return int(n)


def parse_safetensors_header(data: bytes) -> SafetensorsHeader:
    """The start of a safetensors file (at least 8 + N bytes) → what its header says."""
    n = header_length(data)
    raw = data[8:8 + n]
    if len(raw) < n:
        raise SafetensorsError(f"header says {n} bytes, only {len(raw)} given")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SafetensorsError(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise SafetensorsError("header is not a JSON object")
    end, count = 0, 0
    by_dtype: dict[str, int] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            start, stop = (int(x) for x in info["data_offsets"])
            dtype = str(info["dtype"])
            shape = [int(d) for d in info["shape"]]
        except (KeyError, TypeError, ValueError):
            raise SafetensorsError(f"tensor {name!r}: needs dtype, shape and data_offsets") from None
        if stop < start:
            raise SafetensorsError(f"tensor {name!r}: data_offsets {start}..{stop} run backwards")
        width = SAFETENSORS_DTYPE_BYTES.get(dtype)
        need = math.ceil(math.prod(shape) * width) if width is not None else None
        if need is not None and need != stop - start:
            raise SafetensorsError(f"tensor {name!r}: {dtype} {shape} needs {need} bytes, "
                                   f"offsets give {stop - start}")
        by_dtype[dtype] = by_dtype.get(dtype, 0) + stop - start
        end = max(end, stop)
        count += 1
    meta = header.get("__metadata__") or {}
    return SafetensorsHeader(n, count, end, by_dtype, {str(k): str(v) for k, v in dict(meta).items()})


# ---- the node side -------------------------------------------------------------------------------
#: ``sparktui/node/model_info.py`` (its argv and output are said there).
MODEL_INFO_PY = source("model_info")


def model_info_argv(python: str, *, path: str | None = None, hf_id: str | None = None,
                    hf_home: str | None = None, scan: bool = False) -> list[str]:
    req: dict[str, Any] = {"scan": True} if scan else ({"path": path} if path else {"hf_id": hf_id})
    if hf_home:
        req["hf_home"] = hf_home
    return [python, "-c", MODEL_INFO_PY, json.dumps(req)]


@dataclass(frozen=True)
class ModelDir:
    """MODEL_INFO_PY's report on one directory."""

    path: str
    exists: bool
    config: Mapping[str, Any] | None = None
    config_error: str | None = None
    #: (file name, size, header length or -1 when unreadable)
    safetensors: tuple[tuple[str, int, int], ...] = ()
    total_bytes: int = 0
    hf_id: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelDir:
        files = tuple((str(n), int(s), int(h)) for n, s, h in data.get("safetensors") or ())
        cfg = data.get("config")
        return cls(path=str(data.get("path") or ""), exists=bool(data.get("exists")),
                   config=cfg if isinstance(cfg, dict) else None, config_error=data.get("config_error"),
                   safetensors=files, total_bytes=int(data.get("bytes") or 0), hf_id=data.get("hf_id"))

    @property
    def weights_bytes(self) -> int:
        """The tensors' bytes: each file's size less its 8-byte length and header."""
        return sum(size - 8 - n for _, size, n in self.safetensors if 0 <= n <= size - 8)

    @property
    def bad_files(self) -> list[str]:
        return [name for name, size, n in self.safetensors if not 0 <= n <= size - 8]

    @property
    def name(self) -> str:
        return self.hf_id or self.path.rstrip("/").rsplit("/", 1)[-1]


def parse_model_info(text: str) -> ModelDir:
    data = last_json_object(text)
    if data is None:
        raise ValueError("no JSON report in the output")
    return ModelDir.from_json(data)


def parse_model_scan(text: str) -> tuple[str, list[ModelDir]]:
    """(home, models) of a ``scan`` report."""
    data = last_json_object(text)
    if data is None:
        raise ValueError("no JSON report in the output")
    return str(data.get("home") or ""), [ModelDir.from_json(m) for m in data.get("models") or ()]


def weights_of(files: Sequence[tuple[str, int, int]]) -> int:
    return ModelDir("", True, safetensors=tuple(files)).weights_bytes


__all__ = ["MODEL_INFO_PY", "ModelDir", "SafetensorsError", "SafetensorsHeader", "header_length",
           "model_info_argv", "parse_model_info", "parse_model_scan", "parse_safetensors_header"]
