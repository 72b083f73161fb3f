"""What a start's explanation knows beyond its log, from the config and what sparktui kept: the disks'
measured rates, the image's ``serve --help``, whether the compile cache outlives the container, the
earlier starts of the model (:class:`~sparktui.domain.perf.start_explain.StartContext`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sparktui.config import SparkConfig
from sparktui.domain.history import RunRecord
from sparktui.domain.perf.disk_read import DiskRead, rates_by_log_node
from sparktui.domain.perf.start_explain import COMPILE_CACHE_TARGET, LoadOptions, StartContext
from sparktui.domain.upgrade.serve_help import parse_serve_help


def compile_cache_kept(config: SparkConfig) -> bool:
    """Whether vLLM's compile cache outlives the engine: on the node itself (host runtime), or a cache
    mount that covers its container path (docker)."""
    if config.engine.runtime != "docker":
        return True
    for mount in config.engine.cache_mounts:
        target = mount.target.rstrip("/")
        if target == COMPILE_CACHE_TARGET or COMPILE_CACHE_TARGET.startswith(target + "/"):
            return True
    return False


def load_options(help_text: str | None) -> LoadOptions | None:
    """What the image's vLLM accepts, from its help; None when unknown (no help, or vLLM ≥ 0.10's short
    summary, which cannot say that a flag is missing)."""
    if not help_text:
        return None
    help = parse_serve_help(help_text)
    return None if help.summary else LoadOptions.from_help(help)


def start_context(config: SparkConfig, *, help_text: str | None = None,
                  disk_reads: Mapping[str, DiskRead] | None = None, earlier: Sequence[RunRecord] = (),
                  image: str | None = None) -> StartContext:
    """``earlier``: the run history's starts of this cluster (those of another model are left out here)."""
    addresses = {n.name: n.address for n in config.nodes}
    model = config.engine.model
    return StartContext(
        disk_gib_s=rates_by_log_node(disk_reads or {}, config.head.name, addresses),
        options=load_options(help_text),
        cache_mounted=compile_cache_kept(config),
        earlier=tuple(r for r in earlier if r.model == model),
        image=image,
    )
