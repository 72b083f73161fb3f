"""``snapshot(repo_dir)``: the Hugging Face cache's snapshot of one model repo, shared by the ``model_info``
and ``audit`` scripts (one rule for which snapshot vLLM's hub client would load)."""

from __future__ import annotations

import os


def snapshot(repo_dir: str) -> str | None:
    """refs/main names the snapshot the hub client uses; else the newest snapshot with a config.json."""
    try:
        with open(os.path.join(repo_dir, "refs", "main")) as f:
            ref = os.path.join(repo_dir, "snapshots", f.read().strip())
        if os.path.isfile(os.path.join(ref, "config.json")):
            return ref
    except OSError:
        pass
    snaps = []
    try:
        for s in os.listdir(os.path.join(repo_dir, "snapshots")):
            p = os.path.join(repo_dir, "snapshots", s)
            if os.path.isfile(os.path.join(p, "config.json")):
                snaps.append((os.path.getmtime(p), p))
    except OSError:
        return None
    return max(snaps)[1] if snaps else None
