"""``sparktui model sync``: the head's model directory onto every other node, by rsync run on the head and
pushing over the node's cable address (or ``hf download`` on each node for a Hugging Face id).

Per node: the head's ssh reaches it and it has rsync → a dry run says what would move → nothing: "already
in sync"; more than its disk holds: refused → the copy, with progress → sizes and SHA-256 compared on both
ends. Nothing is copied through the controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from sparktui.config import NodeConfig, SparkConfig
from sparktui.domain.deadline import within
from sparktui.domain.lifecycle import model_copy as M
from sparktui.domain.lifecycle.argv import expand_home
from sparktui.domain.lifecycle.image_copy import megabytes
from sparktui.domain.lifecycle.output import output_tail
from sparktui.domain.lifecycle.preflight import model_host_path
from sparktui.domain.logs.stream import LineSplitter
from sparktui.remote.transport import Transport, TransportError

#: (node, bytes done, bytes to send or None, seconds since the copy began).
ProgressFn = Callable[[str, int, int | None, float], None]
#: Seconds between progress reports.
PROGRESS_EVERY = 1.0
#: Seconds a copy may take (a 119 GB model over a slow link is far under this).
COPY_TIMEOUT = 6 * 3600
HOME_SH = 'printf "%s\\n" "$HOME"'


@dataclass(frozen=True)
class ModelOutcome:
    node: str
    action: str         # "source" | "same" | "copied" | "would copy" | "downloaded" | "refused" | "failed"
    message: str
    bytes: int = 0      # the files' bytes that moved (rsync's "Total transferred file size")
    sent: int = 0       # bytes rsync sent as data (less than ``bytes`` when a rerun resumes a partial file)
    seconds: float = 0.0
    files: int = 0
    argv: tuple[str, ...] = ()
    detail: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.action in ("source", "same", "copied", "would copy", "downloaded")


async def _home(t: Transport) -> str | None:
    res = await t.run(["sh", "-c", HOME_SH], timeout=30)
    home = res.stdout.strip()
    return home if res.ok and home else None


def target_for(config: SparkConfig, node: NodeConfig, path: str) -> M.SyncTarget:
    return M.SyncTarget(node.name, node.address, node.user, path)


async def sync_model(config: SparkConfig, transports: Mapping[str, Transport],
                     progress: ProgressFn | None = None, *, dry_run: bool = False,
                     checksum: bool = False) -> list[ModelOutcome]:
    path = model_host_path(config)
    if path is None:
        return await _hf_download(config, transports, dry_run=dry_run)
    head = config.head
    head_t = transports[head.name]
    try:
        home = await _home(head_t)
        source = expand_home(path, home)
        has = await head_t.run(["sh", "-c", 'command -v rsync >/dev/null && test -d "$1"', "sh", source],
                               timeout=30)
        if not has.ok:
            rsync = await head_t.run(["sh", "-c", "command -v rsync"], timeout=30)
            why = M.rsync_missing(head.name) if not rsync.ok else f"{head.name}: {source}: no such directory"
            return [ModelOutcome(head.name, "failed", why)]
    except TransportError as exc:
        return [ModelOutcome(head.name, "failed", str(exc))]
    out = [ModelOutcome(head.name, "source", f"{source} (the source)")]
    ref = _HeadSums(head_t, head.python, source)
    options = list(config.engine.sync_ssh_options)
    for node in config.workers:
        try:
            dest = expand_home(path, await _home(transports[node.name]))
            target = target_for(config, node, dest)
            out.append(await _one(config, head_t, transports[node.name], source, target, options, ref,
                                  progress, dry_run=dry_run, checksum=checksum))
        except TransportError as exc:
            out.append(ModelOutcome(node.name, "failed", str(exc)))
    ref.cancel()
    return out


async def _one(config: SparkConfig, head_t: Transport, node_t: Transport, source: str, target: M.SyncTarget,
               options: list[str], head_sums: _HeadSums, progress: ProgressFn | None, *,
               dry_run: bool, checksum: bool) -> ModelOutcome:
    head = head_t.name
    reach = await head_t.run(M.reach_argv(target, options), timeout=M.SSH_CONNECT_TIMEOUT + 30)
    if not reach.ok:
        why = M.reach_problem(head, target, reach.returncode, reach.stderr)
        return ModelOutcome(target.node, "failed", why, detail=tuple(output_tail(reach.stderr)))
    plan = await head_t.run(M.rsync_argv(source, target, options, dry_run=True, checksum=checksum),
                            timeout=COPY_TIMEOUT)
    if not plan.ok:
        return ModelOutcome(target.node, "failed", f"rsync (dry run) on {head} exited {plan.returncode}: "
                            + (output_tail(plan.stderr) or [""])[-1], detail=tuple(output_tail(plan.stderr)))
    would = M.parse_stats(plan.stdout)
    argv = tuple(M.rsync_argv(source, target, options, checksum=checksum))
    if would.files_transferred == 0:
        return ModelOutcome(target.node, "same", f"already in sync with {head}: {would.files} entries, "
                            f"{megabytes(would.total_bytes)} (sizes and times"
                            f"{' and checksums' if checksum else ''} equal)", files=would.files, argv=argv)
    free = await node_t.run(M.free_argv(target.path), timeout=30)
    text = free.stdout.strip()
    refusal = M.disk_refusal(target.node, int(text) if text.isdigit() else None, would.transferred_bytes)
    if refusal:
        return ModelOutcome(target.node, "refused", refusal, would.transferred_bytes, argv=argv)
    if dry_run:
        return ModelOutcome(target.node, "would copy", f"{would.files_transferred} file(s), "
                            f"{megabytes(would.transferred_bytes)} from {head} to {target.address}:"
                            f"{target.path}", would.transferred_bytes, files=would.files_transferred,
                            argv=argv)
    head_sums.begin()   # read on the head while the copy runs
    done = await _copy(head_t, target.node, M.copy_argv(config.head.python, argv), would.transferred_bytes,
                       progress)
    if not done.ok:
        return replace(done, argv=argv)
    got = await node_t.run(M.sums_argv(config.node(target.node).python, target.path), timeout=COPY_TIMEOUT)
    theirs = M.parse_sums(got.stdout)
    ref = await head_sums.get()
    if ref is None or theirs is None:
        return ModelOutcome(target.node, "failed", f"copied, but the checksums could not be read "
                            f"(on {head if ref is None else target.node})", done.bytes, done.sent,
                            done.seconds, argv=argv)
    differ = M.compare_sums(head, ref, target.node, theirs)
    if differ:
        return ModelOutcome(target.node, "failed", f"copied, but {len(differ)} file(s) differ from {head}",
                            done.bytes, done.sent, done.seconds, argv=argv, detail=tuple(differ[:20]))
    rate = done.bytes / done.seconds if done.seconds else 0.0
    return ModelOutcome(target.node, "copied", f"{done.files} file(s), {megabytes(done.bytes)} in "
                        f"{done.seconds:.1f} s ({megabytes(rate)}/s, {megabytes(done.sent)} sent); "
                        f"{len(ref)} files, sizes and sha256 equal", done.bytes, done.sent, done.seconds,
                        done.files, argv)


class _HeadSums:
    """The head's sizes and SHA-256, read once (only when some node needs a copy), beside the first copy."""

    def __init__(self, t: Transport, python: str, path: str) -> None:
        self._argv = M.sums_argv(python, path)
        self._t = t
        self._task: asyncio.Task[dict[str, tuple[int, str]] | None] | None = None

    async def _read(self) -> dict[str, tuple[int, str]] | None:
        res = await self._t.run(self._argv, timeout=COPY_TIMEOUT)
        return M.parse_sums(res.stdout) if res.ok else None

    def begin(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._read())

    async def get(self) -> dict[str, tuple[int, str]] | None:
        self.begin()
        assert self._task is not None
        return await self._task

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()


