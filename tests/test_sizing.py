"""Memory and context sizing against hand-computed numbers for two real model configs.

The configs are the models' real config.json files (tests/data/model-configs/SOURCES.md). A DGX Spark's
MemTotal is 127,600,748 kB = 130,663,165,952 bytes (121.69 GiB; nvitop PR #208, reference notes §3.2).
"""

from __future__ import annotations

import json
import re
import shutil
import struct
from pathlib import Path

import pytest

from sparktui.domain.model_files import (
    ModelDir,
    SafetensorsError,
    parse_model_info,
    parse_safetensors_header,
)
from sparktui.domain.sizing import (
    GIB,
    EngineSettings,
    SizingError,
    flag_value,
    propose,
    shape_from_config,
    size_node,
)

DATA = Path(__file__).parent / "data"
CONFIGS = DATA / "model-configs"
SPARK_TOTAL = 127_600_748 * 1024


def config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.config.json").read_text())


# ---- Llama-3.3-70B-Instruct: dense, 80 layers, 8 KV heads of 128, bf16 --------------------------------
def test_llama_33_70b_shape_and_kv_per_token():
    shape = shape_from_config(config("Llama-3.3-70B-Instruct"))
    assert (shape.layers, shape.attention_layers, shape.linear_layers) == (80, 80, 0)
    assert (shape.kv_heads, shape.head_dim, shape.dtype) == (8, 128, "bfloat16")
    assert shape.max_position_embeddings == 131_072
    # one GPU: K and V × 80 layers × 8 heads × 128 × 2 bytes = 327,680 bytes per token
    assert shape.kv_bytes_per_token(tp=1) == 2 * 80 * 8 * 128 * 2 == 327_680
    # TP 2: 4 KV heads per GPU → 163,840; fp8 KV cache halves it → 81,920
    assert shape.kv_bytes_per_token(tp=2) == 163_840
    assert shape.kv_bytes_per_token(tp=2, kv_dtype="fp8") == 81_920
    # TP 16 > 8 KV heads: vLLM replicates, one head per GPU → 2 × 80 × 1 × 128 × 2
    assert shape.kv_bytes_per_token(tp=16) == 40_960
    # PP 2: each GPU holds 40 of the 80 layers
    assert shape.kv_bytes_per_token(tp=2, pp=2) == 81_920
    assert shape.sequence_state_bytes(tp=2) == 0


def test_llama_33_70b_on_two_sparks_as_nvidias_playbook_runs_it():
    """The playbook's `--tensor-parallel-size 2 --max-model-len 2048 --gpu-memory-utilization 0.8`,
    bf16 weights of 141,107,412,992 bytes, 118 GiB free on the node."""
    shape = shape_from_config(config("Llama-3.3-70B-Instruct"))
    settings = EngineSettings.from_args(
        ["--max-model-len", "2048", "--gpu-memory-utilization=0.8"], tp=2, pp=1)
    s = size_node("spark1", shape, 141_107_412_992, SPARK_TOTAL, 118 * GIB, settings)
    # budget  = int(0.8 × 130,663,165,952)          = 104,530,532,761
    # weights = 141,107,412,992 / 2                   =  70,553,706,496 per GPU
    # KV      = 104,530,532,761 − 70,553,706,496 − 5 GiB (5,368,709,120) = 28,608,117,145
    assert s.budget_bytes == 104_530_532_761
    assert s.weights_bytes == 70_553_706_496
    assert s.kv_cache_bytes == 28_608_117_145
    # tokens  = 28,608,117,145 // 163,840 = 174,610 → the model's limit 131,072 is the largest that fits
    assert s.kv_tokens == 174_610
    assert s.max_model_len_fit == 131_072
    # concurrency at 2048 tokens = 28,608,117,145 / (2048 × 163,840) = 85.26
    assert s.concurrency == pytest.approx(85.26, abs=0.01)
    # the host keeps 118 GiB (126,701,535,232) − 104,530,532,761 = 22,171,002,471 (20.6 GiB)
    assert s.os_margin_bytes == 22_171_002_471
    assert s.ok, s.problems


