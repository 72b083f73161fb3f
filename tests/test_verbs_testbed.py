"""The headless verbs against real sshd: `logs` byte for byte, an unreachable node said fast and once."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli_helpers import REPO, run_sparktui
from tests.conftest import MakeTestbed
from tests.testbed import Testbed

pytestmark = pytest.mark.testbed


def sparktui_bytes(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "SPARKTUI_CONFIG"}
    return subprocess.run([sys.executable, "-m", "sparktui", *args], capture_output=True, cwd=REPO,
                          env=env, timeout=timeout)


def test_logs_writes_the_file_byte_for_byte(testbed: Testbed, tmp_path: Path) -> None:
    """Text, then binary that is not UTF-8 (a crash dump, a torn write): `logs` is the file, unchanged."""
    config = testbed.write_config(tmp_path / "config.toml")
    log = testbed.host_tmp("spark1") / "sparktui" / "vllm.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(17)
    text = b"".join(b"INFO 12-01 09:00:%02d [api_server.py:1] line %d \xc3\xa9\r\n" % (i % 60, i)
                    for i in range(20_000))
    data = text + rng.randbytes(3 * 1024 * 1024) + b"\xff\xfe\x00 tail without newline"
    log.write_bytes(data)
    try:
        out = sparktui_bytes("--config", str(config), "logs")
        assert out.returncode == 0, out.stderr.decode(errors="replace")
        assert len(out.stdout) == len(data)
        assert out.stdout == data
    finally:
        log.unlink()
    missing = sparktui_bytes("--config", str(config), "logs")
    assert missing.returncode == 1 and b"does not exist" in missing.stderr


def test_every_verb_says_an_unreachable_node_once_and_fast(make_testbed: MakeTestbed) -> None:
    """spark2's sshd is down: each verb ends with one line naming it, its address and why, well before the
    old 14–30 s (the ≤ 5 s figure is the benchmark's, benchmarks/bench_reconnect.py)."""
    bed = make_testbed()
    bed.kill_sshd("spark2")
    config = str(bed.config_path)
    line = f"spark2 ({bed.ip('spark2')}:22): connection refused — is sshd running?"
    for verb, expect_rc in (("status", 1), ("start", 1), ("restart", 1), ("stop", 1)):
        t0 = time.monotonic()
        out = run_sparktui("--config", config, verb, timeout=120)
        took = time.monotonic() - t0
        text = out.stdout + out.stderr
        assert out.returncode == expect_rc, text
        assert took < 60, f"{verb} took {took:.1f} s"
        assert line in text, text
        assert "retrying in" not in text and "not connected after" not in text, text
    start = run_sparktui("--config", config, "start", timeout=120)
    assert start.stdout.count(line) == 1 and "not started" in start.stdout
    assert "preflight" not in start.stdout  # nothing was touched
    stop = run_sparktui("--config", config, "stop", timeout=120)
    assert "stopped what could be reached (spark1)" in stop.stdout
    status = run_sparktui("--config", config, "status", timeout=120)
    assert "engine: unknown — cannot tell what runs on " + line in status.stdout
    logs = run_sparktui("--config", config, "logs", "--node", "spark2", timeout=120)
    assert logs.returncode == 1 and f"sparktui logs: {line}" in logs.stderr
