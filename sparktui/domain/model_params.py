"""A model's parameters counted from its ``config.json`` (pure): the weights each GPU loads and the bytes one
decoded token reads, when the safetensors themselves are not at hand (``plan`` before a download) and for
the decode ceiling (an MoE reads only its routed experts per token).

The count follows the layer shapes vLLM builds: GQA attention (Qwen3-Next / Qwen3.5 with a gated query),
MLA (DeepSeek-V2/V3), Gated DeltaNet linear attention, dense and MoE feed-forward (shared experts, the first
``first_k_dense_replace`` layers dense), the embedding and an untied LM head. Norms and biases are left out
(well under 0.1 %). TP splits every matrix, the embedding and the LM head included (vLLM's vocab-parallel
layers); PP splits the layers, the embedding on the first stage and the LM head on the last.

Checked against recorded logs' "Model loading took X GiB" (``tests/test_plan_vs_logs.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sparktui.domain.sizing import DTYPE_BYTES, SizingError

#: Bytes per weight of a quantized checkpoint's linear layers, by ``quant_method`` (scales included:
#: 4-bit with a 16-bit scale per group of 128 ≈ 0.52; NVFP4's 8-bit scale per 16 ≈ 0.56).
QUANT_WEIGHT_BYTES: dict[str, float] = {
    "fp8": 1.0, "fbgemm_fp8": 1.0, "ptpc_fp8": 1.0, "mxfp4": 0.53, "modelopt_fp4": 0.5625, "nvfp4": 0.5625,
    "awq": 0.52, "awq_marlin": 0.52, "gptq": 0.52, "gptq_marlin": 0.52, "bitsandbytes": 0.52,
}
#: Model types whose full-attention query carries an output gate (q_proj twice as wide).
GATED_QUERY_TYPES = frozenset({"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_moe"})


@dataclass(frozen=True)
class ParamCount:
    """Parameters by where they sit (counts, not bytes)."""

    layers: int
    hidden_size: int
    embedding: int
    lm_head: int
    #: Per layer: everything but the routed experts (attention, dense MLP, shared experts, router).
    layer_dense: tuple[int, ...]
    #: Per layer: all routed experts, and the ones one token uses (top-k).
    layer_experts: tuple[int, ...]
    layer_experts_active: tuple[int, ...]
    #: Bytes per weight of the linear layers (quantized or the config's dtype) and of the embedding/head.
    weight_bytes: float
    embedding_bytes: float

    @property
    def total(self) -> int:
        return self.embedding + self.lm_head + sum(self.layer_dense) + sum(self.layer_experts)

    @property
    def active(self) -> int:
        """Parameters one decoded token reads (one embedding row is nothing: the LM head is read whole)."""
        return self.lm_head + sum(self.layer_dense) + sum(self.layer_experts_active)

    @property
    def moe(self) -> bool:
        return any(self.layer_experts)

    def _stage_bytes(self, layers: range, first: bool, last: bool, active: bool) -> float:
        experts = self.layer_experts_active if active else self.layer_experts
        body = sum(self.layer_dense[i] + experts[i] for i in layers) * self.weight_bytes
        ends = ((self.embedding if first and not active else 0) + (self.lm_head if last else 0))
        return body + ends * self.embedding_bytes

    def _stages(self, pp: int) -> list[range]:
        # vLLM's default partition: equal shares, the remainder to the last stages.
        base, extra = divmod(self.layers, pp)
        out, start = [], 0
        for stage in range(pp):
            n = base + (1 if stage >= pp - extra else 0)
            out.append(range(start, start + n))
            start += n
        return out

    def gpu_weight_bytes(self, tp: int = 1, pp: int = 1) -> int:
        """The weights of the heaviest GPU: its stage's layers (and embedding or LM head) split TP ways."""
        stages = self._stages(pp)
        return math.ceil(max(self._stage_bytes(r, i == 0, i == pp - 1, active=False)
                             for i, r in enumerate(stages)) / tp)

    def active_bytes(self) -> int:
        """Bytes of weights one decoded token reads across the whole model."""
        return math.ceil(self._stage_bytes(range(self.layers), True, True, active=True))

    def total_bytes(self) -> int:
        return math.ceil(self._stage_bytes(range(self.layers), True, True, active=False))


def _get(cfg: Mapping[str, Any], *keys: str, default: int = 0) -> int:
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return default


def _need(cfg: Mapping[str, Any], key: str, where: str) -> int:
    value = cfg.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        problem = "missing" if value is None else f"expected a positive integer, got {value!r}"
        raise SizingError(f"{where}{key}: {problem}")
    return value


def _quant_bytes(config: Mapping[str, Any], text: Mapping[str, Any]) -> float | None:
    quant = config.get("quantization_config") or text.get("quantization_config")
    if not isinstance(quant, Mapping):
        return None
    method = str(quant.get("quant_method") or "").lower()
    bits = quant.get("bits") or quant.get("weight_bits")
    if isinstance(bits, int) and bits in (4, 8) and method not in ("fp8",):
        return 1.0 if bits == 8 else 0.52
    if method == "compressed-tensors":
        groups = quant.get("config_groups") or {}
        for group in groups.values() if isinstance(groups, Mapping) else ():
            weights = group.get("weights") if isinstance(group, Mapping) else None
            if isinstance(weights, Mapping) and isinstance(weights.get("num_bits"), int):
                return 1.0 if weights["num_bits"] == 8 else 0.52
        return None
    return QUANT_WEIGHT_BYTES.get(method)