def test_llama_33_70b_at_095_leaves_the_host_under_the_floor():
    shape = shape_from_config(config("Llama-3.3-70B-Instruct"))
    settings = EngineSettings.from_args(["--gpu-memory-utilization", "0.95", "--max-model-len", "32768"],
                                        tp=2, pp=1)
    s = size_node("spark2", shape, 141_107_412_992, SPARK_TOTAL, 118 * GIB, settings)
    # budget = int(0.95 × 130,663,165,952) = 124,130,007,654; the host keeps
    # 126,701,535,232 − 124,130,007,654 = 2,571,527,578 bytes = 2.4 GiB < 4 GiB
    assert s.budget_bytes == 124_130_007_654
    assert s.os_margin_bytes == 2_571_527_578
    assert [p for p in s.problems if "under the memory floor 4.0 GiB" in p and "2.4 GiB" in p]


def test_llama_33_70b_context_that_does_not_fit_is_named_with_the_largest_that_does():
    shape = shape_from_config(config("Llama-3.3-70B-Instruct"))
    settings = EngineSettings.from_args(["--gpu-memory-utilization", "0.7"], tp=2, pp=1)
    s = size_node("spark1", shape, 141_107_412_992, SPARK_TOTAL, 118 * GIB, settings)
    # budget int(0.7 × total) = 91,464,216,166; KV = 91,464,216,166 − 70,553,706,496 − 5,368,709,120
    #      = 15,541,800,550 → 94,859 tokens (// 163,840) → 92 × 1024 = 94,208
    assert s.kv_cache_bytes == 15_541_800_550
    assert s.kv_tokens == 94_859
    assert s.max_model_len_fit == 94_208
    # no --max-model-len: vLLM takes the model's 131,072, which needs 131,072 × 163,840 = 20 GiB
    assert any("default context 131,072 needs 20.0 GiB" in p and "--max-model-len 94,208" in p
               for p in s.problems), s.problems


# ---- Qwen3-Next-80B-A3B-Instruct: hybrid, 12 of 48 layers full attention --------------------------
def test_qwen3_next_shape_hybrid_layers_and_state():
    shape = shape_from_config(config("Qwen3-Next-80B-A3B-Instruct"))
    # full_attention_interval 4: layers 3, 7, …, 47 → 12 full-attention, 36 Gated DeltaNet
    assert (shape.layers, shape.attention_layers, shape.linear_layers) == (48, 12, 36)
    assert (shape.kv_heads, shape.head_dim) == (2, 256)
    # TP 2: 2 × 12 layers × 1 KV head × 256 × 2 bytes = 12,288 bytes per token
    assert shape.kv_bytes_per_token(tp=2) == 12_288
    # per linear layer and GPU at TP 2:
    #   conv state  = (2 × 16 × 128 + 32 × 128) / 2 × (4 − 1) × 2 bytes = 4096 × 3 × 2 = 24,576
    #   recurrent   = 32 / 2 heads × 128 × 128 × 2 bytes                 = 524,288
    #   36 layers × 548,864 = 19,759,104 bytes per sequence, whatever its length
    assert shape.sequence_state_bytes(tp=2) == 36 * (24_576 + 524_288) == 19_759_104


