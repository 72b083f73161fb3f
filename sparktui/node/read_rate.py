"""argv: one JSON object: {"path": DIR} | {"hf_id": "org/name", "hf_home": DIR?} | {"file": FILE}, with
"mib" (the most to read, default 1024) and "seconds" (the longest to read, default 10).

A short, bounded read test of a model's files, as vLLM reads them at a start: the largest ``*.safetensors``
file of the directory (the HF cache's snapshot of ``hf_id``; else its largest file), read from its start in
16 MiB blocks until ``mib`` MiB or ``seconds`` s, whichever comes first. The page cache must not answer
(a model read a minute ago would read at memory speed): the file is opened with ``O_DIRECT`` where the
filesystem takes it (reads into a page-aligned buffer), else its cached pages are dropped first with
``posix_fadvise(DONTNEED)`` ("fadvise": best effort, a page another process pins stays cached).

Prints one JSON object (``sparktui.domain.perf.disk_read`` reads it): the file, its size, the bytes read,
the seconds, GiB/s, the method ("direct" | "fadvise" | "cached": nothing could bypass the cache), or
``error``."""

from __future__ import annotations

import json
import mmap
import os
import sys
import time
from typing import Any

from sparktui.node.hf_cache import snapshot

BLOCK = 16 << 20   # a multiple of every O_DIRECT alignment (512 B - 4 KiB)


def largest_file(path: str) -> str | None:
    """The largest ``*.safetensors`` file in ``path`` (the shards vLLM reads), else its largest file."""
    best: tuple[int, int, str] | None = None
    try:
        names = os.listdir(path)
    except OSError:
        return None
    for name in names:
        full = os.path.join(path, name)
        try:
            if not os.path.isfile(full):
                continue
            key = (1 if name.endswith(".safetensors") else 0, os.path.getsize(full), full)
        except OSError:
            continue
        if best is None or key > best:
            best = key
    return best[2] if best is not None else None


def open_dropped(path: str) -> tuple[int, str]:
    """A plain descriptor after the file's cached pages were dropped ("fadvise"), or not ("cached")."""
    fd = os.open(path, os.O_RDONLY)
    advise = getattr(os, "posix_fadvise", None)
    if advise is not None:
        try:
            advise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            return fd, "fadvise"
        except OSError:
            pass
    return fd, "cached"


def open_uncached(path: str) -> tuple[int, str]:
    """A descriptor that reads past the page cache, and how."""
    direct = getattr(os, "O_DIRECT", 0)
    if direct:
        try:
            return os.open(path, os.O_RDONLY | direct), "direct"
        except OSError:
            pass   # tmpfs, some overlay and network filesystems refuse O_DIRECT
    return open_dropped(path)


def read_test(path: str, limit: int, seconds: float) -> dict[str, Any]:
    size = os.path.getsize(path)
    fd, method = open_uncached(path)
    buf = mmap.mmap(-1, BLOCK)   # page-aligned, as O_DIRECT needs
    view = memoryview(buf)
    done = 0
    t0 = time.monotonic()
    try:
        while done < limit and time.monotonic() - t0 < seconds:
            try:
                # The last block only up to the bound (rounded up to 4 KiB, O_DIRECT's largest alignment).
                want = min(BLOCK, -(-(limit - done) // 4096) * 4096)
                n = os.readv(fd, [view[:want]])
            except OSError:
                if method != "direct" or done:
                    raise
                # The filesystem took O_DIRECT at open but not at read (EINVAL): read the plain way.
                os.close(fd)
                fd, method = open_dropped(path)
                continue
            if n <= 0:
                break
            done += n
        took = time.monotonic() - t0
    finally:
        os.close(fd)
        view.release()
        buf.close()
    gib_s = done / took / (1 << 30) if took > 0 else None
    return {"file": path, "file_bytes": size, "bytes": done, "seconds": round(took, 4),
            "gib_s": None if gib_s is None else round(gib_s, 4), "method": method}


def main(argv: list[str]) -> None:
    req = json.loads(argv[0])
    limit = int(float(req.get("mib") or 1024) * (1 << 20))
    seconds = float(req.get("seconds") or 10)
    target = req.get("file")
    if not target:
        path = req.get("path") or ""
        if not path and req.get("hf_id"):
            hf_home = os.path.expanduser(req.get("hf_home") or os.environ.get("HF_HOME")
                                         or "~/.cache/huggingface")
            repo = os.path.join(hf_home, "hub", "models--" + req["hf_id"].replace("/", "--"))
            path = snapshot(repo) or ""
        path = os.path.expanduser(path)
        target = largest_file(path) if path else None
        if target is None:
            print(json.dumps({"error": f"no model files in {path or req.get('hf_id')!r}"}))
            return
    try:
        print(json.dumps(read_test(os.path.expanduser(target), limit, seconds)))
    except OSError as e:
        print(json.dumps({"file": target, "error": f"{type(e).__name__}: {e}"}))


if __name__ == "__main__":
    main(sys.argv[1:])
