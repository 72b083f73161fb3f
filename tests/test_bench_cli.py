"""`sparktui bench` as a user runs it: the real CLI in a subprocess against a stand-in HTTP server on
loopback (a ``local = true`` head node; the probe runs here with the GB10 NVML double, so the sweep has
power), saved to the history and compared on the next run; Ctrl-C gives the partial results."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparktui.sim.standin_load import LoadShape
from tests.cli_helpers import REPO, run_sparktui
from tests.json_times import bad_times
from tests.local_node import write_local_config
from tests.standin_api import standin_api

NVML_ENV = {"PYTHONPATH": str(REPO / "tests" / "fixtures" / "telemetry" / "nvml"),
            "SPARKTUI_PROBE_NVML_MODULE": "gb10_pynvml"}


@pytest.fixture
def config(tmp_path: Path) -> Iterator[Path]:
    with standin_api() as port:
        yield write_local_config(tmp_path / "config.toml", "bench-test", engine=f"""
api_port = {port}
extra_args = ["--max-model-len", "32768"]
vllm_command = [{json.dumps(sys.executable)}, "-m", "sparktui.sim.vllm_standin"]
""")


def _bench(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_sparktui("bench", "--config", str(config), "--concurrency", "1,4", "--requests", "8",
                        "--input-len", "16", "--output-len", "16", "--warmup", "1",
                        "--file", str(config.parent / "bench.jsonl"), *extra, env=NVML_ENV, timeout=240)


def test_bench_saves_compares_and_reports_energy(config: Path) -> None:
    first = _bench(config, "--client", "builtin", "--json")
    assert first.returncode == 0, first.stderr
    data = json.loads(first.stdout)
    assert data["client"] == "builtin" and data["flags"] == ["--max-model-len", "32768"]
    assert "recipe" not in data
    one, four = data["levels"]
    for level in (one, four):
        ceiling = LoadShape().aggregate_rate(level["concurrency"])
        assert level["completed"] == 8 and level["output_tokens"] == 8 * 16
        assert 0.25 * ceiling < level["output_tok_s"] <= 1.05 * ceiling
        assert level["energy"]["joules_per_token"] > 0      # the NVML double reports power
        assert level["ttft"]["p99"] >= level["ttft"]["p50"] > 0
    assert data["comparisons"] == []
    assert "c=4: 8/8 requests" in first.stderr                # progress
    assert bad_times(data) == [] and isinstance(data["started_at"], float)   # epoch seconds

    second = _bench(config, "--client", "builtin")
    assert second.returncode == 0, second.stderr
    assert "J/token" in second.stdout and "local " in second.stdout
    today = time.strftime("%m-%d")
    assert "output tok/s at c=1: " in second.stdout
    assert f"% vs the run of {today}, same image)" in second.stdout
    history = (config.parent / "bench.jsonl").read_text().splitlines()
    assert len(history) == 2
    listed = run_sparktui("bench", "--history", "--file", str(config.parent / "bench.jsonl"))
    assert listed.returncode == 0, listed.stderr
    rows = listed.stdout.splitlines()
    assert rows[0].startswith("#  started") and len(rows) == 3
    listed_json = run_sparktui("bench", "--history", "--json", "--file", str(config.parent / "bench.jsonl"))
    assert bad_times(json.loads(listed_json.stdout)) == []
    assert "standin-model  builtin" in rows[1] and " J/token" not in rows[1] and "at c=4" in rows[1]
    # each sweep saved with what it measured; the two compared by their --history numbers
    saved = [json.loads(line) for line in history]
    assert saved[0]["fingerprint"]["nodes"] == ["local"] and saved[0]["fingerprint"]["image"] == "host"
    assert saved[0]["fingerprint"]["key"] == saved[1]["fingerprint"]["key"]
    compared = run_sparktui("bench", "--compare", "1", "-1", "--file", str(config.parent / "bench.jsonl"))
    assert compared.returncode == 0, compared.stderr
    assert "same fingerprint" in compared.stdout and "c=4: " in compared.stdout
    assert run_sparktui("bench", "--compare", "1", "3", "--file",
                        str(config.parent / "bench.jsonl")).returncode == 2


def test_bench_uses_vllm_bench_serve_when_the_engine_has_it(config: Path) -> None:
    result = _bench(config, "--json", "--no-save")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["client"] == "vllm-bench"
    assert [lv["completed"] for lv in data["levels"]] == [8, 8]
    assert data["saved_to"] is None and not (config.parent / "bench.jsonl").exists()


def test_ctrl_c_gives_partial_results(config: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if k != "SPARKTUI_CONFIG"}, **NVML_ENV}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparktui", "bench", "--config", str(config), "--client", "builtin",
         "--concurrency", "1,16", "--requests", "400", "--output-len", "16", "--warmup", "0", "--json",
         "--file", str(config.parent / "bench.jsonl")],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(8)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    data = json.loads(out)
    assert data["interrupted"] is True
    (level,) = data["levels"]
    assert level["partial"] is True and 0 < level["completed"] < 400


def test_no_engine_is_a_clear_error(tmp_path: Path) -> None:
    config = write_local_config(tmp_path / "config.toml", "bench-test", engine="api_port = 9")
    result = run_sparktui("bench", "--config", str(config), "--file", str(tmp_path / "bench.jsonl"))
    assert result.returncode == 1
    assert "the engine does not answer on local:9: connection refused" in result.stderr
    assert not (tmp_path / "bench.jsonl").exists()