def test_qwen3_next_reproduces_the_recorded_vllm_log():
    """vLLM 0.10.2, TP 2 on H200s: "Free memory on device (139.21/139.81 GiB) … Desired GPU memory
    utilization is (0.9, 125.83 GiB). Actual usage is 74.28 GiB for weight, 5.58 GiB for peak activation,
    1.38 GiB for non-torch memory" → "Available KV cache memory: 44.59 GiB" and "Maximum concurrency for
    262,144 tokens per request: 14.77x"."""
    log = (DATA / "vllm-logs" / "12_single-node-tp2-h200-qwen3-next-80b-a3b-ready_v0.10.2.txt").read_text()
    logged_kv = float(re.search(r"Available KV cache memory: ([\d.]+) GiB", log).group(1))
    logged_conc = float(re.search(r"Maximum concurrency for 262,144 tokens per request: ([\d.]+)x",
                                  log).group(1))
    assert (logged_kv, logged_conc) == (44.59, 14.77)
    shape = shape_from_config(config("Qwen3-Next-80B-A3B-Instruct"))
    total = int(139.81 * GIB)
    settings = EngineSettings(tensor_parallel=2, gpu_memory_utilization=0.9, max_model_len=262_144)
    s = size_node("h200", shape, int(2 * 74.28 * GIB), total, int(139.21 * GIB), settings,
                  overhead_bytes=int((5.58 + 1.38) * GIB))
    # 0.9 × 139.81 = 125.83 GiB − 74.28 − 6.96 = 44.59 GiB
    assert s.kv_cache_bytes / GIB == pytest.approx(logged_kv, abs=0.01)
    # 44.59 GiB / (262,144 × 12,288 + 19,759,104) = 14.77
    assert s.concurrency == pytest.approx(logged_conc, abs=0.01)
    assert s.max_model_len_fit == 262_144
    assert s.ok, s.problems


def test_qwen35_style_text_config_with_layer_types():
    """Qwen3.5's multimodal wrapper keeps the language model in text_config and names every layer."""
    types = (["linear_attention"] * 3 + ["full_attention"]) * 12
    cfg = {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
           "text_config": {"num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 2,
                           "head_dim": 256, "layer_types": types, "dtype": "bfloat16",
                           "linear_num_key_heads": 16, "linear_num_value_heads": 64,
                           "linear_key_head_dim": 128, "linear_value_head_dim": 128,
                           "linear_conv_kernel_dim": 4, "max_position_embeddings": 262144},
           "quantization_config": {"quant_method": "fp8"}}
    shape = shape_from_config(cfg)
    assert (shape.attention_layers, shape.linear_layers, shape.quantization) == (12, 36, "fp8")
    assert shape.architecture == "Qwen3_5MoeForConditionalGeneration"
    # conv (2×16×128 + 64×128)/2 × 3 × 2 = 36,864; recurrent 32 × 128 × 128 × 2 = 1,048,576
    assert shape.sequence_state_bytes(tp=2) == 36 * (36_864 + 1_048_576)


def test_mla_and_sliding_window():
    mla = shape_from_config({"num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
                             "kv_lora_rank": 512, "qk_rope_head_dim": 64, "head_dim": 64})
    # MLA: (512 + 64) × 2 bytes per layer, not split by TP
    assert mla.kv_bytes_per_token(tp=8) == 61 * 576 * 2
    sw = shape_from_config({"num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
                            "head_dim": 64, "sliding_window": 512,
                            "layer_types": ["sliding_attention"] * 3 + ["full_attention"]})
    assert (sw.attention_layers, sw.sliding_layers) == (1, 3)
    assert sw.sequence_state_bytes(tp=1) == 3 * 512 * 2 * 4 * 64 * 2


@pytest.mark.parametrize(("cfg", "fault"), [
    ({"num_attention_heads": 8}, "num_hidden_layers: missing"),
    ({"num_hidden_layers": "80", "num_attention_heads": 8}, "num_hidden_layers: expected a positive integer"),
    ({"text_config": {"num_hidden_layers": 2}}, "text_config.num_attention_heads: missing"),
    ({"num_hidden_layers": 2, "num_attention_heads": 2, "head_dim": 8, "layer_types": ["full_attention"]},
     "layer_types: 1 entries for 2"),
    ({"num_hidden_layers": 1, "num_attention_heads": 2, "head_dim": 8, "layer_types": ["cross"]},
     "unknown layer type"),
    ([1, 2], "expected a JSON object"),
])
def test_bad_configs_name_the_key(cfg, fault):
    with pytest.raises(SizingError, match=re.escape(fault)):
        shape_from_config(cfg)


