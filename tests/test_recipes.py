"""Recipes: the shipped ones load, the merge rules (explicit config keys win), errors name file, key and
fault."""

from __future__ import annotations

import json

import pytest

from sparktui.config import ConfigError, load_config, parse_config
from sparktui.domain.recipes import (
    RecipeError,
    all_recipes,
    find_recipe,
    merge_flags,
)
from tests.cli_helpers import run_sparktui

NODES = [{"name": "spark1", "host": "spark1", "role": "head"}, {"name": "spark2", "host": "spark2"}]


@pytest.fixture
def user_recipes(tmp_path, monkeypatch):
    d = tmp_path / "recipes"
    d.mkdir()
    monkeypatch.setenv("SPARKTUI_RECIPES", str(d))
    return d


def cfg(**engine):
    return parse_config({"nodes": NODES, "engine": engine}, "config.toml")


def test_shipped_recipes_load_with_qwen35_first(user_recipes):
    found = all_recipes()
    assert {"qwen3.5-122b-a10b-fp8", "llama-3.3-70b-instruct", "minimax-m2.7-nvfp4"} <= set(found)
    q = found["qwen3.5-122b-a10b-fp8"]
    assert q.shipped and q.recipe.model == "Qwen/Qwen3.5-122B-A10B-FP8"
    assert q.recipe.flags()[:4] == ["--max-model-len", "262144", "--gpu-memory-utilization", "0.8"]
    assert q.recipe.min_vllm == "0.17.0" and q.recipe.sources


def test_recipe_fills_what_the_config_leaves_out(user_recipes):
    c = cfg(recipe="qwen3.5-122b-a10b-fp8", tensor_parallel_size=2)
    assert c.engine.model == "Qwen/Qwen3.5-122B-A10B-FP8"   # from the recipe: the config has none
    assert c.engine.recipe == "qwen3.5-122b-a10b-fp8"
    assert list(c.engine.extra_args) == [
        "--max-model-len", "262144", "--gpu-memory-utilization", "0.8", "--max-num-batched-tokens", "8192",
        "--enable-prefix-caching", "--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder",
        "--reasoning-parser", "qwen3", "--trust-remote-code"]


def test_explicit_keys_win_over_the_recipe(user_recipes):
    (user_recipes / "mine.toml").write_text(
        'name = "mine"\nmodel = "org/model"\ntensor_parallel_size = 4\npipeline_parallel_size = 2\n'
        'max_model_len = 65536\ngpu_memory_utilization = 0.9\nkv_cache_dtype = "fp8"\n'
        'extra_args = ["--enable-prefix-caching", "--max-num-seqs", "8", "--swap-space=4"]\n'
        '[env]\nA = "recipe"\nB = "recipe"\n')
    c = cfg(recipe="mine", model="/models/x", tensor_parallel_size=1,
            extra_args=["--gpu_memory_utilization=0.7", "--max-num-seqs", "2", "--swap-space", "8"],
            env={"B": "config", "C": "config"})
    e = c.engine
    # engine keys: the config's model and TP; PP only in the recipe
    assert (e.model, e.tensor_parallel_size, e.pipeline_parallel_size) == ("/models/x", 1, 2)
    # flags: the recipe's, less every flag the config gives (any spelling), then the config's own flags last
    assert list(e.extra_args) == ["--max-model-len", "65536", "--kv-cache-dtype", "fp8",
                                  "--enable-prefix-caching",
                                  "--gpu_memory_utilization=0.7", "--max-num-seqs", "2", "--swap-space", "8"]
    # env: the recipe's, then the config's
    assert e.env == {"A": "recipe", "B": "config", "C": "config"}


def test_user_recipe_replaces_a_shipped_one(user_recipes):
    (user_recipes / "llama-3.3-70b-instruct.toml").write_text('name = "my llama"\nmax_model_len = 8192\n')
    found = find_recipe("llama-3.3-70b-instruct")
    assert found is not None and not found.shipped and found.recipe.name == "my llama"
    assert not all_recipes()["llama-3.3-70b-instruct"].shipped
    c = cfg(recipe="llama-3.3-70b-instruct", model="/m")
    assert list(c.engine.extra_args) == ["--max-model-len", "8192"]


def test_merge_flags_keeps_flag_values_together():
    assert merge_flags(["--a", "1", "--b", "--c=3", "--d", "4"], ["--d", "9", "--a=0"]) == \
        ["--b", "--c=3", "--d", "9", "--a=0"]
    assert merge_flags(["--x", "1"], []) == ["--x", "1"]


def test_unknown_recipe_names_the_key_and_the_known_ids(user_recipes):
    with pytest.raises(ConfigError) as err:
        cfg(recipe="qwen9", model="/m")
    text = str(err.value)
    assert "config.toml: engine.recipe: no recipe 'qwen9' (known: " in text
    assert "qwen3.5-122b-a10b-fp8" in text and str(user_recipes) in text


