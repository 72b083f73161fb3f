"""`sparktui plan` as a user runs it: the real CLI in a subprocess, a ``local = true`` node (its real
/proc/meminfo read through the local transport) and a real model directory (config.json + a safetensors file
whose header is real and whose data is a sparse file), the run and linktest histories in the test's own state
directory."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from sparktui.domain.history import HistoryStore, record_run
from sparktui.domain.linktest import LinkTestResult, LinkTestStore
from sparktui.domain.perf.disk_read import DiskRead, DiskReadStore
from tests.cli_helpers import run_sparktui
from tests.local_node import write_local_config

CONFIGS = Path(__file__).parent / "data" / "model-configs"
GIB = 1 << 30


def _model_dir(root: Path, config_name: str, weights_bytes: int) -> Path:
    """A model directory: the real config.json, one safetensors file of ``weights_bytes`` (sparse)."""
    root.mkdir(parents=True)
    (root / "config.json").write_text((CONFIGS / config_name).read_text())
    header = json.dumps({"w": {"dtype": "BF16", "shape": [weights_bytes // 2],
                               "data_offsets": [0, weights_bytes]}}).encode()
    path = root / "model-00001-of-00001.safetensors"
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        f.truncate(8 + len(header) + weights_bytes)
    return root


def _env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_STATE_HOME": str(tmp_path / "xdg")}


def _write_local(tmp_path: Path, model: Path, extra: str) -> Path:
    text = (write_local_config(tmp_path / "config.toml", "plan-test", engine=f"extra_args = {extra}")
            .read_text().replace('model = "/models/standin-model"', f"model = {json.dumps(str(model))}"))
    (tmp_path / "config.toml").write_text(text)
    return tmp_path / "config.toml"


def test_plan_refuses_what_will_not_fit_with_the_fix(tmp_path: Path) -> None:
    """Qwen3-Next-80B's 148.6 GiB of BF16 weights on one node: exit 1, the GPUs it needs named."""
    model = _model_dir(tmp_path / "Qwen3-Next", "Qwen3-Next-80B-A3B-Instruct.config.json", int(148.6 * GIB))
    config = _write_local(tmp_path, model, '["--gpu-memory-utilization", "0.5"]')
    out = run_sparktui("plan", "--config", str(config), env=_env(tmp_path))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "local: peak" in out.stdout and "(read on the node;" in out.stdout
    assert "148.6 GiB of safetensors" in out.stdout
    assert "WILL NOT FIT" in out.stdout and "no room for a KV cache" in out.stdout
    assert "fix: 148.6 GiB of weights need at least" in out.stdout


def test_plan_json_with_history_linktest_and_a_model_that_fits(tmp_path: Path) -> None:
    """A 1 GiB model at a small budget fits; the time to ready is the median of earlier ready starts of the
    same model and image, the all-reduce latency the newest linktest's."""
    model = _model_dir(tmp_path / "small", "Llama-3.3-70B-Instruct.config.json", GIB)
    mem_avail_kb = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                            if line.startswith("MemAvailable:")))
    mem_total_kb = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                            if line.startswith("MemTotal:")))
    # a budget of ~3 GiB + the 5 GiB overhead: well inside what this machine has free
    util = round(min(0.5, (8 * GIB) / (mem_total_kb * 1024)), 3)
    assert mem_avail_kb * 1024 > util * mem_total_kb * 1024 + 4 * GIB, "this machine has too little free"
    flags = f'["--gpu-memory-utilization", "{util}", "--max-model-len", "4096"]'
    config = _write_local(tmp_path, model, flags)
    env = _env(tmp_path)
    old = dict(os.environ)
    os.environ.update(env)
    try:
        store = HistoryStore()
        for i, seconds in enumerate((300.0, 420.0, 360.0)):
            store.append(record_run(started_at=1000.0 + i, model=str(model), image="host", outcome="ready",
                                    stage_seconds={"weights": seconds}))
        LinkTestStore().append(LinkTestResult("all_reduce_perf", True, "pass", 23.5,
                                              detail={"latency_us": 22.0}))
        DiskReadStore().append(DiskRead("local", 2.5, file="/m/model.safetensors", bytes=GIB, seconds=0.4,
                                        method="direct", at=1000.0))
    finally:
        os.environ.clear()
        os.environ.update(old)
    out = run_sparktui("plan", "--config", str(config), "--json", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads(out.stdout)
    assert data["fits"] is True and data["fixes"] == []
    (node,) = data["nodes"]
    assert node["memory_source"] == "read on the node" and node["total_bytes"] == mem_total_kb * 1024
    assert node["weights_bytes"] == GIB and node["kv_tokens"] > 0 and node["concurrency"] > 0
    assert node["peak_bytes"] == node["budget_bytes"]
    assert node["disk_read_gibs"] == 2.5   # the node's last `sparktui model read-test`
    assert data["ready"]["seconds"] == 360.0 and data["ready"]["runs"] == 3
    assert data["ready"]["stages"] == {"weights": 360.0}
    assert data["ready"]["text"].startswith("6 min 00 s: the median of the last 3 start(s)")
    assert data["ready"]["text"].endswith("that reached ready (weights 6 min 00 s)")
    ceiling = data["decode_ceiling"]
    # Llama-3.3-70B at TP 1: 69.5 B active params × 2 bytes = 139 GB per token → 273 / 139 = 1.96 tok/s
    assert ceiling["tp"] == 1 and ceiling["allreduces_per_token"] == 0
    assert abs(ceiling["tok_s"] - 1.96) < 0.01
    assert ceiling["allreduce_us"] == 22.0 and ceiling["allreduce_source"].startswith("measured")


def test_plan_offline_without_a_config_json_says_how(tmp_path: Path) -> None:
    config = _write_local(tmp_path, tmp_path / "absent", "[]")
    out = run_sparktui("plan", "--config", str(config), "--offline", env=_env(tmp_path))
    assert out.returncode == 2
    assert "give --model-config PATH" in out.stderr
    ok = run_sparktui("plan", "--config", str(config), "--offline", "--model-config",
                      str(CONFIGS / "Qwen3-Next-80B-A3B-Instruct.config.json"), env=_env(tmp_path))
    assert "assumed: a GB10, all free" in ok.stdout and "counted from config.json" in ok.stdout
