"""Helpers of the lifecycle tests: test-bed configs for the stand-in engine, and transports."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sparktui.config import SparkConfig
from sparktui.remote.transport import CommandResult, LocalTransport, RemoteProcess
from tests.testbed import Testbed
from tests.testbed.bed import MODEL_DIR

#: What a GPU-less test host's Ray node declares (vLLM's placement needs one GPU per node).
RAY_START_ARGS = ["--num-gpus", "1", "--num-cpus", "1", "--object-store-memory", "80000000",
                  "--include-dashboard=false"]


def lifecycle_overrides(bed: Testbed, pace: float = 4.0, **engine: Any) -> dict[str, Any]:
    """Config overrides: Ray args for GPU-less hosts, a fast stand-in, the model dir in each host's /tmp."""
    env = {
        "RAY_USAGE_STATS_ENABLED": "0",
        "SPARKTUI_STANDIN_PACE": str(pace),
        "SPARKTUI_STANDIN_SEQ": "1",
        # Notice a killed worker raylet within a few seconds (Ray's default is ~30 s).
        "RAY_health_check_period_ms": "500",
        "RAY_health_check_failure_threshold": "4",
        "RAY_health_check_initial_delay_ms": "500",
    }
    env.update(engine.pop("env", {}))
    return {
        "engine": {
            "model": MODEL_DIR,
            "ray_start_args": RAY_START_ARGS,
            "ray_python": [sys.executable],
            # Answers `nvidia-smi -L` as a real image does (its host's /tmp/sparktui-standin-gpus: count).
            "gpu_list_command": [sys.executable, "-m", "sparktui.sim.nvidia_smi_standin", "-L"],
            "ray_wait_timeout": 40.0,
            "stop_grace": 3.0,
            "extra_args": ["--max-model-len", "4096"],
            "env": env,
            **engine,
        },
    }


def make_model_dirs(bed: Testbed, names: Sequence[str] | None = None) -> None:
    """The same small "model" directory on every host (in its private /tmp): ``Testbed.make_model_dirs``."""
    bed.make_model_dirs(names)


def lifecycle_config(bed: Testbed, **kwargs: Any) -> SparkConfig:
    config: SparkConfig = bed.spark_config(**lifecycle_overrides(bed, **kwargs))
    return config


class NsenterTransport(LocalTransport):
    """Runs commands inside one test host through ``nsenter`` (when the SSH transport is not needed)."""

    def __init__(self, name: str, prefix: Sequence[str]) -> None:
        super().__init__(name)
        self.prefix = list(prefix)

    async def run(self, argv: Sequence[str], *, input: bytes | None = None, timeout: float | None = None,
                  env: Mapping[str, str] | None = None) -> CommandResult:
        return await super().run([*self.prefix, *argv], input=input, timeout=timeout, env=env)

    async def start(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> RemoteProcess:
        return await super().start([*self.prefix, *argv], env=env)


def nsenter_transports(bed: Testbed) -> dict[str, NsenterTransport]:
    return {name: NsenterTransport(name, bed.nsenter(name)) for name in bed.names}


def host_path(bed: Testbed, name: str, path: str) -> Path:
    """A path under a host's private /tmp as seen from here."""
    assert path.startswith("/tmp/")
    return bed.host_tmp(name) / path[len("/tmp/"):]
