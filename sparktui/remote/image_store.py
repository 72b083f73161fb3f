"""The image in use, kept on the head (``sparktui/domain/lifecycle/image_in_use.py`` says why), read and
written as the head's other records are (``head_record``); and the config a start runs with: the upgrade's
trial image, else the one kept on the head, else the config's own ``engine.image``."""

from __future__ import annotations

from functools import partial

from sparktui.config import SparkConfig
from sparktui.domain.upgrade import images as I
from sparktui.remote.engine_nodes import EngineNodes
from sparktui.remote.head_record import read_record, write_record


async def read_image_in_use(nodes: EngineNodes) -> I.ImageInUse | None:
    """The image kept on the head (``None``: never kept, the host runtime, or not readable now)."""
    config = nodes.config
    if config.engine.runtime != "docker":
        return None
    text = await read_record(nodes, partial(I.read_argv, config))
    return I.ImageInUse.parse(text) if text is not None else None


async def write_image_in_use(nodes: EngineNodes, record: I.ImageInUse) -> bool:
    """Keep ``record`` on the head; ``False`` when it could not be (the upgrade says so: a promotion that
    is not kept would be undone by the next start)."""
    return await write_record(nodes, lambda homes: I.write_argv(nodes.config, homes, record), "image in use")


async def config_for_start(nodes: EngineNodes, config: SparkConfig, trial: str | None) -> SparkConfig:
    """``config`` as this start runs it: ``engine.image`` is the trial's, or the one kept on the head."""
    if config.engine.runtime != "docker":
        return config
    if trial is not None:
        return I.with_image(config, trial)
    return I.with_image(config, I.start_image(config, await read_image_in_use(nodes)))
