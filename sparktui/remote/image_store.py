"""The image in use, kept on the head (``sparktui/domain/lifecycle/image_in_use.py`` says why), read and
written over the head's link; and the config a start runs with: the upgrade's trial image, else the one
kept on the head, else the config's own ``engine.image``."""

from __future__ import annotations

import logging

from sparktui.config import SparkConfig
from sparktui.domain.lifecycle import image_in_use as I
from sparktui.remote.engine_nodes import EngineNodes
from sparktui.remote.transport import TransportError

log = logging.getLogger(__name__)


async def read_image_in_use(nodes: EngineNodes) -> I.ImageInUse | None:
    """The image kept on the head (``None``: never kept, the host runtime, or not readable now)."""
    config = nodes.config
    if config.engine.runtime != "docker":
        return None
    try:
        await nodes.resolve_homes(quiet=True)
        result = await nodes.run(config.head.name, I.read_argv(config, nodes.homes or None), 20)
    except TransportError:
        return None
    return I.ImageInUse.parse(result.stdout) if result.ok else None


async def write_image_in_use(nodes: EngineNodes, record: I.ImageInUse) -> str | None:
    """Keep ``record`` on the head; what went wrong, if anything (the upgrade says it: a promotion that
    is not kept would be undone by the next start)."""
    config = nodes.config
    try:
        await nodes.resolve_homes(quiet=True)
        result = await nodes.run(config.head.name, I.write_argv(config, nodes.homes or None, record), 20)
    except TransportError as exc:
        return str(exc)
    if not result.ok:
        return (result.stderr or result.stdout).strip()[-300:] or f"exit {result.returncode}"
    return None


async def config_for_start(nodes: EngineNodes, config: SparkConfig, trial: str | None) -> SparkConfig:
    """``config`` as this start runs it: ``engine.image`` is the trial's, or the one kept on the head."""
    if config.engine.runtime != "docker":
        return config
    if trial is not None:
        return I.with_image(config, trial)
    kept = await read_image_in_use(nodes)
    return I.with_image(config, kept.image) if kept is not None else config