def test_flags_read_like_vllm_reads_them():
    args = ["--max-model-len", "32k", "--gpu_memory_utilization", "0.85", "--kv-cache-dtype=fp8"]
    assert flag_value(args, "--gpu-memory-utilization") == "0.85"
    s = EngineSettings.from_args(args, tp=2, pp=1, ray_start_args=["--object-store-memory", "2000000000"])
    assert (s.max_model_len, s.gpu_memory_utilization, s.kv_cache_dtype) == (32_000, 0.85, "fp8")
    assert s.object_store_bytes == 2_000_000_000
    assert EngineSettings.from_args(["--max-model-len", "auto"], tp=2, pp=1).max_model_len is None
    with pytest.raises(SizingError, match="--gpu-memory-utilization 'lots' is not a number"):
        EngineSettings.from_args(["--gpu-memory-utilization", "lots"], tp=2, pp=1)


def test_weights_that_do_not_fit_and_too_little_free_memory():
    shape = shape_from_config(config("Llama-3.3-70B-Instruct"))
    # the same bf16 70B on ONE Spark: 141 GB of weights in a 0.9 × 121.7 GiB budget
    s = size_node("solo", shape, 141_107_412_992, SPARK_TOTAL, 60 * GIB,
                  EngineSettings(tensor_parallel=1, gpu_memory_utilization=0.9))
    assert any(p.startswith("only 60.0 GiB free of 121.7 GiB") for p in s.problems)
    assert any(p.startswith("no room for a KV cache") for p in s.problems)
    assert s.max_model_len_fit == 0


def test_propose_keeps_every_node_over_the_floor():
    shape = shape_from_config(config("Llama-3.3-70B-Instruct"))
    nodes = {"spark1": (SPARK_TOTAL, 118 * GIB), "spark2": (SPARK_TOTAL, 110 * GIB)}
    p = propose(shape, 141_107_412_992, nodes, tp=2)
    # tightest node: (110 − 4) GiB / 121.69 GiB = 0.871 → 0.87; at 0.87 on spark1 KV = int(0.87 × total)
    # − 70,553,706,496 − 5 GiB = 37,754,538,942 → 230,435 tokens → the model's 131,072
    assert p is not None and p.gpu_memory_utilization == 0.87
    assert p.max_model_len == 131_072
    assert p.flags() == ["--gpu-memory-utilization", "0.87", "--max-model-len", "131072"]
    assert propose(shape, 141_107_412_992, {"solo": (SPARK_TOTAL, 118 * GIB)}, tp=1) is None


# ---- safetensors ---------------------------------------------------------------------------------
def safetensors_bytes(tensors: dict[str, tuple[str, list[int], int]], metadata: dict | None = None) -> bytes:
    header: dict = {"__metadata__": metadata or {"format": "pt"}}
    offset = 0
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + b"\0" * offset


def test_safetensors_header_parsed_without_a_library():
    data = safetensors_bytes({"w": ("F8_E4M3", [4, 8], 32), "w_scale": ("F32", [4], 16),
                              "norm": ("BF16", [8], 16)})
    h = parse_safetensors_header(data)
    assert (h.tensors, h.data_bytes) == (3, 64)
    assert h.dtype_bytes == {"F8_E4M3": 32, "F32": 16, "BF16": 16}
    assert h.metadata == {"format": "pt"}
    # a file's weights are its size less 8 and the header: what the node reports per file
    info = ModelDir("m", True, safetensors=(("a.safetensors", len(data), h.header_len),))
    assert info.weights_bytes == 64


@pytest.mark.parametrize(("data", "fault"), [
    (b"\x01\x02", "too short"),
    (struct.pack("<Q", 10**12), "not a safetensors file"),
    (struct.pack("<Q", 4) + b"[1]x", "not JSON"),
    (struct.pack("<Q", 50) + b"{}", "only 2 given"),
    (safetensors_bytes({"w": ("BF16", [4], 7)}), "needs 8 bytes, offsets give 7"),
])
def test_bad_safetensors_headers(data, fault):
    with pytest.raises(SafetensorsError, match=fault):
        parse_safetensors_header(data)


