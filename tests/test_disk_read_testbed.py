"""`sparktui model read-test` on the two-host test bed: the read test over each host's real SSH link, past
the page cache, each host's reading kept in the local state dir."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparktui.domain.perf.disk_read import DiskReadStore
from tests.cli_helpers import run_sparktui
from tests.lifecycle_helpers import lifecycle_overrides, make_model_dirs
from tests.testbed import Testbed
from tests.testbed.bed import MODEL_DIR

pytestmark = [pytest.mark.testbed]


def test_read_test_measures_every_node_and_keeps_the_readings(testbed: Testbed, tmp_path: Path) -> None:
    make_model_dirs(testbed)
    # spark2's shard is larger than the byte bound: the test stops at 1 MiB there.
    shard = testbed.host_tmp("spark2") / MODEL_DIR.removeprefix("/tmp/") / "model-00001-of-00001.safetensors"
    shard.write_bytes(b"\1" * (3 << 20))
    config = testbed.write_config(tmp_path / "config.toml", **lifecycle_overrides(testbed))
    state = tmp_path / "state"
    res = run_sparktui("--config", str(config), "model", "read-test", "--mib", "1", "--seconds", "5",
                       "--json", env={"XDG_STATE_HOME": str(state)}, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    nodes = {n["node"]: n for n in json.loads(res.stdout)["nodes"]}
    assert set(nodes) == {"spark1", "spark2"}
    assert nodes["spark1"]["bytes"] == 4096 and nodes["spark2"]["bytes"] == 1 << 20
    for n in nodes.values():
        assert n["file"].endswith("/standin-model/model-00001-of-00001.safetensors")
        assert n["method"] in ("direct", "fadvise") and n["gib_s"] > 0 and n["error"] is None
    kept = DiskReadStore(state / "sparktui" / "disk_reads.jsonl").latest()
    assert {k: r.bytes for k, r in kept.items()} == {"spark1": 4096, "spark2": 1 << 20}