@pytest.mark.parametrize(("body", "key", "fault"), [
    ('name = "x"\ngpu_memory_utilization = 1.5\n', "gpu_memory_utilization", "must be 1 or less, got 1.5"),
    ('name = "x"\nmax_model_len = "32k"\n', "max_model_len", 'must be a whole number, got "32k"'),
    ('name = "x"\ntensor_paralel_size = 2\n', "tensor_paralel_size", "unknown key"),
    ('model = "x"\n', "name", "required key is missing"),
    ('name = "x"\nextra_args = ["--tensor-parallel-size", "4"]\n', "extra_args",
     "is set by sparktui from the engine table"),
    ('name = "x"\n[env]\n"1BAD" = "v"\n', "env", None),
    ('name = "x\n', "<file>", "TOML syntax error"),
])
def test_bad_recipe_names_file_key_and_fault(user_recipes, body, key, fault):
    path = user_recipes / "bad.toml"
    path.write_text(body)
    if key == "env":
        # the recipe's env passes the recipe schema; the merged engine table's validator names the key
        with pytest.raises(ConfigError, match=r"engine\.env: '1BAD' is not a valid environment variable"):
            cfg(recipe="bad", model="/m")
        return
    with pytest.raises(RecipeError) as err:
        cfg(recipe="bad", model="/m")
    text = str(err.value)
    assert text.startswith(f"{path}: invalid recipe"), text
    assert f"{path}: {key}: " in text and fault in text, text


def test_config_file_with_a_recipe_and_the_recipes_verb(tmp_path, user_recipes):
    path = tmp_path / "config.toml"
    path.write_text('[[nodes]]\nname = "a"\nhost = "a"\nrole = "head"\n[[nodes]]\nname = "b"\nhost = "b"\n'
                    '[engine]\nrecipe = "llama-3.3-70b-instruct"\n'
                    'extra_args = ["--max-model-len", "16384"]\n')
    c = load_config(path)
    assert c.engine.model == "meta-llama/Llama-3.3-70B-Instruct"
    assert list(c.engine.extra_args) == ["--gpu-memory-utilization", "0.8", "--max-model-len", "16384"]

    env = {"SPARKTUI_RECIPES": str(user_recipes)}
    out = run_sparktui("recipes", env=env)
    assert out.returncode == 0, out.stderr
    assert "qwen3.5-122b-a10b-fp8  —  Qwen3.5-122B-A10B-FP8 on two Sparks (shipped)" in out.stdout
    assert "flags    --max-model-len 262144 --gpu-memory-utilization 0.8" in out.stdout
    js = run_sparktui("recipes", "--json", "llama-3.3-70b-instruct", env=env)
    [one] = json.loads(js.stdout)
    assert one["flags"] == ["--max-model-len", "2048", "--gpu-memory-utilization", "0.8"]
    assert one["tensor_parallel_size"] == 2 and one["source"] == "shipped"
    (user_recipes / "broken.toml").write_text("name = 3\n")
    bad = run_sparktui("recipes", env=env)
    assert bad.returncode == 2 and f"{user_recipes / 'broken.toml'}: name: must be text (in quotes), got 3" \
        in bad.stderr
    unknown = run_sparktui("recipes", "nope", env={**env, "SPARKTUI_RECIPES": str(tmp_path / "none")})
    assert unknown.returncode == 2 and "no recipe 'nope'" in unknown.stderr


def test_preflight_checks_the_recipes_minimum_vllm(user_recipes):
    from sparktui.domain.events import StepStatus
    from sparktui.domain.lifecycle.preflight import check_recipe_vllm
    from sparktui.domain.recipes import version_key

    assert version_key("0.17.1rc1.dev25+g1a629ce0d") == (0, 17, 1) > version_key("0.17.0")
    c = cfg(recipe="qwen3.5-122b-a10b-fp8")
    old = check_recipe_vllm(c, "0.14.0")
    assert old is not None and old.status is StepStatus.FAILED
    assert old.message == ("recipe qwen3.5-122b-a10b-fp8 needs vLLM ≥ 0.17.0, the image has 0.14.0: "
                           "use a newer image")
    new = check_recipe_vllm(c, "0.17.1rc1.dev25+g1a629ce0d")
    assert new is not None and new.status is StepStatus.OK
    assert check_recipe_vllm(cfg(recipe="llama-3.3-70b-instruct"), "0.8.3") is None   # no minimum given
    assert check_recipe_vllm(cfg(model="/m"), "0.8.3") is None


def test_dry_run_shows_the_recipes_flags_in_vllm_serve(tmp_path, user_recipes):
    path = tmp_path / "config.toml"
    path.write_text('[[nodes]]\nname = "spark1"\nhost = "spark1"\nrole = "head"\nip = "192.168.100.10"\n'
                    '[[nodes]]\nname = "spark2"\nhost = "spark2"\nip = "192.168.100.11"\n'
                    '[engine]\nrecipe = "qwen3.5-122b-a10b-fp8"\nextra_args = ["--max-model-len", "65536"]\n')
    out = run_sparktui("--config", str(path), "start", "--dry-run",
                       env={"SPARKTUI_RECIPES": str(user_recipes)})
    assert out.returncode == 0, out.stderr
    serve = next(line for line in out.stdout.splitlines() if "vllm serve Qwen" in line)
    assert "vllm serve Qwen/Qwen3.5-122B-A10B-FP8 --tensor-parallel-size 2" in serve
    assert "--gpu-memory-utilization 0.8" in serve and "--reasoning-parser qwen3" in serve
    # the config's --max-model-len wins: the recipe's 262144 is gone
    assert "--max-model-len 65536" in serve and "262144" not in serve
