"""One transport per configured node: SSH, or the local machine for a node marked ``local = true``."""

from __future__ import annotations

import asyncio

from sparktui.config import NodeConfig, SparkConfig
from sparktui.remote.transport import LocalTransport, Transport


def make_transport(node: NodeConfig) -> Transport:
    if node.local:
        return LocalTransport(node.name)
    # Imported here so that verbs without SSH (timeline, the demo) never load asyncssh.
    from sparktui.remote.ssh import SSHTransport

    return SSHTransport(node)


async def open_cluster(config: SparkConfig, *, connect: bool = True) -> dict[str, Transport]:
    """A transport per node, in config order; with ``connect`` all first attempts run concurrently.

    Connecting never raises: a node that cannot be reached is in state RETRYING or FAILED, and keeps
    being retried in the background until ``close_cluster``.
    """
    transports = {node.name: make_transport(node) for node in config.nodes}
    if connect:
        await asyncio.gather(*(t.connect() for t in transports.values()))
    return transports


async def close_cluster(transports: dict[str, Transport]) -> None:
    await asyncio.gather(*(t.close() for t in transports.values()), return_exceptions=True)
