# ruff: noqa: E501  (verbatim vLLM log lines as test data)
"""`sparktui timeline`: human and JSON output, stdin, exit codes."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from sparktui.cli import main

DATA = Path(__file__).parent / "data" / "vllm-logs"
GOLDEN = Path(__file__).parent / "golden" / "timeline"


def _log(prefix: str) -> Path:
    return next(DATA.glob(prefix + "*"))


def test_json_output_matches_golden_and_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    log = _log("12_")
    assert main(["timeline", str(log), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # The golden is the year-less snapshot; the verb gives each time the year of the file's date.
    assert out.pop("year_source") == "file_mtime"
    for stage in out["stages"]:
        for key in ("started", "ended"):
            if stage[key] is not None:
                stage[key] = "--" + stage[key][5:]
    assert out == json.loads((GOLDEN / (log.stem + ".json")).read_text())


def test_failed_log_exits_1_and_shows_failure(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["timeline", str(_log("09_"))]) == 1
    out = capsys.readouterr().out
    assert "FAILED: kernel_unsupported in weights" in out
    assert "Failed to find a kernel" in out and "hint:" in out
    assert "weights" in out and "failed" in out


def test_incomplete_from_stdin_exits_0(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fake_stdin = io.TextIOWrapper(io.BytesIO(_log("14_").read_bytes()))
    monkeypatch.setattr(sys, "stdin", fake_stdin)
    assert main(["timeline", "-"]) == 0
    out = capsys.readouterr().out
    assert "outcome: INCOMPLETE" in out and "70/1800" in out


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["timeline", str(tmp_path / "nope.log")]) == 2
    assert "cannot read" in capsys.readouterr().err
