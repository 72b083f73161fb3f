"""Every config key the schema accepts is documented: in docs/configuration.md (the config reference) and
in the shipped example config.toml (commented out where it has no sensible example value)."""

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
#: The heading of docs/configuration.md's section that documents each model's keys.
SECTIONS = {"ClusterConfig": "## `[cluster]`", "NodeConfig": "## `[[nodes]]`",
            "EngineConfig": "## `[engine]`", "Mount": "## `[engine]`", "ServingConfig": "## `[serving]`",
            "UIConfig": "## `[ui]`", "NotifyConfig": "## `[notify]`"}


def section(text: str, heading: str) -> str:
    """The text under a level-2 heading, up to the next one."""
    start = text.index(heading + "\n") + len(heading)
    end = text.find("\n## ", start)
    return text[start:] if end < 0 else text[start:end]


@pytest.mark.parametrize(("model", "key"), KEYS)
def test_key_in_config_reference(model: str, key: str) -> None:
    text = section((ROOT / "docs" / "configuration.md").read_text(), SECTIONS[model])
    assert f"`{key}`" in text or f"`[[engine.{key}]]`" in text or f"`[ui.{key}]`" in text, \
        f"{model}.{key} is not in docs/configuration.md under {SECTIONS[model]}"


def test_every_model_has_its_section() -> None:
    assert {m.__name__ for m in MODELS} == set(SECTIONS)


@pytest.mark.parametrize(("model", "key"), KEYS)
def test_key_in_example_config(model: str, key: str) -> None:
    text = (ROOT / "config.toml").read_text()
    assert f"{key} =" in text or f"# {key} =" in text or f"[engine.{key}]" in text \
        or f"[[engine.{key}]]" in text or f"[ui.{key}]" in text, f"{model}.{key} is not in config.toml"
