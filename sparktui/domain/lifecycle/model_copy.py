"""Copying the model directory from the head to the other nodes (pure: the plan, the argv, the words).

``sparktui model sync`` runs rsync *on the head*, pushing over SSH to each other node's cable address
(``NodeConfig.address``), so the bytes cross the RoCE link once and never pass through the controller.
The head reaches the node with its own ``ssh`` (the node's configured user, batch mode, host keys checked;
``engine.sync_ssh_options`` adds e.g. an identity file). A dry run first (``--dry-run --stats``) says how
much would move: nothing → "already in sync"; more than the node's disk holds → refused. After a copy,
sizes and SHA-256 of every file are compared on both ends (``MODEL_SUMS_PY``).

A Hugging Face id (``engine.model`` not a path) is fetched by each node itself (``hf download``, else
``huggingface-cli download``) into its own HF cache.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sparktui.domain.lifecycle.image_copy import disk_short, megabytes

#: rsync's flags, and why: ``-a`` keeps times (the next run's quick check skips what is there),
#: ``--partial`` keeps a cut-off file so a rerun continues from it, ``--sparse`` keeps holes as holes,
#: ``--protect-args`` hands paths to the far side without a shell splitting them, ``--mkpath`` creates
#: the target's parents, ``--no-inc-recursive`` lets ``progress2`` know the total from the start.
RSYNC_FLAGS = ("-a", "--partial", "--sparse", "--protect-args", "--mkpath", "--no-inc-recursive")
#: Room a copy needs beyond the bytes it sends (``--partial`` writes each changed file beside the old one).
MODEL_DISK_MARGIN = 1.05
#: Seconds the head's ssh waits for a node before the sync says it cannot reach it.
SSH_CONNECT_TIMEOUT = 10


@dataclass(frozen=True)
class SyncTarget:
    """One node to copy to: its name, where the head reaches it, and the model directory there."""

    node: str
    address: str
    user: str | None
    path: str


def ssh_argv(target: SyncTarget, options: Sequence[str]) -> list[str]:
    """The head's ssh to ``target`` (what rsync's ``-e`` runs, and the reach check)."""
    argv = ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", f"ConnectTimeout={SSH_CONNECT_TIMEOUT}", *options]
    if target.user:
        argv += ["-l", target.user]
    return argv


def reach_argv(target: SyncTarget, options: Sequence[str]) -> list[str]:
    """Run on the head: can it SSH to the node, and has the node rsync (exit 0, else the reason)?"""
    return [*ssh_argv(target, options), target.address, "command -v rsync >/dev/null || exit 127"]


def _remote(target: SyncTarget) -> str:
    host = f"[{target.address}]" if ":" in target.address else target.address
    return f"{host}:{target.path.rstrip('/')}/"


def rsync_argv(source: str, target: SyncTarget, options: Sequence[str], *, dry_run: bool = False,
               checksum: bool = False) -> list[str]:
    """The rsync run on the head: ``source``'s contents into the node's model directory."""
    argv = ["rsync", *RSYNC_FLAGS, "--stats", "-e", shlex.join(ssh_argv(target, options))]
    if checksum:
        argv.append("--checksum")
    argv += ["--dry-run"] if dry_run else ["--info=progress2"]
    return [*argv, source.rstrip("/") + "/", _remote(target)]


@dataclass(frozen=True)
class RsyncStats:
    """What ``rsync --stats`` says at the end (of a dry run: what would move)."""

    files: int = 0
    files_transferred: int = 0
    total_bytes: int = 0
    transferred_bytes: int = 0
    literal_bytes: int = 0
    matched_bytes: int = 0


_STATS = {
    "Number of files": "files",
    "Number of regular files transferred": "files_transferred",
    "Total file size": "total_bytes",
    "Total transferred file size": "transferred_bytes",
    "Literal data": "literal_bytes",
    "Matched data": "matched_bytes",
}
_STAT_LINE = re.compile(r"^(?P<key>[A-Za-z ]+):\s*(?P<num>[\d,.]+)")


def parse_stats(text: str) -> RsyncStats:
    """``--stats`` lines → figures (unknown lines and garbage ignored; absent figures stay 0)."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        m = _STAT_LINE.match(line.strip())
        if m and m.group("key") in _STATS:
            digits = m.group("num").replace(",", "").split(".")[0]
            if digits.isdigit():
                values[_STATS[m.group("key")]] = int(digits)
    return RsyncStats(**values)


