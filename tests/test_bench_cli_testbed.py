"""The verbs end to end on the two-host test bed: `sparktui start --wait` (the stand-in engine over real
Ray), `sparktui bench` against it through the head's SSH port forward (the stand-in's own `vllm bench
serve` found and used on the head), and `[notify]` hearing "ready" from the start and "stopped" from the
stop, each once."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sparktui.sim.standin_load import LoadShape
from tests.cli_helpers import run_sparktui
from tests.lifecycle_helpers import lifecycle_overrides, make_model_dirs
from tests.test_notify import RECORDER
from tests.testbed import Testbed

pytestmark = [pytest.mark.testbed, pytest.mark.ray]


def test_start_bench_stop_with_notifications(testbed: Testbed, tmp_path: Path) -> None:
    make_model_dirs(testbed)
    script = tmp_path / "record.py"
    script.write_text(RECORDER)
    received = tmp_path / "received.jsonl"
    overrides = lifecycle_overrides(testbed, pace=2.0)
    overrides["notify"] = {"command": [sys.executable, str(script), str(received)], "min_interval": 0.0}
    config = testbed.write_config(tmp_path / "config.toml", **overrides)
    c = ("--config", str(config))
    history = str(tmp_path / "bench.jsonl")
    try:
        start = run_sparktui(*c, "start", "--wait", timeout=240)
        assert start.returncode == 0, start.stdout + start.stderr
        for client in ("builtin", "auto"):
            bench = run_sparktui(*c, "bench", "--client", client, "--concurrency", "1,4", "--requests", "8",
                                 "--input-len", "16", "--output-len", "16", "--warmup", "1", "--json",
                                 "--file", history, timeout=240)
            assert bench.returncode == 0, bench.stdout + bench.stderr
            data = json.loads(bench.stdout)
            assert data["client"] == ("builtin" if client == "builtin" else "vllm-bench")
            assert data["flags"] == ["--max-model-len", "4096"] and data["vllm_version"]
            for level in data["levels"]:
                ceiling = LoadShape().aggregate_rate(level["concurrency"])
                assert level["completed"] == 8 and level["output_tokens"] == 8 * 16, level
                assert 0.2 * ceiling < level["output_tok_s"] <= 1.05 * ceiling, level
        again = run_sparktui(*c, "bench", "--client", "builtin", "--concurrency", "4", "--requests", "8",
                             "--input-len", "16", "--output-len", "16", "--warmup", "0", "--file", history,
                             timeout=240)
        assert again.returncode == 0, again.stderr
        assert "output tok/s at c=4: " in again.stdout and "same image)" in again.stdout
    finally:
        stop = run_sparktui(*c, "stop", "--json", timeout=240)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    events = [json.loads(line)["event"] for line in received.read_text().splitlines()]
    assert events == ["ready", "stopped"]