def count_params(config: Mapping[str, Any]) -> ParamCount:
    """``config.json`` → ``ParamCount``; ``SizingError`` naming the key that is missing."""
    if not isinstance(config, Mapping):
        raise SizingError("config.json: expected a JSON object")
    text = config.get("text_config")
    cfg: Mapping[str, Any] = text if isinstance(text, Mapping) else config
    where = "text_config." if cfg is not config else ""
    h = _need(cfg, "hidden_size", where)
    layers = _need(cfg, "num_hidden_layers", where)
    heads = _need(cfg, "num_attention_heads", where)
    kv_heads = _get(cfg, "num_key_value_heads", default=heads)
    head_dim = _get(cfg, "head_dim", default=h // heads)
    vocab = _need(cfg, "vocab_size", where)
    model_type = str(cfg.get("model_type") or config.get("model_type") or "")
    gated = bool(cfg.get("attn_output_gate", model_type in GATED_QUERY_TYPES))

    # Attention, by kind of layer.
    if isinstance(cfg.get("kv_lora_rank"), int):
        q_lora = _get(cfg, "q_lora_rank")
        nope, rope = _need(cfg, "qk_nope_head_dim", where), _need(cfg, "qk_rope_head_dim", where)
        v_dim, kv_lora = _need(cfg, "v_head_dim", where), cfg["kv_lora_rank"]
        q = (h * q_lora + q_lora * heads * (nope + rope)) if q_lora else h * heads * (nope + rope)
        full_attn = q + h * (kv_lora + rope) + kv_lora * heads * (nope + v_dim) + heads * v_dim * h
    else:
        full_attn = (h * heads * head_dim * (2 if gated else 1) + 2 * h * kv_heads * head_dim
                     + heads * head_dim * h)
    linear_attn = 0
    if "linear_num_value_heads" in cfg:
        nk, nv = _need(cfg, "linear_num_key_heads", where), _need(cfg, "linear_num_value_heads", where)
        dk, dv = _need(cfg, "linear_key_head_dim", where), _need(cfg, "linear_value_head_dim", where)
        kernel = _get(cfg, "linear_conv_kernel_dim", default=4)
        conv_dim = 2 * nk * dk + nv * dv
        linear_attn = h * (2 * nk * dk + 2 * nv * dv) + h * 2 * nv + conv_dim * kernel + nv * dv * h
    types = cfg.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        is_linear = [t in ("linear_attention", "mamba", "ssm") for t in types]
    elif linear_attn and isinstance(cfg.get("full_attention_interval"), int):
        interval = cfg["full_attention_interval"]
        is_linear = [(i + 1) % interval != 0 for i in range(layers)]
    else:
        is_linear = [False] * layers

    # Feed-forward: dense or MoE per layer.
    experts = _get(cfg, "num_experts", "n_routed_experts", "num_local_experts")
    top_k = _get(cfg, "num_experts_per_tok", "moe_topk")
    moe_inter = _get(cfg, "moe_intermediate_size", default=_get(cfg, "intermediate_size"))
    dense_inter = _get(cfg, "intermediate_size")
    shared = _get(cfg, "n_shared_experts") * 3 * h * moe_inter
    if _get(cfg, "shared_expert_intermediate_size"):
        shared = 3 * h * cfg["shared_expert_intermediate_size"] + h    # + the shared expert's gate
    first_dense = _get(cfg, "first_k_dense_replace")
    step = _get(cfg, "decoder_sparse_step", default=1) or 1
    mlp_only = set(cfg.get("mlp_only_layers") or ())
    dense_parts, expert_parts, active_parts = [], [], []
    for i in range(layers):
        attn = linear_attn if is_linear[i] else full_attn
        moe_layer = experts > 0 and i >= first_dense and i not in mlp_only and (i + 1) % step == 0
        if moe_layer:
            if not top_k:
                raise SizingError(f"{where}num_experts_per_tok: missing (the model has {experts} experts)")
            dense_parts.append(attn + shared + h * experts)
            expert_parts.append(experts * 3 * h * moe_inter)
            active_parts.append(top_k * 3 * h * moe_inter)
        else:
            if not dense_inter:
                raise SizingError(f"{where}intermediate_size: missing")
            dense_parts.append(attn + 3 * h * dense_inter)
            expert_parts.append(0)
            active_parts.append(0)

    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or config.get("torch_dtype")
                or config.get("dtype") or "bfloat16")
    base = float(DTYPE_BYTES.get(dtype, 2))
    tied = bool(cfg.get("tie_word_embeddings", config.get("tie_word_embeddings", False)))
    return ParamCount(
        layers=layers, hidden_size=h, embedding=vocab * h, lm_head=0 if tied else vocab * h,
        layer_dense=tuple(dense_parts), layer_experts=tuple(expert_parts),
        layer_experts_active=tuple(active_parts),
        weight_bytes=_quant_bytes(config, cfg) or base, embedding_bytes=base,
    )


__all__ = ["QUANT_WEIGHT_BYTES", "ParamCount", "count_params"]
