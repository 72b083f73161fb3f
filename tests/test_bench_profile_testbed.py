"""`sparktui bench --profile smoke` on the two-host test bed: the stand-in engine started over real Ray, the
profile's two context depths measured through the head's SSH port forward, the result saved with the
fingerprint of what was measured (model, vLLM version, nodes, TP, flags, link) and each level's share of the
decode ceiling counted from the head's config.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_helpers import run_sparktui
from tests.lifecycle_helpers import lifecycle_overrides, make_model_dirs
from tests.testbed import Testbed
from tests.testbed.bed import MODEL_DIR

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

#: A small model's config.json (Llama-shaped): what the ceiling counts.
SMALL_CONFIG = {"architectures": ["StandinForCausalLM"], "hidden_size": 512, "num_hidden_layers": 8,
                "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 1536,
                "vocab_size": 32000, "torch_dtype": "bfloat16", "max_position_embeddings": 4096}


def test_bench_profile_with_its_fingerprint(testbed: Testbed, tmp_path: Path) -> None:
    make_model_dirs(testbed)
    config = testbed.write_config(tmp_path / "config.toml", **lifecycle_overrides(testbed, pace=2.0))
    c = ("--config", str(config))
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    history = tmp_path / "bench.jsonl"
    try:
        start = run_sparktui(*c, "start", "--wait", env=env, timeout=240)
        assert start.returncode == 0, start.stdout + start.stderr
        head = testbed.names[0]
        (testbed.host_tmp(head) / MODEL_DIR.removeprefix("/tmp/") / "config.json").write_text(
            json.dumps(SMALL_CONFIG))
        bench = run_sparktui(*c, "bench", "--profile", "smoke", "--client", "builtin", "--file", str(history),
                             env=env, timeout=240)
        assert bench.returncode == 0, bench.stdout + bench.stderr
        assert "profile smoke, concurrency 1,2, context depths 0,1,024" in bench.stdout
        assert "measuring: " in bench.stdout and "[fingerprint " in bench.stdout
        assert "depth   1,024 c=2" in bench.stdout and "% of the ceiling per stream" in bench.stdout
        (saved,) = [json.loads(line) for line in history.read_text().splitlines()]
    finally:
        stop = run_sparktui(*c, "stop", env=env, timeout=240)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert saved["profile"] == "smoke" and (saved["input_len"], saved["output_len"]) == (64, 16)
    assert sorted((lv["depth"], lv["concurrency"]) for lv in saved["levels"]) == [(0, 1), (0, 2), (1024, 1),
                                                                                   (1024, 2)]
    assert all(lv["completed"] == lv["requests"] == 2 * lv["concurrency"] for lv in saved["levels"])
    fp = saved["fingerprint"]
    assert fp["model"] == MODEL_DIR and fp["nodes"] == list(testbed.names) and fp["vllm_version"]
    assert fp["tensor_parallel"] == 2 and fp["flags"] == ["--max-model-len", "4096"]
    assert fp["link"] == "not measured (no linktest)" and len(fp["key"]) == 12
    # 8 layers × (attention 0.66 M + MLP 2.36 M) + LM head 16.4 M = 40.6 M params × 2 bytes, TP 2
    ceiling = saved["ceiling"]
    assert ceiling["active_bytes"] == 2 * (8 * (512 * 512 * 2 + 2 * 512 * 128 + 3 * 512 * 1536)
                                           + 32000 * 512)
    assert ceiling["allreduces_per_token"] == 16 and ceiling["allreduce_source"].startswith("assumed")
