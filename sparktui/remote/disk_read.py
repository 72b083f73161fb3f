"""The model files' read test on every node at once (``sparktui model read-test``): the node script
``sparktui/node/read_rate.py`` over each node's link, each reading kept in the local state dir
(:class:`~sparktui.domain.perf.disk_read.DiskReadStore`) for the start's explanation and ``plan``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

from sparktui.config import NodeConfig, SparkConfig
from sparktui.domain.lifecycle.preflight_plan import model_request
from sparktui.domain.perf.disk_read import (
    DEFAULT_MIB,
    DEFAULT_SECONDS,
    DiskRead,
    DiskReadStore,
    parse_read_test,
    read_test_argv,
)
from sparktui.remote.engine_nodes import failure_text
from sparktui.remote.transport import Transport, TransportError

#: Seconds the node may take beyond the test's own bound (python's start, listing the directory).
_SLACK_S = 30.0


async def measure_node(config: SparkConfig, node: NodeConfig, transport: Transport, *, mib: int = DEFAULT_MIB,
                       seconds: float = DEFAULT_SECONDS) -> DiskRead:
    argv = read_test_argv(node.python, model_request(config), mib, seconds)
    at = time.time()
    try:
        res = await transport.run(argv, timeout=seconds + _SLACK_S)
    except TransportError as exc:
        return DiskRead(node.name, None, at=at, error=str(exc))
    if not res.ok:
        return DiskRead(node.name, None, at=at, error=failure_text(res))
    return parse_read_test(node.name, res.stdout, at)


async def measure_disks(config: SparkConfig, transports: Mapping[str, Transport], *,
                        mib: int = DEFAULT_MIB, seconds: float = DEFAULT_SECONDS,
                        store: DiskReadStore | None = None) -> list[DiskRead]:
    """Every node's reading, in the config's node order; each is kept in ``store`` (the default store when
    None), failed ones too (with their error: ``latest`` skips them)."""
    readings = await asyncio.gather(*(measure_node(config, n, transports[n.name], mib=mib, seconds=seconds)
                                      for n in config.nodes))
    keep = store if store is not None else DiskReadStore()
    for reading in readings:
        keep.append(reading)
    return list(readings)
