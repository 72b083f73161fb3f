#!/usr/bin/env python3
"""The node-side telemetry probe, as the controller and the tests know it by name.

The probe itself is the package ``sparktui/node/probe/`` (one module a job; its docstring says what a sample
holds and what it costs the node). The node runs its shipped text, ``sparktui.node.source("probe.main")``:
standard library only, Python 3.8+. This module names the probe's parts that the controller's own code
reads (the engine API's parsing helpers) and runs that shipped text when started by path
(``python3 sparktui/probe.py --count 1``), so a run here is the run a node makes.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # started by path: import the sparktui beside this file, not an installed one
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from sparktui.node import source
from sparktui.node.probe.engine_api import EngineApiReader, has_vllm_stats, only_families
from sparktui.node.probe.host import memory_section, parse_cpu_times, parse_meminfo, parse_psi
from sparktui.node.probe.main import next_aligned
from sparktui.node.probe.processes import classify, cpu_seconds
from sparktui.node.probe.rdma import _id_name, _rate_gbps

__all__ = ["EngineApiReader", "_id_name", "_rate_gbps", "classify", "cpu_seconds", "has_vllm_stats",
           "memory_section", "next_aligned", "only_families", "parse_cpu_times", "parse_meminfo", "parse_psi",
           "shipped_text"]


def shipped_text() -> str:
    """The probe's text as the node runs it (``python3 -c`` through ``probe_runner.BOOTSTRAP``)."""
    return source("probe.main")


if __name__ == "__main__":
    sys.argv[0] = "sparktui-probe"
    exec(compile(shipped_text(), "sparktui-probe", "exec"), {"__name__": "__main__"})
