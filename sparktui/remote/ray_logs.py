"""Finding a node's Ray worker log (the file that holds that node's vLLM worker output) over its transport."""

from __future__ import annotations

import json

from sparktui.config import SparkConfig
from sparktui.domain.lifecycle import plan as P
from sparktui.domain.lifecycle import scripts as S
from sparktui.domain.lifecycle.ray_logs import choose_worker_log, parse_listing
from sparktui.remote.host_facts import read_home
from sparktui.remote.transport import Transport


async def ray_worker_log_path(
    config: SparkConfig, transport: Transport, node: str, homes: dict[str, str] | None = None
) -> str | None:
    """The path (on the node itself, readable with the node's python) of the log to follow, or ``None``."""
    python = config.node(node).python
    if homes is None and config.engine.runtime == "docker":
        res = await read_home(transport)
        homes = {node: res.stdout.strip()} if res.ok else None
    root = P.ray_log_root(config, homes, node)
    res = await transport.run([python, "-c", S.RAY_LOGS_PY, root], timeout=30)
    if not res.ok:
        return None
    try:
        directory, files, error = parse_listing(res.stdout)
    except (ValueError, KeyError, json.JSONDecodeError):
        return None
    if error:
        return None
    name = choose_worker_log(files)
    return f"{directory}/{name}" if name else None
