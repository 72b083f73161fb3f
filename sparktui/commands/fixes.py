"""The dashboard's fix key: ``image sync`` or ``model sync`` run as the verbs run them, told as one line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sparktui.config import SparkConfig


class _Outcome(Protocol):
    """What ``SyncOutcome`` (image) and ``ModelOutcome`` (model) share."""

    @property
    def node(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def ok(self) -> bool: ...


def summary(outcomes: Sequence[_Outcome]) -> str:
    """``spark2: copied: …`` for every node but the source."""
    return "; ".join(f"{o.node}: {o.action}: {o.message}" for o in outcomes if o.action != "source") \
        or "nothing to do"


async def run_fix(config: SparkConfig, fix_id: str) -> str:
    """Run fix ``fix_id`` (``image_sync`` | ``model_sync``) over connections of its own; its one-line
    outcome, or ``RuntimeError`` with the nodes' reasons when it failed or was refused."""
    from sparktui.remote.cluster import close_cluster, open_cluster

    transports = await open_cluster(config)
    outcomes: Sequence[_Outcome]
    try:
        if fix_id == "image_sync":
            from sparktui.remote.image_sync import sync_image

            outcomes = await sync_image(config, transports)
        elif fix_id == "model_sync":
            from sparktui.remote.model_sync import sync_model

            outcomes = await sync_model(config, transports)
        else:
            raise ValueError(f"unknown fix {fix_id!r}")
    finally:
        await close_cluster(transports)
    if not all(o.ok for o in outcomes):
        raise RuntimeError(summary(outcomes))
    return summary(outcomes)
