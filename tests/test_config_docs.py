"""Every config key the schema accepts is documented: in the README's config reference and in the
shipped example config.toml (commented out where it has no sensible example value)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from sparktui.config import (
    ClusterConfig,
    EngineConfig,
    Mount,
    NodeConfig,
    NotifyConfig,
    ServingConfig,
    UIConfig,
)

ROOT = Path(__file__).resolve().parents[1]
MODELS: list[type[BaseModel]] = [ClusterConfig, NodeConfig, EngineConfig, Mount, ServingConfig, UIConfig,
                                 NotifyConfig]
KEYS = sorted({(m.__name__, key) for m in MODELS for key in m.model_fields})


@pytest.mark.parametrize(("model", "key"), KEYS)
def test_key_in_readme(model: str, key: str) -> None:
    text = (ROOT / "README.md").read_text()
    assert f"`{key}`" in text or f"`[[engine.{key}]]`" in text or f"`[ui.{key}]`" in text, \
        f"{model}.{key} is not in the README reference"


@pytest.mark.parametrize(("model", "key"), KEYS)
def test_key_in_example_config(model: str, key: str) -> None:
    text = (ROOT / "config.toml").read_text()
    assert f"{key} =" in text or f"# {key} =" in text or f"[engine.{key}]" in text \
        or f"[[engine.{key}]]" in text or f"[ui.{key}]" in text, f"{model}.{key} is not in config.toml"
