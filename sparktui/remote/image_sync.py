"""``sparktui image sync``: the head's engine image onto every node whose image ID differs or is missing,
streamed ``docker save`` (head) → this process → ``docker load`` (node) over the SSH connections."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sparktui.config import SparkConfig
from sparktui.domain.deadline import within
from sparktui.domain.lifecycle import argv as A
from sparktui.domain.lifecycle import image_copy as C
from sparktui.remote.transport import Transport, TransportError

ProgressFn = Callable[[str, int, int | None, float], None]
#: Seconds between progress reports.
PROGRESS_EVERY = 1.0


@dataclass(frozen=True)
class SyncOutcome:
    node: str
    action: str         # "same" | "copied" | "refused" | "failed"
    message: str
    bytes: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.action in ("same", "copied")


async def _node_image(transport: Transport, image: str, *, free: bool) -> C.NodeImage:
    res = await transport.run(A.docker_image_id(image), timeout=30)
    image_id = res.stdout.strip() if res.ok and res.stdout.strip() else None
    free_bytes = None
    if free:
        df = await transport.run(["sh", "-c", C.DOCKER_FREE_SH, "sparktui-df"], timeout=30)
        text = df.stdout.strip()
        free_bytes = int(text) if text.isdigit() else None
    return C.NodeImage(transport.name, image_id, free_bytes)


async def sync_image(config: SparkConfig, transports: Mapping[str, Transport],
                     progress: ProgressFn | None = None) -> list[SyncOutcome]:
    image = config.engine.image
    head_name = config.head.name
    head_t = transports[head_name]
    head = await _node_image(head_t, image, free=False)
    if head.image_id is None:
        return [SyncOutcome(head_name, "failed", f"image {image} is not on the head {head_name}: "
                            f"`docker pull {image}` there first")]
    size_res = await head_t.run(["docker", "image", "inspect", "--format", "{{.Size}}", image], timeout=30)
    size = int(size_res.stdout.strip()) if size_res.stdout.strip().isdigit() else 0
    out = [SyncOutcome(head_name, "same", f"{image} {head.image_id} (the source)")]
    for node in config.workers:
        try:
            target = await _node_image(transports[node.name], image, free=True)
            if not C.needs_copy(head, target):
                out.append(SyncOutcome(node.name, "same", f"already has {head.image_id}"))
                continue
            refusal = C.disk_refusal(target, size)
            if refusal:
                out.append(SyncOutcome(node.name, "refused", refusal))
                continue
            out.append(await _copy(head_t, transports[node.name], image, head.image_id, size or None,
                                   progress))
        except TransportError as exc:
            out.append(SyncOutcome(node.name, "failed", f"{node.name}: {exc}"))
    return out


async def _copy(src_t: Transport, dst_t: Transport, image: str, want_id: str, total: int | None,
                progress: ProgressFn | None) -> SyncOutcome:
    node = dst_t.name
    t0 = time.monotonic()
    sent = 0
    src = await src_t.start(["docker", "save", image])
    dst = await dst_t.start(["docker", "load", "-q"])
    try:
        last = t0
        async for chunk in src.chunks():
            await dst.write(chunk)
            sent += len(chunk)
            now = time.monotonic()
            if progress is not None and now - last >= PROGRESS_EVERY:
                last = now
                progress(node, sent, total, now - t0)
        await dst.close_stdin()
        loaded = await within(dst.wait(), 600)
        saved = await within(src.wait(), 30)
    finally:
        for proc in (src, dst):
            with contextlib.suppress(Exception):
                proc.terminate()
    seconds = time.monotonic() - t0
    if progress is not None:
        progress(node, sent, total, seconds)
    if saved not in (0, None):
        return SyncOutcome(node, "failed", f"docker save on the head exited {saved}: "
                           f"{(await src.stderr_text()).strip()[-300:]}", sent, seconds)
    if loaded not in (0, None):
        return SyncOutcome(node, "failed", f"{node}: docker load exited {loaded}: "
                           f"{(await dst.stderr_text()).strip()[-300:]}", sent, seconds)
    now_id = await _node_image(dst_t, image, free=False)
    if now_id.image_id != want_id:
        return SyncOutcome(node, "failed", f"{node}: after docker load the image is {now_id.image_id}, "
                           f"not {want_id}", sent, seconds)
    return SyncOutcome(node, "copied", f"copied {C.megabytes(sent)} in {seconds:.1f} s "
                       f"({C.megabytes(sent / seconds if seconds else 0)}/s); now {want_id}", sent, seconds)


__all__ = ["SyncOutcome", "sync_image"]
