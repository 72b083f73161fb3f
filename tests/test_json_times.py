"""Every time a verb writes with ``--json`` parses with ``datetime.fromisoformat`` or is a number of seconds.
(timeline: tests/test_timeline_input.py; history: tests/test_history.py; bench: tests/test_bench_cli.py.)"""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_helpers import run_sparktui
from tests.json_times import bad_times
from tests.local_node import write_local_config


def test_the_walker_finds_what_fromisoformat_cannot_read() -> None:
    report = {"stages": [{"started": "--08-03T21:02:48", "ended": "2026-08-03T21:02:50"}],
              "started_at": 1.5, "at": "2026-08-03T21:02:48Z", "when": "08-03 21:02:48",
              "message": "Ray lost spark2 at 21:02:48 (the head cannot reach it)"}
    assert bad_times(report) == ["$.stages[0].started = '--08-03T21:02:48'", "$.when = '08-03 21:02:48'"]


def test_status_json_times(tmp_path: Path) -> None:
    config = write_local_config(tmp_path / "config.toml", "times-test")
    out = run_sparktui("--config", str(config), "status", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["nodes"][0]["reachable"] is True
    assert bad_times(report) == []
