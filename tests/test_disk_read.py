"""The model files' read test: the node script run as a node runs it (its shipped text, ``python -I -c``) on
temporary files, its report, the kept readings, and the remote function on a local node."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui import node
from sparktui.config import load_config
from sparktui.domain.perf.disk_read import (
    DiskRead,
    DiskReadStore,
    parse_read_test,
    rates_by_log_node,
    read_test_argv,
)
from sparktui.remote.disk_read import measure_disks
from sparktui.remote.transport import LocalTransport

MIB = 1 << 20


def run_script(tmp_path: Path, request: dict[str, object]) -> dict[str, object]:
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    res = subprocess.run([sys.executable, "-I", "-c", node.source("read_rate"), json.dumps(request)], cwd=cwd,
                         capture_output=True, text=True, timeout=60, check=True)
    out: dict[str, object] = json.loads(res.stdout)
    return out


def shard(path: Path, mib: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(os.urandom(MIB))
    return path


def test_reads_the_largest_shard_past_the_page_cache_within_its_byte_bound(tmp_path: Path) -> None:
    model = tmp_path / "model"
    shard(model / "model-00001-of-00002.safetensors", 40)
    big = shard(model / "model-00002-of-00002.safetensors", 48)
    shard(model / "huge-unrelated.bin", 64)   # larger, but no shard: the shards are what vLLM reads
    (model / "config.json").write_text("{}")
    out = run_script(tmp_path, {"path": str(model), "mib": 32, "seconds": 30})
    assert out["file"] == str(big) and out["file_bytes"] == 48 * MIB
    assert out["bytes"] == 32 * MIB   # two 16 MiB blocks: the byte bound
    assert out["method"] in ("direct", "fadvise")
    assert isinstance(out["gib_s"], float) and out["gib_s"] > 0
    assert isinstance(out["seconds"], float) and out["seconds"] > 0


def test_the_time_bound_stops_a_long_read(tmp_path: Path) -> None:
    big = shard(tmp_path / "one.safetensors", 96)
    out = run_script(tmp_path, {"file": str(big), "mib": 1024, "seconds": 1e-6})
    assert isinstance(out["bytes"], int) and 0 < out["bytes"] < 96 * MIB


def test_a_file_shorter_than_the_bound_is_read_whole(tmp_path: Path) -> None:
    small = tmp_path / "small.safetensors"
    small.write_bytes(os.urandom(5 * MIB + 123))   # not a multiple of the O_DIRECT block
    out = run_script(tmp_path, {"file": str(small), "mib": 64, "seconds": 30})
    assert out["bytes"] == 5 * MIB + 123


def test_a_hugging_face_id_reads_the_cache_snapshot(tmp_path: Path) -> None:
    repo = tmp_path / "hf" / "hub" / "models--org--name"
    snap = repo / "snapshots" / "abc123"
    shard(snap / "model.safetensors", 16)
    (snap / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    out = run_script(tmp_path, {"hf_id": "org/name", "hf_home": str(tmp_path / "hf"), "mib": 8})
    assert out["file"] == str(snap / "model.safetensors") and out["bytes"] == 8 * MIB


def test_no_model_files_is_an_error_report(tmp_path: Path) -> None:
    out = run_script(tmp_path, {"path": str(tmp_path / "absent")})
    assert "no model files" in str(out["error"])


def test_report_store_and_rates_keyed_as_the_log_names_nodes(tmp_path: Path) -> None:
    text = json.dumps({"file": "/m/a.safetensors", "file_bytes": 10, "bytes": 1 << 30, "seconds": 0.5,
                       "gib_s": 2.0, "method": "direct"})
    good = parse_read_test("spark1", "noise\n" + text, at=100.0)
    assert good.ok and good.gib_s == 2.0 and good.at == 100.0
    assert good.describe() == "spark1: 2.00 GiB/s reading 1024 MiB of a.safetensors in 0.50 s, direct"
    bad = parse_read_test("spark2", "Traceback ...", at=101.0)
    assert not bad.ok and bad.error == "no report from the read test"
    store = DiskReadStore(tmp_path / "disk_reads.jsonl")
    store.append(DiskRead("spark2", 0.5, bytes=1, at=50.0, method="fadvise"))
    store.append(good)
    store.append(bad)   # a failed test does not hide spark2's earlier rate
    with open(store.path, "a") as f:
        f.write("{not json\n")
    latest = store.latest()
    assert {n: r.gib_s for n, r in latest.items()} == {"spark1": 2.0, "spark2": 0.5}
    assert rates_by_log_node(latest, "spark1", {"spark2": "10.0.0.2"}) == {"head": 2.0, "10.0.0.2": 0.5}


def test_argv_carries_the_request_and_bounds() -> None:
    argv = read_test_argv("python3", {"hf_id": "org/name", "hf_home": "/hf"}, 256, 5.0)
    assert argv[:2] == ["python3", "-c"]
    assert json.loads(argv[3]) == {"hf_id": "org/name", "hf_home": "/hf", "mib": 256, "seconds": 5.0}


def test_measure_disks_on_a_local_node_keeps_the_reading(tmp_path: Path) -> None:
    model = tmp_path / "model"
    shard(model / "model.safetensors", 20)
    cfg = tmp_path / "config.toml"
    cfg.write_text(f"""
[cluster]
name = "readtest"
[[nodes]]
name = "local"
host = "localhost"
local = true
role = "head"
python = {json.dumps(sys.executable)}
[engine]
model = {json.dumps(str(model))}
runtime = "host"
tensor_parallel_size = 1
state_dir = {json.dumps(str(tmp_path / "state"))}
""")
    config = load_config(cfg)
    store = DiskReadStore(tmp_path / "disk_reads.jsonl")
    readings = asyncio.run(measure_disks(config, {"local": LocalTransport("local")}, mib=16, seconds=10,
                                         store=store))
    assert [r.node for r in readings] == ["local"] and readings[0].ok
    assert readings[0].bytes == 16 * MIB and readings[0].file == str(model / "model.safetensors")
    assert store.latest()["local"].gib_s == readings[0].gib_s


@pytest.mark.parametrize("name", ["read_rate", "model_info"])
def test_the_shipped_text_inlines_the_snapshot_helper(name: str) -> None:
    text = node.source(name)
    assert "def snapshot(" in text and "sparktui" not in "\n".join(
        line for line in text.splitlines() if line.startswith(("import", "from")))
