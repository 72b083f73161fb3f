"""argv: one JSON object: {"path": DIR} | {"hf_id": "org/name", "hf_home": DIR?} | {"scan": true}.
Prints one JSON object (``sparktui.domain.model_files`` reads it): the directory's config.json, each
safetensors file's size and header length, the bytes in all. The HF cache is ``hf_home`` (the directory
docker mounts as the container's cache), else $HF_HOME, else ~/.cache/huggingface."""

from __future__ import annotations

import json
import os
import struct
import sys
from typing import Any

from sparktui.node.hf_cache import snapshot


def describe(path: str, with_config: bool = True) -> dict[str, Any]:
    safetensors: list[list[object]] = []
    out: dict[str, Any] = {"path": path, "exists": os.path.isdir(path), "safetensors": safetensors,
                           "bytes": 0}
    if not out["exists"]:
        return out
    cfg = os.path.join(path, "config.json")
    if with_config:
        try:
            if os.path.getsize(cfg) > 4 << 20:
                out["config_error"] = "config.json is over 4 MiB"
            else:
                with open(cfg, "rb") as f:
                    out["config"] = json.loads(f.read().decode("utf-8"))
        except (OSError, ValueError) as e:
            out["config_error"] = f"{type(e).__name__}: {e}"
    try:
        names = sorted(os.listdir(path))
    except OSError as e:
        out["error"] = str(e)
        return out
    for name in names:
        full = os.path.join(path, name)
        try:
            size = os.path.getsize(full)
        except OSError:
            continue
        if os.path.isfile(full):
            out["bytes"] += size
        if name.endswith(".safetensors"):
            try:
                with open(full, "rb") as f:
                    first = f.read(8)
                n = struct.unpack("<Q", first)[0] if len(first) == 8 else -1
            except OSError:
                n = -1
            safetensors.append([name, size, n])
    return out


def scan(home: str, hub: str) -> dict[str, Any]:
    """Every model of the HF cache and of ~/models (a directory with a config.json)."""
    found = []
    try:
        repos = sorted(os.listdir(hub))
    except OSError:
        repos = []
    for r in repos:
        if r.startswith("models--"):
            snap = snapshot(os.path.join(hub, r))
            if snap:
                d = describe(snap)
                d["hf_id"] = r[len("models--"):].replace("--", "/")
                found.append(d)
    mdir = os.path.join(home, "models")
    try:
        subs = sorted(os.listdir(mdir))
    except OSError:
        subs = []
    for s in subs:
        p = os.path.join(mdir, s)
        if os.path.isfile(os.path.join(p, "config.json")):
            found.append(describe(p))
    return {"home": home, "hub": hub, "models": found}


def main(argv: list[str]) -> None:
    req = json.loads(argv[0])
    home = os.path.expanduser("~")
    hf_home = os.path.expanduser(req.get("hf_home") or os.environ.get("HF_HOME") or "~/.cache/huggingface")
    hub = os.path.join(hf_home, "hub")
    if req.get("scan"):
        print(json.dumps(scan(home, hub)))
        return
    path = req.get("path")
    if not path and req.get("hf_id"):
        path = snapshot(os.path.join(hub, "models--" + req["hf_id"].replace("/", "--"))) or ""
    if path.startswith("~"):
        path = home + path[1:]
    print(json.dumps(describe(path) if path else {"path": "", "exists": False, "safetensors": [],
                                                 "bytes": 0, "hf_id": req.get("hf_id")}))


if __name__ == "__main__":
    main(sys.argv[1:])
