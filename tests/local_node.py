"""A config whose one node is this machine (``local = true``, no SSH), for verbs run against loopback
servers; its prefix and state dir are the test's own, so no plan ever touches anything else here."""

from __future__ import annotations

import json
import os
from pathlib import Path


def write_local_config(path: Path, cluster: str, *, engine: str = "", tables: str = "") -> Path:
    """``engine``: more ``[engine]`` lines; ``tables``: more tables after it (e.g. ``[notify]``)."""
    path.write_text(f"""
[cluster]
name = "{cluster}"
[[nodes]]
name = "local"
host = "localhost"
local = true
role = "head"
[engine]
model = "/models/standin-model"
runtime = "host"
tensor_parallel_size = 1
name_prefix = "{cluster.replace('-', '')}{os.getpid()}"
state_dir = {json.dumps(str(path.parent / "state"))}
{engine}
{tables}
""")
    return path
