"""Copying the engine image from the head to the nodes that lack it (pure: the decisions and the words).

``sparktui image sync`` streams ``docker save IMAGE`` on the head into ``docker load`` on each node whose
image ID differs or is missing — no registry, no temp file on the controller — after checking that the
node's docker disk can hold it.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Room a ``docker load`` needs beyond the image's own size (layers unpack next to the incoming tar).
DISK_MARGIN = 1.2


@dataclass(frozen=True)
class NodeImage:
    node: str
    image_id: str | None
    #: Bytes available where the node's docker keeps images (``None``: unknown).
    free_bytes: int | None = None


def megabytes(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def needs_copy(head: NodeImage, node: NodeImage) -> bool:
    return node.node != head.node and node.image_id != head.image_id


def disk_short(node: str, free_bytes: int | None, need_bytes: int, what: str, where: str,
               fix: str) -> str | None:
    """Why ``need_bytes`` of ``what`` do not fit in ``free_bytes`` on ``node``, or ``None`` (also when the
    free space is unknown). The one disk rule of ``image sync`` and ``model sync``."""
    if free_bytes is None or free_bytes >= need_bytes:
        return None
    return (f"{node}: not enough disk for {what}: {megabytes(free_bytes)} free {where}, "
            f"{megabytes(need_bytes)} needed; {fix}")


def disk_refusal(node: NodeImage, image_bytes: int) -> str | None:
    """Why the image cannot be loaded on ``node`` (its disk is short), or ``None``."""
    return disk_short(node.node, node.free_bytes, int(image_bytes * DISK_MARGIN), "the image",
                      "where docker keeps images", "free some (`docker system prune`)")


def progress_line(node: str, sent: int, total: int | None, seconds: float) -> str:
    rate = sent / seconds if seconds > 0 else 0.0
    of = f" of {megabytes(total)}" if total else ""
    return f"{node}: {megabytes(sent)}{of} ({megabytes(rate)}/s)"


#: Prints the bytes available on the filesystem of docker's root dir (``docker info``), nothing on error.
DOCKER_FREE_SH = r"""
root=$(docker info --format '{{.DockerRootDir}}' 2>/dev/null) || exit 0
df -Pk "$root" 2>/dev/null | awk 'NR == 2 { printf "%.0f\n", $4 * 1024 }'
"""

__all__ = ["DISK_MARGIN", "DOCKER_FREE_SH", "NodeImage", "disk_refusal", "disk_short", "megabytes",
           "needs_copy", "progress_line"]
