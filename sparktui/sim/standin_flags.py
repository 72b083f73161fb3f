"""The `vllm serve` flags the stand-in accepts (and lists in ``--help``) beyond the ones it acts on.

vLLM's own argument parser rejects unknown flags, and sparktui's preflight checks the configured
flags against ``vllm serve --help``; so the stand-in declares the common ones, with the value shape vLLM
gives them, and ignores them. Flags it does not know are tolerated too (a newer vLLM may have them).
"""

from __future__ import annotations

import argparse

# Flags taking one value (ignored by the stand-in).
VALUE_FLAGS: tuple[str, ...] = (
    "--uvicorn-log-level",
    "--api-key",
    "--lora-modules",
    "--chat-template",
    "--chat-template-content-format",
    "--response-role",
    "--ssl-keyfile",
    "--ssl-certfile",
    "--ssl-ca-certs",
    "--ssl-cert-reqs",
    "--root-path",
    "--middleware",
    "--tool-call-parser",
    "--tool-parser-plugin",
    "--task",
    "--tokenizer",
    "--hf-config-path",
    "--revision",
    "--code-revision",
    "--tokenizer-revision",
    "--tokenizer-mode",
    "--download-dir",
    "--load-format",
    "--config-format",
    "--dtype",
    "--kv-cache-dtype",
    "--guided-decoding-backend",
    "--logits-processor-pattern",
    "--model-impl",
    "--data-parallel-size",
    "--data-parallel-size-local",
    "--data-parallel-address",
    "--data-parallel-rpc-port",
    "--data-parallel-start-rank",
    "--max-parallel-loading-workers",
    "--block-size",
    "--swap-space",
    "--cpu-offload-gb",
    "--num-gpu-blocks-override",
    "--max-num-batched-tokens",
    "--max-num-partial-prefills",
    "--max-long-partial-prefills",
    "--long-prefill-token-threshold",
    "--max-num-seqs",
    "--max-logprobs",
    "--rope-scaling",
    "--rope-theta",
    "--hf-overrides",
    "--quantization",
    "--max-seq-len-to-capture",
    "--limit-mm-per-prompt",
    "--mm-processor-kwargs",
    "--max-lora-rank",
    "--lora-extra-vocab-size",
    "--lora-dtype",
    "--max-cpu-loras",
    "--max-loras",
    "--device",
    "--speculative-config",
    "--ignore-patterns",
    "--preemption-mode",
    "--otlp-traces-endpoint",
    "--collect-detailed-traces",
    "--scheduler-delay-factor",
    "--override-pooler-config",
    "--compilation-config",
    "--kv-transfer-config",
    "--worker-cls",
    "--worker-extension-cls",
    "--generation-config",
    "--override-generation-config",
    "--reasoning-parser",
    "--additional-config",
    "--seed",
    "--max-log-len",
    "--scheduling-policy",
    "--scheduler-cls",
    "--api-server-count",
    "--safetensors-load-strategy",
    "--structured-outputs-config",
    "--allowed-local-media-path",
    "--log-config-file",
)
# Boolean switches (ignored by the stand-in).
SWITCHES: tuple[str, ...] = (
    "--trust-remote-code",
    "--enforce-eager",
    "--enable-prefix-caching",
    "--no-enable-prefix-caching",
    "--disable-sliding-window",
    "--disable-custom-all-reduce",
    "--enable-lora",
    "--enable-lora-bias",
    "--fully-sharded-loras",
    "--enable-chunked-prefill",
    "--no-enable-chunked-prefill",
    "--disable-log-stats",
    "--disable-async-output-proc",
    "--enable-sleep-mode",
    "--calculate-kv-scales",
    "--enable-reasoning",
    "--disable-cascade-attn",
    "--disable-log-requests",
    "--enable-log-requests",
    "--disable-frontend-multiprocessing",
    "--enable-request-id-headers",
    "--enable-auto-tool-choice",
    "--enable-prompt-tokens-details",
    "--enable-server-load-tracking",
    "--disable-uvicorn-access-log",
    "--allow-credentials",
    "--return-tokens-as-token-ids",
    "--disable-fastapi-docs",
    "--disable-mm-preprocessor-cache",
    "--enable-expert-parallel",
    "--ray-workers-use-nsight",
    "--skip-tokenizer-init",
    "--use-tqdm-on-load",
    "--no-use-tqdm-on-load",
    "--enable-force-include-usage",
    "--async-scheduling",
    "--enable-log-outputs",
)
# Flags that take a list of values.
LIST_FLAGS: tuple[str, ...] = ("--allowed-origins", "--allowed-methods", "--allowed-headers")


def add_ignored_vllm_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("vLLM options accepted and ignored by the stand-in")
    for flag in VALUE_FLAGS:
        extra = ("-O",) if flag == "--compilation-config" else ()
        group.add_argument(
            flag, *extra, metavar=flag.removeprefix("--").upper().replace("-", "_"), default=None
        )
    for flag in SWITCHES:
        group.add_argument(flag, action="store_true")
    for flag in LIST_FLAGS:
        group.add_argument(flag, nargs="*", default=None)
