"""`sparktui timeline` on input that is not a vLLM log (exit 2), and its JSON times: each read by
``datetime.fromisoformat``, the year taken from the file's date when the log's lines carry none."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.commands.exit_status import ExitStatus
from sparktui.domain.logs.log_year import dated
from tests.cli_helpers import REPO, run_sparktui
from tests.json_times import bad_times, times_in

DATA = REPO / "tests" / "data" / "vllm-logs"
#: Year-less vLLM times (``MM-DD hh:mm:ss``), a start that reaches ready.
YEARLESS = next(DATA.glob("12_*"))
#: A log whose lines carry their year (Ray's logger, k8s stamps).
WITH_YEAR = next(DATA.glob("01_*"))


@pytest.mark.parametrize("name", ["README.md", "config.toml", "binary"])
def test_a_file_that_is_no_log_exits_2_and_says_so(name: str, tmp_path: Path) -> None:
    if name == "binary":
        path = tmp_path / "binary"
        path.write_bytes(Path(sys.executable).read_bytes()[:200_000])
    else:
        path = REPO / name
    out = run_sparktui("timeline", str(path))
    assert out.returncode == ExitStatus.USAGE, out.stdout
    assert out.stdout == ""
    assert f"{path} is not a vLLM log" in out.stderr


def test_real_logs_and_headerless_snippets_are_still_read() -> None:
    # A pasted traceback without log headers is a log when it shows a failure vLLM's users meet.
    snippet = next((REPO / "tests" / "public_logs").glob("30-snippet-*"))
    assert run_sparktui("timeline", str(snippet)).returncode == ExitStatus.NOT_WELL
    assert run_sparktui("timeline", str(YEARLESS)).returncode == ExitStatus.OK


def test_yearless_times_take_the_year_of_the_files_date(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_bytes(YEARLESS.read_bytes())   # its lines: 10-23 15:10 …
    written = dt.datetime(2026, 1, 2, 8, 0).timestamp()
    os.utime(log, (written, written))
    out = run_sparktui("timeline", "--json", str(log))
    assert out.returncode == ExitStatus.OK, out.stderr
    report = json.loads(out.stdout)
    assert report["year_known"] is False and report["year_source"] == "file_mtime"
    assert bad_times(report) == []
    config = report["stages"][0]
    # October's lines in a file last written in January: the year before.
    assert config["started"] == "2025-10-23T15:10:10"
    assert dt.datetime.fromisoformat(config["ended"]) - dt.datetime.fromisoformat(config["started"]) \
        == dt.timedelta(seconds=config["seconds"])


def test_stdin_from_a_pipe_dates_by_the_time_it_was_read() -> None:
    proc = subprocess.run([sys.executable, "-m", "sparktui", "timeline", "--json", "-"], cwd=REPO,
                          input=YEARLESS.read_bytes(), capture_output=True, timeout=60)
    report = json.loads(proc.stdout)
    assert report["year_source"] == "read_time" and bad_times(report) == [] and times_in(report)


def test_a_log_with_its_year_keeps_it(tmp_path: Path) -> None:
    out = run_sparktui("timeline", "--json", str(WITH_YEAR))
    report = json.loads(out.stdout)
    assert report["year_known"] is True and report["year_source"] == "log"
    assert bad_times(report) == [] and times_in(report)


def test_dated_is_the_latest_such_date_not_after_the_reference() -> None:
    new_year = dt.datetime(2027, 1, 1, 0, 30)
    assert dated("--12-31T23:59:00", new_year) == "2026-12-31T23:59:00"
    assert dated("--01-01T00:10:00", new_year) == "2027-01-01T00:10:00"
    # A node clock a few hours ahead of this machine's is within the day's slack.
    assert dated("--01-01T09:00:00", new_year) == "2027-01-01T09:00:00"
    assert dated("--02-29T12:00:00", dt.datetime(2027, 3, 1)) == "2024-02-29T12:00:00"
