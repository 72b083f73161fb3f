"""`sparktui audit` on the real test hosts (host runtime, over sshd; no engine start): twins agree (exit 0);
then spark2's config.json is edited and spark1's sshd gives its sessions ``PYTHONHASHSEED=0`` (the
environment a host-runtime engine inherits), and audit names both, with the node (exit 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_helpers import run_sparktui
from tests.testbed import Testbed
from tests.testbed.bed import MODEL_DIR

pytestmark = [pytest.mark.testbed]


def test_audit_names_a_model_file_that_differs_and_an_env_var_set_on_one_side(testbed: Testbed,
                                                                               tmp_path: Path) -> None:
    testbed.make_model_dirs()
    config = str(testbed.write_config(tmp_path / "config.toml"))
    same = run_sparktui("--config", config, "audit", "--json", timeout=60)
    assert same.returncode == 0, same.stdout + same.stderr
    report = json.loads(same.stdout)
    assert report["ok"] and report["differences"] == []
    assert set(report["nodes"]["spark2"]["files"]) == {"config.json", "model-00001-of-00001.safetensors"}

    edited = testbed.host_tmp("spark2") / MODEL_DIR.removeprefix("/tmp/") / "config.json"
    edited.write_text(edited.read_text().replace("Standin", "Stand1n"))   # the same size, another hash
    sshd_config = testbed.host("spark1").sshd_config
    original = sshd_config.read_text()
    try:
        sshd_config.write_text(original + "SetEnv PYTHONHASHSEED=0\n")
        testbed.kill_sshd("spark1", sessions=False)
        testbed.start_sshd("spark1")
        drift = run_sparktui("--config", config, "audit", timeout=60)
    finally:
        sshd_config.write_text(original)
        testbed.kill_sshd("spark1", sessions=False)
        testbed.start_sshd("spark1")
        testbed.make_model_dirs()
    assert drift.returncode == 1, drift.stdout + drift.stderr
    lines = [line.strip() for line in drift.stdout.splitlines()]
    assert "2 difference(s), against spark1:" in lines, drift.stdout
    said = [line for line in lines if line.startswith("warn")]
    assert said[0].startswith("warn  model    config.json differs on spark2 (sha256 "), drift.stdout
    assert said[0].endswith(" on spark1)")
    assert said[1] == "warn  env      PYTHONHASHSEED set on spark1 only (=0)", drift.stdout
    assert "fix: `sparktui model sync` copies spark1's model directory to the other nodes" in lines
