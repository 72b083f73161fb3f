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
    # Why it took as long as it did (sparktui.domain.perf.start_explain): 2 × 74.28 GiB at 0.69 GiB/s, above
    # the floor with no disk measured; the compile came from the cache.
    explanation = out.pop("explanation")
    assert explanation["slowest"] is None
    weights = next(f for f in explanation["findings"] if f["stage"] == "weights")
    assert weights["figures"]["read_gib_s"] == 0.689 and weights["figures"]["gib"] == 148.56
    assert next(f for f in explanation["findings"] if f["stage"] == "compile")["figures"] == {"cache": "hit"}
    for stage in out["stages"]:
        for key in ("started", "ended"):
            if stage[key] is not None:
                stage[key] = "--" + stage[key][5:]
    assert out == json.loads((GOLDEN / (log.stem + ".json")).read_text())


def test_a_slow_start_is_explained_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    log = Path(__file__).parent / "public_logs" / "05-dgx-spark-gemma4-nvfp4-stop.log"
    assert main(["timeline", str(log)]) == 0
    out = capsys.readouterr().out
    why = out[out.index("Why it took this long"):].splitlines()
    assert why[1] == ("  SLOW weights read at 0.16 GiB/s: 15.9 GiB in 1m40s, where a disk gives 1.0 GiB/s or more "
                      "(not measured here)")
    assert why[2] == "       fix: --safetensors-load-strategy eager or --load-format fastsafetensors"
    assert "8 min 41 s through mmap" in why[3]
    assert "torch.compile 30s: cache miss" in out and "CUDA graphs: 5.0s for 11 sizes (up to batch 64)" in out


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