def test_model_info_script_on_a_real_directory(tmp_path):
    """MODEL_INFO_PY as it runs on a node: config.json, each file's header length, the weights."""
    import subprocess
    import sys

    from sparktui.domain.model_files import model_info_argv

    model = tmp_path / "models" / "Llama-3.3-70B-Instruct"
    model.mkdir(parents=True)
    (model / "config.json").write_text((CONFIGS / "Llama-3.3-70B-Instruct.config.json").read_text())
    one = safetensors_bytes({"a": ("BF16", [1024], 2048)})
    two = safetensors_bytes({"b": ("BF16", [512], 1024), "c": ("F32", [16], 64)})
    (model / "model-00001-of-00002.safetensors").write_bytes(one)
    (model / "model-00002-of-00002.safetensors").write_bytes(two)
    (model / "broken.safetensors").write_bytes(b"\x00")
    out = subprocess.run(model_info_argv(sys.executable, path=str(model)), capture_output=True, text=True,
                         check=True, env={"HOME": str(tmp_path)})
    info = parse_model_info(out.stdout)
    assert info.exists and info.config is not None
    assert shape_from_config(info.config).layers == 80
    assert info.weights_bytes == 2048 + 1024 + 64
    assert info.bad_files == ["broken.safetensors"]
    scan = subprocess.run(model_info_argv(sys.executable, scan=True), capture_output=True, text=True,
                          check=True, env={"HOME": str(tmp_path)})
    from sparktui.domain.model_files import parse_model_scan
    home, models = parse_model_scan(scan.stdout)
    assert home == str(tmp_path)
    assert [m.name for m in models] == ["Llama-3.3-70B-Instruct"]
    assert models[0].weights_bytes == 3136


# ---- preflight's check ---------------------------------------------------------------------------
def _spark_config(extra_args: list[str], floor: str = "4GiB", object_store: str = "4GiB"):
    from sparktui.config import parse_config

    return parse_config({
        "nodes": [{"name": "spark1", "host": "spark1", "role": "head"}, {"name": "spark2", "host": "spark2"}],
        "engine": {"model": "/models/Llama-3.3-70B-Instruct", "extra_args": extra_args,
                   "memory_floor": floor, "ray_object_store_memory": object_store},
    })


def _llama_dir() -> ModelDir:
    # two shards whose data sections sum to 141,107,412,992 bytes (header 1,000 bytes each)
    half = 141_107_412_992 // 2
    return ModelDir("/home/u/models/Llama-3.3-70B-Instruct", True, config=config("Llama-3.3-70B-Instruct"),
                    safetensors=(("a.safetensors", half + 1008, 1000), ("b.safetensors", half + 1008, 1000)))


def test_preflight_memory_sizing_per_node():
    from sparktui.domain.events import StepStatus
    from sparktui.domain.lifecycle.memory_fit import check_memory_fit
    from sparktui.domain.lifecycle.preflight import PreflightFacts

    facts = {"spark1": PreflightFacts(mem_total_kb=127_600_748, mem_available_kb=118 * 1024 * 1024),
             "spark2": PreflightFacts(mem_total_kb=127_600_748, mem_available_kb=100 * 1024 * 1024)}
    views = check_memory_fit(_spark_config(["--gpu-memory-utilization", "0.8", "--max-model-len", "2048"]),
                             facts, _llama_dir())
    by_node = {v.node: v for v in views}
    assert by_node["spark1"].status is StepStatus.OK
    assert by_node["spark1"].message.startswith("weights 65.7 GiB/GPU, KV cache 26.6 GiB = 174,610 tokens")
    # 118 GiB free − 104,530,532,761 budget − 4 GiB object store (engine.ray_object_store_memory)
    #   = 17,876,035,175 bytes = 16.6 GiB
    assert by_node["spark1"].message.endswith("host keeps 16.6 GiB (floor 4.0 GiB)")
    # spark2: 100 GiB free − 97.35 GiB budget − 4 GiB object store = −1.4 GiB < 4 GiB
    assert by_node["spark2"].status is StepStatus.WARNING
    assert ("the host keeps -1.4 GiB (100.0 GiB free − 97.4 GiB for vLLM − 4.0 GiB Ray object store), "
            "under the memory floor 4.0 GiB") in by_node["spark2"].message
    # Ray's default object store and a lower floor: no warning, the unsized store said
    low_floor = _spark_config(["--gpu-memory-utilization", "0.8"], floor="2GiB", object_store="0")
    views = check_memory_fit(low_floor, facts, _llama_dir())
    assert {v.status for v in views} == {StepStatus.OK}
    assert "host keeps 2.6 GiB (floor 2.0 GiB), Ray's object store unsized" in views[1].message


