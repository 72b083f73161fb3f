"""The Spark recipes' fast-load flags, kept for a start only where the image's vLLM accepts them (its help
as vLLM printed it: tests/fixtures/vllm_help)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparktui.config import load_config
from sparktui.domain.perf.load_args import gate_load_args, pairs, with_load_args
from sparktui.domain.recipes import all_recipes
from sparktui.domain.upgrade.serve_help import parse_serve_help

HELP = Path(__file__).parent / "fixtures" / "vllm_help"
V022 = (HELP / "vllm-0.22-serve-help-loadconfig.txt").read_text()
EAGER = ["--safetensors-load-strategy", "eager"]


def test_kept_where_the_help_accepts_the_flag_and_lists_the_value() -> None:
    help = parse_serve_help(V022)
    assert gate_load_args(EAGER, [], help).kept == tuple(EAGER)
    gated = gate_load_args(["--load-format", "fastsafetensors"], [], help)
    assert gated.kept == () and gated.dropped == (
        ("--load-format", "this vLLM's --help does not list 'fastsafetensors' for it"),)
    instant = gate_load_args(["--load-format=instanttensor"], [], help)
    assert instant.kept == ("--load-format", "instanttensor")


@pytest.mark.parametrize(("help_file", "why"), [
    ("vllm-0.8-serve-help.txt", "does not accept it"),
    ("vllm-grouped-summary-help.txt", "was not read in full"),
    (None, "was not read in full"),
])
def test_dropped_where_nothing_says_the_image_takes_it(help_file: str | None, why: str) -> None:
    help = parse_serve_help((HELP / help_file).read_text()) if help_file else None
    gated = gate_load_args(EAGER, [], help)
    assert gated.kept == () and why in gated.dropped[0][1]
    assert gated.message().startswith("--safetensors-load-strategy left out: ")


def test_the_users_own_flag_wins() -> None:
    gated = gate_load_args(EAGER, ["--safetensors_load_strategy=lazy"], parse_serve_help(V022))
    assert gated.kept == ()
    assert gated.dropped == (("--safetensors-load-strategy", "engine.extra_args gives it"),)


def test_pairs() -> None:
    assert pairs(["--a", "x", "--b", "--c=y"]) == [("--a", "x"), ("--b", None), ("--c", "y")]


def test_every_shipped_spark_recipe_asks_for_the_eager_load() -> None:
    shipped = {rid: f.recipe for rid, f in all_recipes({"SPARKTUI_RECIPES": "/nonexistent"}).items()}
    assert shipped and all(r.load_args == tuple(EAGER) for r in shipped.values())


def test_a_start_appends_what_the_image_accepts(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"""
[cluster]
name = "fast"
[[nodes]]
name = "spark1"
host = "spark1.local"
role = "head"
[[nodes]]
name = "spark2"
host = "spark2.local"
[engine]
recipe = "qwen3.5-122b-a10b-fp8"
state_dir = {json.dumps(str(tmp_path / "state"))}
""")
    config = load_config(path)
    assert "--safetensors-load-strategy" not in config.engine.extra_args   # not merged: gated per start
    started, gated = with_load_args(config, V022)
    assert gated is not None and gated.message() == "using --safetensors-load-strategy eager"
    assert started.engine.extra_args == (*config.engine.extra_args, *EAGER)
    same, gated = with_load_args(config, None)
    assert same is config and gated is not None and not gated.kept
    # No recipe, no load flags: nothing to say.
    assert with_load_args(config, V022, load_args=()) == (config, None)