_PROGRESS2 = re.compile(r"^\s*(?P<bytes>[\d,]+)\s+(?P<pct>\d+)%\s")


def parse_progress(line: str) -> int | None:
    """One ``--info=progress2`` line (``  1,048,576  33%  250.00MB/s  0:00:04 (xfr#1, …)``) → bytes done."""
    m = _PROGRESS2.match(line)
    return int(m.group("bytes").replace(",", "")) if m else None


def progress_bar(node: str, done: int, total: int | None, seconds: float, width: int = 24) -> str:
    """``spark2 [#########...............] 38% 1,140.9 MB of 3,000.0 MB (312.4 MB/s)``."""
    rate = done / seconds if seconds > 0 else 0.0
    if not total:
        return f"{node}: {megabytes(done)} ({megabytes(rate)}/s)"
    share = min(1.0, done / total)
    filled = int(share * width)
    return (f"{node} [{'#' * filled}{'.' * (width - filled)}] {share:4.0%} {megabytes(done)} of "
            f"{megabytes(total)} ({megabytes(rate)}/s)")


def disk_refusal(node: str, free_bytes: int | None, send_bytes: int) -> str | None:
    return disk_short(node, free_bytes, int(send_bytes * MODEL_DISK_MARGIN), "the model",
                      "where the model directory goes", "free some, or point engine.model elsewhere")


def reach_problem(head: str, target: SyncTarget, returncode: int, stderr: str) -> str:
    """Why the head's ``reach_argv`` failed, with the fix."""
    who = f"{target.user}@{target.address}" if target.user else target.address
    text = stderr.strip()
    last = text.splitlines()[-1] if text else f"exit {returncode}"
    if returncode == 127:
        if "ssh" in text and "not found" in text:
            return f"{head} has no ssh client: install it there (`sudo apt install openssh-client`)"
        return rsync_missing(target.node)
    if "Host key verification failed" in text or "No ED25519 host key" in text or "host key" in text.lower():
        return (f"{head} does not know {target.node}'s host key ({who}): on {head} run `ssh {who} true` once "
                f"and check the fingerprint (host keys are always verified)")
    if "Permission denied" in text:
        return (f"{head} cannot log in to {target.node} as {who} (no key it accepts): on {head} run "
                f"`ssh-keygen -t ed25519` (if it has no key) and `ssh-copy-id {who}`, or name a key in "
                f"engine.sync_ssh_options")
    if returncode == 255 or "ssh:" in text:
        return f"{head} cannot SSH to {target.node} at {who}: {last}"
    return f"{head} → {target.node}: {last}"


def rsync_missing(node: str) -> str:
    return f"rsync is not installed on {node}: install it there (`sudo apt install rsync`)"


#: argv: COMMAND…: runs COMMAND (rsync) and ends it (SIGTERM: rsync keeps the partial file) as soon as our
#: stdin reaches EOF — the channel that started it closed, or the sparktui that opened it died. rsync alone
#: runs on for minutes after its channel is gone (its progress writes do not reach a closed pipe at once).
UNTIL_EOF_PY = r"""
import os, subprocess, sys, threading
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL)

def watch():
    try:
        while os.read(0, 65536):
            pass
    except OSError:
        pass
    child.terminate()

threading.Thread(target=watch, daemon=True).start()
code = child.wait()
sys.exit(code if code >= 0 else 128 - code)
"""