async def _copy(head_t: Transport, node: str, argv: list[str], total: int,
                progress: ProgressFn | None) -> ModelOutcome:
    t0 = time.monotonic()
    proc = await head_t.start(argv)
    splitter = LineSplitter()
    kept: list[str] = []
    done = 0
    last = t0
    try:
        async def read() -> int | None:
            nonlocal done, last
            async for chunk in proc.chunks():
                for line in splitter.feed(chunk):
                    n = M.parse_progress(line)
                    if n is None:
                        kept.append(line)
                        continue
                    done = n
                    now = time.monotonic()
                    if progress is not None and now - last >= PROGRESS_EVERY:
                        last = now
                        progress(node, done, total, now - t0)
            return await proc.wait()
        code = await within(read(), COPY_TIMEOUT)
    finally:
        with contextlib.suppress(Exception):
            proc.terminate()
    seconds = time.monotonic() - t0
    stats = M.parse_stats("\n".join(kept))
    if progress is not None:
        progress(node, stats.transferred_bytes or done, total, seconds)
    if code != 0:
        err = output_tail(await proc.stderr_text())
        return ModelOutcome(node, "failed", f"rsync on {head_t.name} exited {code}: {(err or [''])[-1]} "
                            "(run `sparktui model sync` again: it continues where this stopped)", done,
                            seconds=seconds, detail=tuple(err))
    return ModelOutcome(node, "copied", "", stats.transferred_bytes, stats.literal_bytes, seconds,
                        stats.files_transferred)


async def _hf_download(config: SparkConfig, transports: Mapping[str, Transport], *,
                       dry_run: bool) -> list[ModelOutcome]:
    model = config.engine.model
    argv = tuple(M.hf_download_argv(model))

    async def one(node: NodeConfig) -> ModelOutcome:
        if dry_run:
            return ModelOutcome(node.name, "would copy", f"would run `hf download {model}` (else "
                                f"`huggingface-cli download {model}`) into {node.name}'s HF cache", argv=argv)
        t0 = time.monotonic()
        try:
            res = await transports[node.name].run(list(argv), timeout=COPY_TIMEOUT)
        except TransportError as exc:
            return ModelOutcome(node.name, "failed", str(exc), argv=argv)
        seconds = time.monotonic() - t0
        if not res.ok:
            tail = output_tail(res.stderr) or output_tail(res.stdout)
            return ModelOutcome(node.name, "failed", f"{node.name}: hf download {model} exited "
                                f"{res.returncode}: " + (tail or [""])[-1], seconds=seconds, argv=argv,
                                detail=tuple(tail))
        return ModelOutcome(node.name, "downloaded", f"{model} in {node.name}'s HF cache "
                            f"({res.stdout.strip().splitlines()[-1] if res.stdout.strip() else 'done'})",
                            seconds=seconds, argv=argv)

    return list(await asyncio.gather(*(one(n) for n in config.nodes)))


__all__ = ["ModelOutcome", "sync_model"]
