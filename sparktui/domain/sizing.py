"""Memory and context sizing: what a model and a ``--gpu-memory-utilization`` leave on each node (pure).

From the model's ``config.json`` (layers, KV heads, head dim, dtype; hybrid models where only some layers
have full attention) and the weights' size (safetensors), and from a node's ``MemTotal`` /
``MemAvailable``, this works out what vLLM will do with the unified memory of one DGX Spark:

* vLLM's budget is ``gpu_memory_utilization × total memory`` (on a GB10 the GPU's memory *is* the host's
  memory); it refuses to start when less than that is free;
* out of the budget come this GPU's share of the weights (``1 / (TP × PP)``), an overhead for peak
  activations, non-torch allocations and CUDA graphs (an estimate: 1–7 GiB in the recorded logs), and the
  rest is the KV cache;
* a full-attention layer stores K and V for every token of every sequence; a linear-attention layer
  (Gated DeltaNet in Qwen3-Next / Qwen3.5) keeps a fixed state per sequence, whatever its length;
* what the host keeps for the OS, page cache and Ray is ``MemAvailable − budget − Ray's object store``,
  which must stay above ``engine.memory_floor``.

The arithmetic follows vLLM's own (checked against a recorded log: Qwen3-Next-80B-A3B, TP 2, 44.59 GiB of
KV cache → "Maximum concurrency for 262,144 tokens per request: 14.77x", which this module reproduces).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

GIB = 1 << 30

#: Bytes per element of the dtypes a config or ``--kv-cache-dtype`` names.
DTYPE_BYTES: dict[str, int] = {
    "float32": 4, "float": 4, "fp32": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "fp8_ds_mla": 1, "float8_e4m3fn": 1,
}

#: vLLM's default ``--gpu-memory-utilization``.
DEFAULT_UTILIZATION = 0.9
#: Peak activations + non-torch memory + CUDA graphs, per GPU (recorded logs: 1.1 GiB Llama-3.3-70B on
#: vLLM 0.8, 3.4 GiB Qwen3.6-35B on a GB10 with vLLM 0.19, 7.0 GiB Qwen3-Next-80B on vLLM 0.10).
DEFAULT_OVERHEAD_BYTES = 5 * GIB
#: A proposed ``--max-model-len`` is a multiple of this.
CONTEXT_STEP = 1024
#: The highest ``--gpu-memory-utilization`` ``propose`` suggests (community notes: 0.85–0.9 on a Spark).
MAX_PROPOSED_UTILIZATION = 0.90


class SizingError(ValueError):
    """A config.json that does not say what sizing needs; the message names the key."""


@dataclass(frozen=True)
class LinearAttention:
    """Gated DeltaNet geometry (Qwen3-Next, Qwen3.5): a conv state and a recurrent state per sequence."""

    key_heads: int
    value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int

    def state_bytes(self, tp: int, dtype_bytes: int) -> int:
        """One sequence's state in one such layer on one of ``tp`` GPUs (heads split across them)."""
        conv_dim = 2 * self.key_heads * self.key_head_dim + self.value_heads * self.value_head_dim
        conv = conv_dim // tp * (self.conv_kernel - 1) * dtype_bytes
        recurrent = self.value_heads // tp * self.key_head_dim * self.value_head_dim * dtype_bytes
        return conv + recurrent


