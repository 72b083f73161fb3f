"""The stand-in as an image's environment makes it (`sparktui.sim.standin_image`): the version it reports and
its help style, the flags its vLLM lacks, and a slower image — each read back by the upgrade's own checks."""

from __future__ import annotations

import os
import subprocess
import sys

from sparktui.domain.logs.failures import classify
from sparktui.domain.upgrade.flag_check import check_serve_flags
from sparktui.domain.upgrade.serve_help import parse_serve_help
from sparktui.sim import standin_image as image
from sparktui.sim import standin_script as script
from sparktui.sim.recording import DEFAULT_RECORDING, load_recording
from sparktui.sim.standin_load import DEFAULT_TOKEN_RATE, DEFAULT_TTFT, LoadShape

RUN = [sys.executable, "-m", "sparktui.sim.vllm_standin"]


def vllm(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SPARKTUI_STANDIN_")}
    return subprocess.run([*RUN, *args], capture_output=True, text=True, timeout=60, env={**clean, **env})


def test_environment_read() -> None:
    assert image.reported_version("0.8.3", {}) == "0.8.3"
    assert image.reported_version("0.8.3", {image.VERSION_ENV: " 0.22.0 "}) == "0.22.0"
    assert image.lacked_flags({image.LACKS_ENV: "--max_model_len, --task  junk"}) == {"--max-model-len",
                                                                                      "--task"}
    assert image.lacked_flags({}) == frozenset()
    for raw, want in (("0.5", 0.5), ("", 1.0), ("0", 1.0), ("-2", 1.0), ("fast", 1.0), ("1000", 1.0)):
        assert image.speed({image.SPEED_ENV: raw}) == want


def test_a_slower_image_serves_slower(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("SPARKTUI_STANDIN_TOKEN_RATE", raising=False)
    monkeypatch.delenv("SPARKTUI_STANDIN_TTFT", raising=False)
    monkeypatch.setenv(image.SPEED_ENV, "0.5")
    shape = LoadShape.from_env()
    assert shape.token_rate == DEFAULT_TOKEN_RATE * 0.5 and shape.ttft_seconds == DEFAULT_TTFT / 0.5


def test_newer_version_prints_grouped_help_and_help_all() -> None:
    version = vllm("--version", SPARKTUI_STANDIN_VERSION="0.22.0")
    assert (version.returncode, version.stdout.strip()) == (0, "0.22.0")
    summary = vllm("serve", "--help", SPARKTUI_STANDIN_VERSION="0.22.0")
    assert summary.returncode == 0
    assert parse_serve_help(summary.stdout).summary
    full = vllm("serve", "--help=all", SPARKTUI_STANDIN_VERSION="0.22.0")
    assert full.returncode == 0
    h = parse_serve_help(full.stdout, version.stdout)
    assert not h.summary and h.version == "0.22.0"
    assert h.accepts("--max-model-len") and h.accepts("-tp") and h.accepts("--no-enable-prefix-caching")


def test_older_version_keeps_flat_help() -> None:
    flat = vllm("serve", "--help")
    h = parse_serve_help(flat.stdout)
    assert not h.summary and h.accepts("--max_model_len")


def test_a_lacked_flag_is_absent_from_help_and_refused_as_vllm_refuses_it() -> None:
    env = {"SPARKTUI_STANDIN_VERSION": "0.22.0", "SPARKTUI_STANDIN_LACKS": "--enforce-eager,--max-model-len"}
    h = parse_serve_help(vllm("serve", "--help=all", **env).stdout, "0.22.0")
    assert not h.accepts("--enforce-eager") and not h.accepts("--max-model-len")
    assert h.accepts("--tensor-parallel-size")
    report = check_serve_flags(["--tensor-parallel-size", "2", "--max_model_len=4096", "--enforce-eager"], h)
    assert report.lines() == ["--max-model-len: not accepted by vLLM 0.22.0",
                              "--enforce-eager: not accepted by vLLM 0.22.0"]
    refused = vllm("serve", "m", "--max_model_len=4096", "--enforce-eager", **env)
    assert refused.returncode == 2
    last = refused.stderr.strip().splitlines()[-1]
    assert last == "vllm serve: error: unrecognized arguments: --max_model_len=4096 --enforce-eager"
    assert classify(last) == "config_error"


def test_the_log_says_the_image_version() -> None:
    lines = load_recording(DEFAULT_RECORDING)
    dialect = script.detect_dialect(lines)
    rewrite = script.Rewriter(dialect, "m", "m", 2, 1, None, 8000, 1, None, "0.22.0")
    banner = next(line.text for line in lines if f"version {dialect.version}" in line.text)
    assert "version 0.22.0" in rewrite(banner) and dialect.version not in rewrite(banner)
    same = script.Rewriter(dialect, "m", "m", 2, 1, None, 8000, 1, None)
    assert f"version {dialect.version}" in same(banner)