def test_preflight_memory_sizing_skips_what_it_cannot_size():
    from sparktui.domain.events import StepStatus
    from sparktui.domain.lifecycle.memory_fit import check_memory_fit
    from sparktui.domain.lifecycle.preflight import PreflightFacts

    facts = {"spark1": PreflightFacts(mem_total_kb=127_600_748, mem_available_kb=118 * 1024 * 1024)}
    cfg = _spark_config([])
    standin = ModelDir("/tmp/models/standin-model", True, config={"architectures": ["StandinForCausalLM"]},
                       safetensors=(("m.safetensors", 4096, 0),))
    [view] = check_memory_fit(cfg, facts, standin)
    assert view.status is StepStatus.SKIPPED
    assert "cannot size: num_hidden_layers: missing" in view.message
    [view] = check_memory_fit(cfg, facts, None, "reading the model: exit 1: boom")
    assert (view.status, view.message) == (StepStatus.SKIPPED, "reading the model: exit 1: boom")
    [view] = check_memory_fit(cfg, facts, ModelDir("/nope", False))
    assert view.message == "/nope: not found on the head, nothing to size"


def test_model_info_script_resolves_a_hugging_face_id_in_the_cache(tmp_path):
    """The hub's layout: models--ORG--NAME/refs/main names the snapshot holding the files."""
    import subprocess
    import sys

    from sparktui.domain.model_files import model_info_argv, parse_model_scan

    repo = tmp_path / ".cache" / "huggingface" / "hub" / "models--Qwen--Qwen3-Next-80B-A3B-Instruct"
    snap = repo / "snapshots" / "9c7f2fbe"
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("9c7f2fbe")
    (snap / "config.json").write_text((CONFIGS / "Qwen3-Next-80B-A3B-Instruct.config.json").read_text())
    (snap / "model-00001-of-00001.safetensors").write_bytes(safetensors_bytes({"w": ("BF16", [8], 16)}))
    env = {"HOME": str(tmp_path)}
    out = subprocess.run(model_info_argv(sys.executable, hf_id="Qwen/Qwen3-Next-80B-A3B-Instruct"),
                         capture_output=True, text=True, check=True, env=env)
    info = parse_model_info(out.stdout)
    assert info.path == str(snap) and info.weights_bytes == 16
    assert shape_from_config(info.config).attention_layers == 12
    scan = subprocess.run(model_info_argv(sys.executable, scan=True), capture_output=True, text=True,
                          check=True, env=env)
    _, models = parse_model_scan(scan.stdout)
    assert [(m.hf_id, m.name, m.weights_bytes) for m in models] == [
        ("Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen/Qwen3-Next-80B-A3B-Instruct", 16)]
    # the cache docker mounts into the container, named explicitly
    elsewhere = tmp_path / "hf"
    shutil.copytree(tmp_path / ".cache" / "huggingface", elsewhere)
    shutil.rmtree(tmp_path / ".cache")
    argv = model_info_argv(sys.executable, hf_id="Qwen/Qwen3-Next-80B-A3B-Instruct", hf_home="~/hf")
    moved = subprocess.run(argv, capture_output=True, text=True, check=True, env=env)
    assert parse_model_info(moved.stdout).path == str(elsewhere / "hub" / repo.name / "snapshots/9c7f2fbe")
    missing = subprocess.run(model_info_argv(sys.executable, hf_id="org/absent"), capture_output=True,
                             text=True, check=True, env=env)
    assert not parse_model_info(missing.stdout).exists
