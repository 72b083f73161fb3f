"""The headless verbs against real sshd: `logs` byte for byte, an unreachable node said fast and once."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import REPO
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
