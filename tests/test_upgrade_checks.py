"""The upgrade's architecture check, with the head's answers given: the model's architecture named in the
new vLLM's model registry passes, one missing refuses, and an image whose registry cannot be read is not
judged."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from sparktui.config import SparkConfig, parse_config
from sparktui.remote.transport import CommandResult
from sparktui.remote.upgrade_checks import REGISTRY_PY, architecture

MODEL = {"path": "/models/q", "exists": True, "safetensors": [], "bytes": 0,
         "config": {"architectures": ["Qwen3_5MoeForConditionalGeneration"]}}


def config() -> SparkConfig:
    return parse_config({"nodes": [{"name": "spark1", "host": "a", "role": "head"},
                                   {"name": "spark2", "host": "b"}],
                         "engine": {"runtime": "docker", "model": "/models/q", "image": "vllm:old",
                                    "mounts": [{"source": "/models", "target": "/models"}]}}, "<test>")


@dataclass
class Head:
    """The head's answers: the model's report, and what the image's Python prints for the registry."""

    registry: tuple[int, str]
    config: SparkConfig = field(default_factory=config)
    asked: list[list[str]] = field(default_factory=list)

    async def run(self, node: str, argv: Sequence[str], timeout: float) -> CommandResult:
        self.asked.append(list(argv))
        if REGISTRY_PY in argv:
            code, out = self.registry
            return CommandResult(tuple(argv), code, out, "" if code == 0 else "ModuleNotFoundError", 0.1)
        return CommandResult(tuple(argv), 0, json.dumps(MODEL), "", 0.1)


async def test_an_architecture_in_the_registry_passes_and_one_missing_refuses() -> None:
    known = Head((0, "LlamaForCausalLM\nQwen3_5MoeForConditionalGeneration\n"))
    ok = await architecture(known, known.config, "vllm:new")  # type: ignore[arg-type]
    assert ok.ok and "Qwen3_5MoeForConditionalGeneration is in the new vLLM's model registry" in ok.message
    assert any(argv[:3] == ["docker", "run", "--rm"] and "vllm:new" in argv for argv in known.asked)

    older = Head((0, "LlamaForCausalLM\nQwen2ForCausalLM\n"))
    refused = await architecture(older, older.config, "vllm:old-one")  # type: ignore[arg-type]
    assert not refused.ok and "not in the new vLLM's model registry" in refused.message


async def test_an_image_that_cannot_tell_is_not_judged() -> None:
    silent = Head((1, ""))
    said = await architecture(silent, silent.config, "vllm:new")  # type: ignore[arg-type]
    assert said.ok and "cannot be read here, not judged" in said.message
