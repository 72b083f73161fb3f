"""Each run's vLLM log kept on the head (``sparktui/node/run_logs.py``), run here for real as the node runs it
(``python -c`` text): the last run's log renamed after its start, bounded by count and size (the newest kept
log always stays), the new run stamped, the detach command exec'd; ``list`` for ``sparktui logs --run``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from sparktui.domain.lifecycle import scripts as S
from sparktui.node.run_logs import kept_name

MIB = 1024 * 1024


def keep(folder: Path, count: int = 10, size: int = 500 * MIB, *command: str) -> str:
    """One start's ``keep`` step; returns what COMMAND printed (the detach script's ``pid N``)."""
    argv = [sys.executable, "-c", S.RUN_LOGS_PY, "keep", str(folder), "vllm.log", str(count), str(size),
            "--", *(command or ("sh", "-c", 'echo "pid $$"'))]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout


def listing(folder: Path) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", S.RUN_LOGS_PY, "list", str(folder), "vllm.log"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    result: dict[str, object] = json.loads(out)
    return result


def a_run(folder: Path, text: str, started: float) -> None:
    """A run that wrote ``text`` to its log, stamped ``started`` as its start."""
    (folder / "vllm.log").write_text(text)
    (folder / "vllm.started").write_text(f"{started:.3f}\n")


def test_three_starts_leave_three_logs_each_named_after_its_start(tmp_path: Path) -> None:
    t0 = time.time() - 3000
    assert keep(tmp_path).startswith("pid ")          # the command runs after (exec'd)
    stamps = []
    for i in range(3):
        a_run(tmp_path, f"run {i} crashed\n", t0 + 1000 * i)
        stamps.append(t0 + 1000 * i)
        keep(tmp_path)
    names = sorted(p.name for p in tmp_path.glob("vllm-*.log"))
    assert names == [kept_name("vllm.log", s) for s in stamps]
    assert [(tmp_path / n).read_text() for n in names] == [f"run {i} crashed\n" for i in range(3)]
    listed = listing(tmp_path)
    runs = listed["runs"]
    assert isinstance(runs, list) and [r["file"] for r in runs] == names[::-1]      # newest first
    assert [int(r["started"]) for r in runs] == [int(s) for s in stamps[::-1]]
    started = listed["started"]
    assert isinstance(started, float) and abs(started - time.time()) < 60   # the last keep stamped now
    assert isinstance(listed["now"], float)


def test_the_count_bound_counts_the_new_run(tmp_path: Path) -> None:
    t0 = time.time() - 10_000
    for i in range(6):
        a_run(tmp_path, f"run {i}\n", t0 + 100 * i)
        keep(tmp_path, 3)
    kept = sorted(p.name for p in tmp_path.glob("vllm-*.log"))
    assert kept == [kept_name("vllm.log", t0 + 100 * i) for i in (4, 5)]   # 2 kept + the new run = 3


def test_the_size_bound_drops_the_oldest_but_never_the_newest(tmp_path: Path) -> None:
    t0 = time.time() - 10_000
    for i in range(3):
        a_run(tmp_path, "x" * (MIB // 2), t0 + 100 * i)
        keep(tmp_path, 10, MIB)
    assert sorted(p.name for p in tmp_path.glob("vllm-*.log")) == [
        kept_name("vllm.log", t0 + 100 * i) for i in (1, 2)]
    a_run(tmp_path, "x" * (3 * MIB), t0 + 400)
    keep(tmp_path, 10, MIB)
    # Bigger than the bound alone: still kept (the last crash log is the one a person needs), alone.
    assert sorted(p.name for p in tmp_path.glob("vllm-*.log")) == [kept_name("vllm.log", t0 + 400)]


def test_an_old_prev_log_and_an_unstamped_log_are_kept_by_their_time(tmp_path: Path) -> None:
    prev, log = tmp_path / "vllm.log.prev", tmp_path / "vllm.log"
    prev.write_text("older\n")
    log.write_text("old\n")
    os.utime(prev, (1_700_000_000, 1_700_000_000))
    os.utime(log, (1_700_000_500, 1_700_000_500))
    keep(tmp_path)
    assert (tmp_path / kept_name("vllm.log", 1_700_000_000)).read_text() == "older\n"
    assert (tmp_path / kept_name("vllm.log", 1_700_000_500)).read_text() == "old\n"
    assert not prev.exists() and not log.exists()


def test_no_folder_yet_lists_nothing(tmp_path: Path) -> None:
    listed = listing(tmp_path / "none")
    assert listed["runs"] == [] and listed["started"] is None and listed["current"] is None
