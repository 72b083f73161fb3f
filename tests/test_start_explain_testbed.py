"""`sparktui start --wait --json` on the two-host test bed ends with why the start took as long as it did:
the stand-in replays a recorded two-node vLLM start (Ray, TP 4 × PP 2, 0.8.3), whose figures the
explanation reads per node, with the fix only where the stand-in's `vllm serve --help` accepts it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_helpers import run_sparktui
from tests.lifecycle_helpers import lifecycle_overrides, make_model_dirs
from tests.testbed import Testbed

pytestmark = [pytest.mark.testbed, pytest.mark.ray]


def test_start_wait_explains_the_start(testbed: Testbed, tmp_path: Path) -> None:
    make_model_dirs(testbed)
    config = testbed.write_config(tmp_path / "config.toml", **lifecycle_overrides(testbed, pace=2.0))
    c = ("--config", str(config))
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    try:
        start = run_sparktui(*c, "start", "--wait", "--json", env=env, timeout=240)
        assert start.returncode == 0, start.stdout + start.stderr
        report = json.loads(start.stdout)
    finally:
        stop = run_sparktui(*c, "stop", "--json", env=env, timeout=240)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    explanation = report["wait"]["explanation"]
    # The recording's capture: 34 s for 35 sizes, twice what a size costs elsewhere; the stand-in's help has
    # no flag that bounds them, so none is named.
    slowest = explanation["slowest"]
    assert slowest["stage"] == "cuda_graphs" and slowest["seconds"] == 34.0
    assert slowest["figures"]["sizes"] == 35 and slowest["fix"] is None
    assert "has neither --max-cudagraph-capture-size nor --cuda-graph-sizes" in slowest["because"]
    # Each node's own read, named as the log names it (the head, the worker by its Ray address).
    weights = {f["node"]: f for f in explanation["findings"] if f["stage"] == "weights"}
    assert len(weights) == 2 and "head" in weights
    assert {f["seconds"] for f in weights.values()} == {5.6, 10.45}
    assert not any(f["slow"] for f in weights.values())