@dataclass(frozen=True)
class ModelShape:
    """What of a model's config.json sizing needs."""

    architecture: str
    layers: int
    #: Layers with full attention: their KV cache grows with every token.
    attention_layers: int
    #: Sliding-window attention layers (KV bounded by ``sliding_window`` tokens).
    sliding_layers: int = 0
    sliding_window: int | None = None
    #: Linear-attention layers: a fixed state per sequence.
    linear_layers: int = 0
    linear: LinearAttention | None = None
    kv_heads: int = 1
    head_dim: int = 128
    #: MLA (DeepSeek): the compressed KV width per token and layer, shared by all heads (not split by TP).
    mla_width: int | None = None
    dtype: str = "bfloat16"
    max_position_embeddings: int | None = None
    quantization: str | None = None

    @property
    def hybrid(self) -> bool:
        return self.linear_layers > 0

    def kv_bytes_per_token(self, tp: int = 1, pp: int = 1, kv_dtype: str = "auto") -> int:
        """K and V of one token in every full-attention layer this GPU holds."""
        layers = math.ceil(self.attention_layers / pp)
        width = self._kv_width(tp)
        return layers * width * self.kv_dtype_bytes(kv_dtype)

    def sequence_state_bytes(self, tp: int = 1, pp: int = 1, kv_dtype: str = "auto",
                             context: int | None = None) -> int:
        """What one sequence holds whatever its length: linear-attention states and sliding windows."""
        total = 0
        if self.linear is not None and self.linear_layers:
            total += math.ceil(self.linear_layers / pp) * self.linear.state_bytes(tp, self.dtype_bytes)
        if self.sliding_layers and self.sliding_window:
            window = self.sliding_window if context is None else min(self.sliding_window, context)
            total += (math.ceil(self.sliding_layers / pp) * window * self._kv_width(tp)
                      * self.kv_dtype_bytes(kv_dtype))
        return total

    def _kv_width(self, tp: int) -> int:
        if self.mla_width is not None:
            return self.mla_width
        # vLLM gives each rank max(1, heads // tp) KV heads (replicated when there are fewer than TP).
        return 2 * max(1, self.kv_heads // tp) * self.head_dim

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES.get(self.dtype, 2)

    def kv_dtype_bytes(self, kv_dtype: str = "auto") -> int:
        if kv_dtype in ("", "auto"):
            return self.dtype_bytes
        if kv_dtype not in DTYPE_BYTES:
            raise SizingError(f"--kv-cache-dtype {kv_dtype!r} is not one sizing knows "
                              f"({', '.join(sorted(DTYPE_BYTES))}, auto)")
        return DTYPE_BYTES[kv_dtype]


def _int(cfg: Mapping[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = cfg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        if value is None:
            raise SizingError(f"{where}{key}: missing")
        raise SizingError(f"{where}{key}: expected a positive integer, got {value!r}")
    return value


def shape_from_config(config: Mapping[str, Any]) -> ModelShape:
    """A model's ``config.json`` (a dict) → ``ModelShape``; ``SizingError`` naming the key when unusable.

    Multimodal wrappers (Qwen3.5's ``Qwen3_5MoeForConditionalGeneration``) keep the language model in
    ``text_config``; hybrid models name each layer in ``layer_types`` or give a ``full_attention_interval``.
    """
    if not isinstance(config, Mapping):
        raise SizingError("config.json: expected a JSON object")
    archs = config.get("architectures") or []
    arch = str(archs[0]) if isinstance(archs, list) and archs else str(config.get("model_type", "unknown"))
    text = config.get("text_config")
    where = ""
    cfg: Mapping[str, Any] = config
    if isinstance(text, Mapping):
        cfg, where = text, "text_config."
    layers = _int(cfg, "num_hidden_layers", where)
    heads = _int(cfg, "num_attention_heads", where)
    kv_heads = _int(cfg, "num_key_value_heads", where, heads)
    head_dim_default = None
    if isinstance(cfg.get("hidden_size"), int) and cfg["hidden_size"] > 0:
        head_dim_default = cfg["hidden_size"] // heads
    head_dim = _int(cfg, "head_dim", where, head_dim_default)
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or config.get("torch_dtype")
                or config.get("dtype") or "bfloat16")
    max_pos = cfg.get("max_position_embeddings")
    quant = config.get("quantization_config") or cfg.get("quantization_config")
    quant_name = str(quant.get("quant_method")) if isinstance(quant, Mapping) and quant.get("quant_method") \
        else None

    attention, sliding, linear_layers = layers, 0, 0
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:
        if len(types) != layers:
            raise SizingError(f"{where}layer_types: {len(types)} entries for {layers} num_hidden_layers")
        attention = sum(1 for t in types if t in ("full_attention", "attention"))
        sliding = sum(1 for t in types if t == "sliding_attention")
        linear_layers = sum(1 for t in types if t in ("linear_attention", "mamba", "ssm"))
        unknown = sorted({str(t) for t in types} - {"full_attention", "attention", "sliding_attention",
                                                    "linear_attention", "mamba", "ssm"})
        if unknown:
            raise SizingError(f"{where}layer_types: unknown layer type(s) {unknown}")
    elif isinstance(cfg.get("full_attention_interval"), int) and "linear_num_value_heads" in cfg:
        interval = _int(cfg, "full_attention_interval", where)
        # Qwen3-Next: layer i has full attention when (i + 1) % interval == 0.
        attention = sum(1 for i in range(layers) if (i + 1) % interval == 0)
        linear_layers = layers - attention

    linear = None
    if linear_layers:
        linear = LinearAttention(
            key_heads=_int(cfg, "linear_num_key_heads", where),
            value_heads=_int(cfg, "linear_num_value_heads", where),
            key_head_dim=_int(cfg, "linear_key_head_dim", where),
            value_head_dim=_int(cfg, "linear_value_head_dim", where),
            conv_kernel=_int(cfg, "linear_conv_kernel_dim", where, 4),
        )
    mla = None
    if isinstance(cfg.get("kv_lora_rank"), int):
        mla = _int(cfg, "kv_lora_rank", where) + _int(cfg, "qk_rope_head_dim", where)
    window = cfg.get("sliding_window") if isinstance(cfg.get("sliding_window"), int) else None
    if sliding and window is None:
        raise SizingError(f"{where}sliding_window: missing (layer_types names sliding_attention layers)")
    return ModelShape(
        architecture=arch, layers=layers, attention_layers=attention, sliding_layers=sliding,
        sliding_window=window, linear_layers=linear_layers, linear=linear, kv_heads=kv_heads,
        head_dim=head_dim, mla_width=mla, dtype=dtype,
        max_position_embeddings=max_pos if isinstance(max_pos, int) and max_pos > 0 else None,
        quantization=quant_name,
    )


# ---- vLLM flags ----------------------------------------------------------------------------------
def flag_value(args: Sequence[str], flag: str) -> str | None:
    """The value of ``--flag VALUE`` / ``--flag=VALUE`` (or the ``--flag_name`` spelling) in ``args``;
    the last one wins, as with argparse."""
    spellings = {flag, flag.replace("-", "_").replace("__", "--", 1)}
    found = None
    items = list(args)
    for i, a in enumerate(items):
        name, eq, value = a.partition("=")
        if name in spellings:
            if eq:
                found = value
            elif i + 1 < len(items):
                found = items[i + 1]
    return found


@dataclass(frozen=True)
class EngineSettings:
    """The settings of a start that sizing needs (from ``engine`` and its flags)."""

    tensor_parallel: int = 2
    pipeline_parallel: int = 1
    gpu_memory_utilization: float = DEFAULT_UTILIZATION
    max_model_len: int | None = None
    kv_cache_dtype: str = "auto"
    #: Ray's object store, when set explicitly (``ray start --object-store-memory``), bytes.
    object_store_bytes: int = 0

    @classmethod
    def from_args(cls, extra_args: Sequence[str], *, tp: int, pp: int,
                  ray_start_args: Sequence[str] = ()) -> EngineSettings:
        """Raises ``SizingError`` naming the flag whose value is not a number."""
        def number(flag: str, kind: type, raw: str | None) -> Any:
            if raw is None:
                return None
            try:
                return kind(raw.strip())
            except ValueError:
                raise SizingError(f"{flag} {raw!r} is not a number") from None

        util = number("--gpu-memory-utilization", float, flag_value(extra_args, "--gpu-memory-utilization"))
        mml_raw = flag_value(extra_args, "--max-model-len")
        mml = None
        if mml_raw is not None and mml_raw.strip().lower() not in ("auto", "-1"):
            mml = number("--max-model-len", int, _expand_k(mml_raw))
        store = number("--object-store-memory", int, flag_value(ray_start_args, "--object-store-memory"))
        return cls(tensor_parallel=tp, pipeline_parallel=pp,
                   gpu_memory_utilization=DEFAULT_UTILIZATION if util is None else util,
                   max_model_len=mml, kv_cache_dtype=flag_value(extra_args, "--kv-cache-dtype") or "auto",
                   object_store_bytes=store or 0)


def _expand_k(raw: str) -> str:
    """vLLM accepts ``--max-model-len 32k`` (×1000) and ``32K`` (×1024)."""
    s = raw.strip()
    for suffix, mult in (("k", 1000), ("K", 1024), ("m", 1000**2), ("M", 1024**2)):
        if s.endswith(suffix) and s[:-1].isdigit():
            return str(int(s[:-1]) * mult)
    return s


# ---- the numbers ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeSizing:
    """What a start with ``settings`` leaves on one node (bytes unless said)."""

    node: str
    total_bytes: int
    available_bytes: int
    budget_bytes: int
    weights_bytes: int
    overhead_bytes: int
    kv_cache_bytes: int
    kv_bytes_per_token: int
    sequence_state_bytes: int
    #: Tokens of KV cache one sequence could use (the largest context that fits at all).
    kv_tokens: int
    #: The largest ``--max-model-len`` that fits (model limit, multiple of CONTEXT_STEP), 0 if none.
    max_model_len_fit: int
    #: Sequences of ``max_model_len`` tokens that fit at once (vLLM's "Maximum concurrency").
    concurrency: float | None
    #: What the host keeps once vLLM has its budget (and Ray its explicit object store).
    os_margin_bytes: int
    floor_bytes: int
    max_model_len: int | None
    problems: tuple[str, ...] = field(default_factory=tuple)
    object_store_explicit: bool = True

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        g = _gib
        parts = [f"weights {g(self.weights_bytes)}/GPU", f"KV cache {g(self.kv_cache_bytes)}"
                 + (f" = {self.kv_tokens:,} tokens" if self.kv_tokens > 0 else "")]
        if self.max_model_len and self.concurrency is not None:
            parts.append(f"--max-model-len {self.max_model_len:,} fits {self.concurrency:.2f}×")
        elif self.max_model_len_fit:
            parts.append(f"largest --max-model-len {self.max_model_len_fit:,}")
        parts.append(f"host keeps {g(self.os_margin_bytes)} (floor {g(self.floor_bytes)})")
        if not self.object_store_explicit:
            # Ray's default object store is up to 30 % of memory, used as objects are stored.
            parts.append("Ray's object store unsized (set --object-store-memory in engine.ray_start_args)")
        return ", ".join(parts)


def _gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB"


def size_node(
    node: str,
    shape: ModelShape,
    weights_total_bytes: int,
    total_bytes: int,
    available_bytes: int,
    settings: EngineSettings,
    *,
    floor_bytes: int = 4 * GIB,
    overhead_bytes: int = DEFAULT_OVERHEAD_BYTES,
) -> NodeSizing:
    """The numbers for one node (one GPU), with every reason the start will not fit or leaves the host
    under the floor in ``problems``."""
    tp, pp = settings.tensor_parallel, settings.pipeline_parallel
    budget = int(settings.gpu_memory_utilization * total_bytes)
    weights = math.ceil(weights_total_bytes / (tp * pp))
    kv_cache = budget - weights - overhead_bytes
    per_token = shape.kv_bytes_per_token(tp, pp, settings.kv_cache_dtype)
    state = shape.sequence_state_bytes(tp, pp, settings.kv_cache_dtype)
    kv_tokens = max(0, (kv_cache - state) // per_token) if per_token else 0
    limit = shape.max_position_embeddings or kv_tokens
    fit = min(kv_tokens, limit) // CONTEXT_STEP * CONTEXT_STEP
    if 0 < min(kv_tokens, limit) < CONTEXT_STEP:
        fit = min(kv_tokens, limit)
    mml = settings.max_model_len
    concurrency = None
    length = mml or shape.max_position_embeddings
    if length and kv_cache > 0:
        concurrency = kv_cache / (length * per_token + state)
    margin = available_bytes - budget - settings.object_store_bytes
    problems: list[str] = []
    if not 0 < settings.gpu_memory_utilization <= 1:
        problems.append(f"--gpu-memory-utilization {settings.gpu_memory_utilization} is outside (0, 1]")
    if available_bytes < budget:
        problems.append(
            f"only {_gib(available_bytes)} free of {_gib(total_bytes)}: vLLM wants "
            f"{settings.gpu_memory_utilization:g} × {_gib(total_bytes)} = {_gib(budget)} and refuses to "
            "start "
            "(lower --gpu-memory-utilization, free memory or drop the page cache)")
    if kv_cache <= state:
        problems.append(
            f"no room for a KV cache: {_gib(budget)} budget − {_gib(weights)} weights/GPU − "
            f"~{_gib(overhead_bytes)} activations/graphs leaves {_gib(kv_cache)}")
    elif mml and shape.max_position_embeddings and mml > shape.max_position_embeddings:
        problems.append(f"--max-model-len {mml:,} exceeds the model's max_position_embeddings "
                        f"{shape.max_position_embeddings:,}")
    elif length and length * per_token + state > kv_cache:
        flag = f"--max-model-len {mml:,}" if mml else f"the model's default context {length:,}"
        problems.append(f"{flag} needs {_gib(length * per_token + state)} of KV cache, "
                        f"{_gib(kv_cache)} is left: use --max-model-len {fit:,} or less")
    if margin < floor_bytes and available_bytes >= budget:
        store = (f" − {_gib(settings.object_store_bytes)} Ray object store"
                 if settings.object_store_bytes else "")
        problems.append(f"the host keeps {_gib(margin)} ({_gib(available_bytes)} free − {_gib(budget)} "
                        f"for vLLM{store}), under the memory floor {_gib(floor_bytes)}: lower "
                        "--gpu-memory-utilization")
    return NodeSizing(
        node=node, total_bytes=total_bytes, available_bytes=available_bytes, budget_bytes=budget,
        weights_bytes=weights, overhead_bytes=overhead_bytes, kv_cache_bytes=kv_cache,
        kv_bytes_per_token=per_token, sequence_state_bytes=state, kv_tokens=int(kv_tokens),
        max_model_len_fit=int(fit), concurrency=concurrency, os_margin_bytes=margin,
        floor_bytes=floor_bytes, max_model_len=mml, problems=tuple(problems),
        object_store_explicit=settings.object_store_bytes > 0,
    )


@dataclass(frozen=True)
class Proposal:
    gpu_memory_utilization: float
    max_model_len: int
    why: str

    def flags(self) -> list[str]:
        return ["--gpu-memory-utilization", f"{self.gpu_memory_utilization:.2f}",
                "--max-model-len", str(self.max_model_len)]


def propose(
    shape: ModelShape,
    weights_total_bytes: int,
    nodes: Mapping[str, tuple[int, int]],
    *,
    tp: int,
    pp: int = 1,
    kv_cache_dtype: str = "auto",
    floor_bytes: int = 4 * GIB,
    object_store_bytes: int = 0,
    overhead_bytes: int = DEFAULT_OVERHEAD_BYTES,
) -> Proposal | None:
    """Values ``init`` proposes: the highest utilization that keeps every node (name → (MemTotal,
    MemAvailable) bytes) above the floor, at most MAX_PROPOSED_UTILIZATION, then the largest context that
    fits at it. ``None`` when the weights do not fit at all."""
    if not nodes:
        return None
    util = MAX_PROPOSED_UTILIZATION
    for total, avail in nodes.values():
        util = min(util, (avail - floor_bytes - object_store_bytes) / total)
    util = math.floor(util * 100) / 100
    if util <= 0:
        return None
    settings = EngineSettings(tensor_parallel=tp, pipeline_parallel=pp, gpu_memory_utilization=util,
                              kv_cache_dtype=kv_cache_dtype, object_store_bytes=object_store_bytes)
    fits = [size_node(n, shape, weights_total_bytes, t, a, settings, floor_bytes=floor_bytes,
                      overhead_bytes=overhead_bytes) for n, (t, a) in nodes.items()]
    length = min(s.max_model_len_fit for s in fits)
    if length <= 0:
        return None
    tightest = min(fits, key=lambda s: s.os_margin_bytes)
    return Proposal(util, length, f"keeps {_gib(tightest.os_margin_bytes)} on {tightest.node} "
                    f"(floor {_gib(floor_bytes)}); {length:,} tokens of context fit")


__all__ = [
    "GIB", "EngineSettings", "LinearAttention", "ModelShape", "NodeSizing", "Proposal", "SizingError",
    "flag_value", "propose", "shape_from_config", "size_node",
]
