"""The run history tells the truth on the test bed (issue 33): three starts — each by ``start --wait``'s
own wait, with a dashboard backend attached beside it — leave three vLLM logs on the head, and
``sparktui history --json`` shows each run once with its true outcome (ready, then crashed: the stand-in
dies 2 s after ready, which only the attached dashboard sees), the time from its start to ready measured
from the engine's start on the head, and the name of its kept log.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sparktui.cli import main
from sparktui.domain.history import HistoryStore
from sparktui.node.run_logs import kept_name
from sparktui.remote.backend import SshBackend
from sparktui.remote.engine_wait import wait_until_ready
from tests.cli_helpers import REPO, run_sparktui
from tests.harness import explain, open_harness
from tests.lifecycle_helpers import host_path, lifecycle_config, make_model_dirs
from tests.test_backend_testbed import Recorder
from tests.testbed import Testbed

pytestmark = [pytest.mark.testbed, pytest.mark.ray]


@pytest.fixture
def bed(make_testbed: Callable[..., Testbed]) -> Testbed:
    bed = make_testbed()
    make_model_dirs(bed)
    return bed


async def test_three_runs_three_logs_each_with_its_true_outcome_and_time(
        bed: Testbed, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = lifecycle_config(bed, pace=3.0, env={"SPARKTUI_STANDIN_FAIL": "crash_after_ready:2"})
    path = tmp_path / "runs.jsonl"
    store = HistoryStore(path)
    bounds: list[tuple[float, float]] = []
    async with open_harness(bed, config) as h:
        for run in range(1, 4):
            began = time.time()
            view = await h.controller.start()
            assert view.ok, explain(view)
            launched = time.time()
            # A dashboard attaches to the engine already starting; only it sees the crash after ready.
            events = Recorder()
            dashboard = SshBackend(config, history=store, readonly=True)
            runner = asyncio.create_task(dashboard.run(events))
            try:
                result = await wait_until_ready(h.controller, timeout=120, history=store)
                assert result.outcome == "ready", result.detail
                ready = time.time()
                # From the head's stamp (taken between the two) to ready: no less than the launch to
                # ready, no more than the whole operation.
                bounds.append((ready - launched - 1.0, ready - began + 1.0))

                def crash_recorded(ended: int = run) -> bool:
                    return len([r for r in store.load() if r.end]) == ended

                await events.wait_for(crash_recorded, 60, f"run {run}'s crash recorded")
            finally:
                runner.cancel()
                await asyncio.gather(runner, return_exceptions=True)
            stop = await h.controller.stop()
            assert stop.ok, explain(stop)

    assert main(["history", "--json", "--file", str(path)]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert len(runs) == 3, runs                          # one line per run, whoever wrote it
    for run, (low, high) in zip(runs, bounds, strict=True):
        assert run["outcome"] == "ready" and run["end"] == "crashed", run
        assert run["failure"].startswith("crashed: "), run
        assert low <= run["ready_seconds"] <= high, (run["ready_seconds"], low, high)
        assert run["ended_at"] > run["started_at"] + run["ready_seconds"]
        assert run["stamp"] and run["log_file"] == kept_name("vllm.log", run["stamp"])
    # Three logs on the head: the two earlier runs' kept under the names the history gives, and the last.
    state = host_path(bed, "spark1", "/tmp/sparktui")
    assert sorted(p.name for p in state.glob("vllm-*.log")) == [r["log_file"] for r in runs[:2]]
    assert (state / "vllm.log").exists()
    for name in [*(r["log_file"] for r in runs[:2]), "vllm.log"]:
        assert "Application startup complete" in (state / name).read_text(errors="replace"), name


def test_logs_lists_and_prints_a_previous_runs_log(testbed: Testbed, tmp_path: Path) -> None:
    """``sparktui logs --list`` names the head's kept logs, newest first; ``--run N`` / ``--run FILE`` prints
    one byte for byte; a run that is not kept is a clear error."""
    config = str(testbed.write_config(tmp_path / "config.toml"))
    state = testbed.host_tmp("spark1") / "sparktui"
    state.mkdir(parents=True, exist_ok=True)
    # The bed's state dir outlives one test: earlier tests' logs are set aside, and put back after.
    aside = tmp_path / "aside"
    aside.mkdir()
    theirs = [f for f in state.iterdir() if f.name.startswith("vllm") and f.is_file()]
    for f in theirs:
        f.rename(aside / f.name)
    older, old = kept_name("vllm.log", 1_790_000_000), kept_name("vllm.log", 1_790_000_600)
    (state / older).write_bytes(b"first run: crashed\n")
    (state / old).write_bytes(b"second run: wedged \xff\n")
    (state / "vllm.log").write_bytes(b"this run\n")
    (state / "vllm.started").write_text("1790001200.000\n")
    try:
        listed = run_sparktui("--config", config, "logs", "--list")
        assert listed.returncode == 0, listed.stderr
        lines = listed.stdout.splitlines()
        assert [line.rsplit("/", 1)[-1] for line in lines] == ["vllm.log", old, older], lines
        second = subprocess.run([sys.executable, "-m", "sparktui", "--config", config, "logs", "--run", "2"],
                                capture_output=True, cwd=REPO, timeout=120)
        assert second.returncode == 0 and second.stdout == b"second run: wedged \xff\n", second.stderr
        by_name = run_sparktui("--config", config, "logs", "--run", older)
        assert by_name.returncode == 0 and by_name.stdout == "first run: crashed\n"
        missing = run_sparktui("--config", config, "logs", "--run", "4")
        assert missing.returncode == 1 and "no run '4' kept" in missing.stderr
    finally:
        for name in (older, old, "vllm.log", "vllm.started"):
            (state / name).unlink()
        for f in theirs:
            (aside / f.name).rename(f)