def copy_argv(python: str, rsync: Sequence[str]) -> list[str]:
    """``rsync`` under ``UNTIL_EOF_PY`` with the head's Python: it ends with its channel."""
    return [python, "-c", UNTIL_EOF_PY, *rsync]


#: Prints the bytes available on the filesystem that holds (or will hold) directory $1.
FREE_SH = r"""
d=$1
while [ ! -d "$d" ]; do d=$(dirname -- "$d"); done
df -Pk -- "$d" 2>/dev/null | awk 'NR == 2 { printf "%.0f\n", $4 * 1024 }'
"""

#: Run on a node with its Python: {"files": {relative path: [size, sha256]}} of directory argv[1]
#: (``{"missing": true}`` when there is none). Sparse holes read as zeros, fast.
MODEL_SUMS_PY = r"""
import hashlib, json, os, sys
root = sys.argv[1]
if not os.path.isdir(root):
    print(json.dumps({"missing": True}))
    sys.exit(0)
files = {}
for d, dirs, names in os.walk(root):
    dirs.sort()
    for n in sorted(names):
        p = os.path.join(d, n)
        if os.path.islink(p) or not os.path.isfile(p):
            continue
        h = hashlib.sha256()
        with open(p, "rb") as f:
            while True:
                b = f.read(1 << 22)
                if not b:
                    break
                h.update(b)
        files[os.path.relpath(p, root)] = [os.path.getsize(p), h.hexdigest()]
print(json.dumps({"files": files}))
"""


def parse_sums(text: str) -> dict[str, tuple[int, str]] | None:
    """``MODEL_SUMS_PY``'s output → path → (size, sha256); ``None`` when the directory is missing or the
    output is not its report."""
    try:
        data = json.loads(text.strip().splitlines()[-1]) if text.strip() else None
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        return None
    return {str(k): (int(v[0]), str(v[1])) for k, v in data["files"].items()}


def compare_sums(head: str, ref: Mapping[str, tuple[int, str]], node: str,
                 got: Mapping[str, tuple[int, str]]) -> list[str]:
    """What differs between the head's files and the node's (empty: identical)."""
    out = [f"{node}: missing {p}" for p in sorted(set(ref) - set(got))]
    out += [f"{node}: only here: {p}" for p in sorted(set(got) - set(ref))]
    for p in sorted(set(ref) & set(got)):
        if ref[p][0] != got[p][0]:
            out.append(f"{node}: {p}: {got[p][0]} bytes, {ref[p][0]} on {head}")
        elif ref[p][1] != got[p][1]:
            out.append(f"{node}: {p}: sha256 differs from {head}'s")
    return out


#: Run on a node: fetch Hugging Face model $1 into the node's HF cache with whichever CLI it has.
HF_DOWNLOAD_SH = r"""
if command -v hf >/dev/null 2>&1; then exec hf download "$1"; fi
if command -v huggingface-cli >/dev/null 2>&1; then exec huggingface-cli download "$1"; fi
echo "neither hf nor huggingface-cli is installed: pip install -U huggingface_hub" >&2
exit 127
"""


def hf_download_argv(model_id: str) -> list[str]:
    return ["sh", "-c", HF_DOWNLOAD_SH, "sparktui-hf", model_id]


def sums_argv(python: str, path: str) -> list[str]:
    return [python, "-c", MODEL_SUMS_PY, path]


def free_argv(path: str) -> list[str]:
    return ["sh", "-c", FREE_SH, "sparktui-df", path]


__all__ = [
    "HF_DOWNLOAD_SH", "MODEL_DISK_MARGIN", "MODEL_SUMS_PY", "RSYNC_FLAGS", "UNTIL_EOF_PY", "RsyncStats",
    "SyncTarget", "compare_sums", "copy_argv", "disk_refusal", "free_argv", "hf_download_argv",
    "parse_progress",
    "parse_stats", "parse_sums", "progress_bar", "reach_argv", "reach_problem", "rsync_argv", "rsync_missing",
    "ssh_argv", "sums_argv",
]
