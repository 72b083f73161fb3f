"""Recipes: known-good per-model settings, merged under an ``[engine]`` that names one (domain).

A recipe is a small TOML file (``sparktui/assets/recipes/<id>.toml`` shipped, ``~/.config/sparktui/recipes/
<id>.toml`` the user's; a user recipe with a shipped recipe's id replaces it). ``[engine] recipe = "<id>"``
merges it into the engine table before validation, and **whatever the config says explicitly wins**:

* ``tensor_parallel_size``, ``pipeline_parallel_size``, ``model``: the recipe's value only where the
  config's ``[engine]`` does not set the key;
* vLLM flags: the recipe's ``max_model_len``, ``gpu_memory_utilization``, ``kv_cache_dtype``,
  ``quantization`` become ``--max-model-len`` …, then its ``extra_args``; every recipe flag that
  ``engine.extra_args`` also gives (any spelling: ``--x V``, ``--x=V``, ``--x_y``) is dropped, and the
  config's own ``extra_args`` follow, so they are always the last word;
* ``env``: the recipe's variables, then the config's (a variable in both takes the config's value).

``load_args`` (fast-load flags) are not merged: each start reads them from the recipe and keeps those the
image's vLLM accepts (``sparktui.domain.perf.load_args``); a flag ``engine.extra_args`` gives wins.

``weights_gib``, ``min_vllm`` and ``notes`` are information (shown by ``sparktui recipes``).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sparktui.domain.config_faults import ConfigError, ConfigProblem, config_problem

#: Where user recipes live (``$SPARKTUI_RECIPES``, a ``os.pathsep`` list of directories, replaces it).
USER_DIR = Path("~/.config/sparktui/recipes")
RECIPES_ENV = "SPARKTUI_RECIPES"

#: Recipe keys that become a vLLM flag, in the order the flags are written.
FLAG_KEYS: tuple[tuple[str, str], ...] = (
    ("max_model_len", "--max-model-len"),
    ("gpu_memory_utilization", "--gpu-memory-utilization"),
    ("kv_cache_dtype", "--kv-cache-dtype"),
    ("quantization", "--quantization"),
)
#: Engine keys a recipe fills in when the config leaves them out.
ENGINE_KEYS = ("model", "tensor_parallel_size", "pipeline_parallel_size")


class RecipeError(ConfigError):
    """A recipe file that cannot be used; names the file, the key and the fault."""

    def _render(self) -> str:
        lines = [f"{self.path}: invalid recipe"]
        lines += [f"  {self.path}: {p.key_path}: {p.fault}" for p in self.problems]
        return "\n".join(lines)


class Recipe(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    #: Shown in the list (the id is the file name without ``.toml``).
    name: Annotated[str, Field(min_length=1)]
    #: The Hugging Face id (or path) it was written for; fills ``engine.model`` when that is not set.
    model: str | None = None
    description: str = ""
    tensor_parallel_size: Annotated[int, Field(ge=1)] | None = None
    pipeline_parallel_size: Annotated[int, Field(ge=1)] | None = None
    max_model_len: Annotated[int, Field(ge=1)] | None = None
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1, strict=False)] | None = None
    kv_cache_dtype: str | None = None
    quantization: str | None = None
    extra_args: tuple[str, ...] = Field(default=(), strict=False)
    #: Flags for a faster weights load (``--safetensors-load-strategy eager``): each start uses them only
    #: where the image's vLLM accepts them (``sparktui.domain.perf.load_args``), else leaves them out.
    load_args: tuple[str, ...] = Field(default=(), strict=False)
    env: dict[str, str] = Field(default_factory=dict)
    #: The weights' size on disk, GiB (what ``init`` and sizing expect to find).
    weights_gib: Annotated[float, Field(gt=0, strict=False)] | None = None
    #: The oldest vLLM known to serve it (e.g. "0.17.0").
    min_vllm: str | None = None
    notes: str = ""
    #: Where the settings come from (links).
    sources: tuple[str, ...] = Field(default=(), strict=False)

    @field_validator("extra_args")
    @classmethod
    def _no_engine_owned_flags(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for arg in value:
            name = arg.partition("=")[0].replace("_", "-")
            if name in {"--tensor-parallel-size", "-tp", "--pipeline-parallel-size", "-pp",
                        "--distributed-executor-backend", "--port", "--host"}:
                raise ValueError(f"{arg!r} is set by sparktui from the engine table; use the recipe's "
                                 "tensor_parallel_size / pipeline_parallel_size keys instead")
        return value

    def flags(self) -> list[str]:
        """The vLLM flags the recipe implies (before the config's own flags override any)."""
        out: list[str] = []
        for key, flag in FLAG_KEYS:
            value = getattr(self, key)
            if value is not None:
                out += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
        return out + list(self.extra_args)


@dataclass(frozen=True)
class FoundRecipe:
    id: str
    path: Path
    shipped: bool
    recipe: Recipe


def _flag_name(arg: str) -> str | None:
    if not arg.startswith("-"):
        return None
    return arg.partition("=")[0].replace("_", "-")


def _flags_in(args: Sequence[str]) -> set[str]:
    return {n for a in args if (n := _flag_name(a)) is not None}


def merge_flags(recipe_flags: Sequence[str], own: Sequence[str]) -> list[str]:
    """Recipe flags the config's ``own`` flags do not give, then ``own``."""
    given = _flags_in(own)
    out: list[str] = []
    args = list(recipe_flags)
    i = 0
    while i < len(args):
        name = _flag_name(args[i])
        # A flag's value is the next word when the flag has no "=" and the next word is not a flag.
        takes_value = (name is not None and "=" not in args[i] and i + 1 < len(args)
                       and _flag_name(args[i + 1]) is None)
        span = args[i:i + 2] if takes_value else args[i:i + 1]
        if name is None or name not in given:
            out += span
        i += len(span)
    return out + list(own)


def merge_engine(engine: Mapping[str, Any], recipe: Recipe) -> dict[str, Any]:
    """The ``[engine]`` table with ``recipe`` merged under it (the table's explicit keys win)."""
    merged = dict(engine)
    for key in ENGINE_KEYS:
        value = getattr(recipe, key)
        if key not in engine and value is not None:
            merged[key] = value
    own = engine.get("extra_args", [])
    own_list = list(own) if isinstance(own, list | tuple) else own
    if isinstance(own_list, list) and all(isinstance(a, str) for a in own_list):
        merged["extra_args"] = merge_flags(recipe.flags(), own_list)
    env = engine.get("env", {})
    if isinstance(env, Mapping):
        merged["env"] = {**recipe.env, **env}
    return merged


# ---- finding recipes -----------------------------------------------------------------------------
def user_dirs(environ: Mapping[str, str] | None = None) -> list[Path]:
    env = os.environ if environ is None else environ
    if env.get(RECIPES_ENV):
        return [Path(p).expanduser() for p in env[RECIPES_ENV].split(os.pathsep) if p]
    return [USER_DIR.expanduser()]


def load_recipe(path: Path, text: str | None = None) -> Recipe:
    try:
        raw = text if text is not None else path.read_text(encoding="utf-8")
        data = tomllib.loads(raw)
    except OSError as exc:
        raise RecipeError(path, [ConfigProblem("<file>", f"cannot read: {exc.strerror or exc}")]) from None
    except UnicodeDecodeError as exc:
        raise RecipeError(path, [ConfigProblem("<file>", f"not UTF-8 text: {exc}")]) from None
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(path, [ConfigProblem("<file>", f"TOML syntax error: {exc}")]) from None
    try:
        return Recipe.model_validate(data)
    except ValidationError as exc:
        raise RecipeError(path, [config_problem(e) for e in exc.errors()]) \
            from None


def _shipped() -> list[tuple[str, Path, str]]:
    base = resources.files("sparktui") / "assets" / "recipes"
    out = []
    for entry in sorted(base.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            out.append((entry.name[:-5], Path(str(entry)), entry.read_text(encoding="utf-8")))
    return out


def all_recipes(environ: Mapping[str, str] | None = None) -> dict[str, FoundRecipe]:
    """Every recipe by id, shipped first, user recipes replacing shipped ones of the same id.

    A broken recipe file raises ``RecipeError`` naming it (a recipe is never skipped silently).
    """
    found: dict[str, FoundRecipe] = {}
    for rid, path, text in _shipped():
        found[rid] = FoundRecipe(rid, path, True, load_recipe(path, text))
    for d in user_dirs(environ):
        if not d.is_dir():
            continue
        for path in sorted(d.glob("*.toml")):
            found[path.stem] = FoundRecipe(path.stem, path, False, load_recipe(path))
    return found


def find_recipe(rid: str, environ: Mapping[str, str] | None = None) -> FoundRecipe | None:
    """The recipe with id ``rid`` (the user's over the shipped one), loading only that file."""
    for d in reversed(user_dirs(environ)):
        path = d / f"{rid}.toml"
        if path.is_file():
            return FoundRecipe(rid, path, False, load_recipe(path))
    for sid, path, text in _shipped():
        if sid == rid:
            return FoundRecipe(rid, path, True, load_recipe(path, text))
    return None


def apply_recipe(data: Mapping[str, Any], path: Path | str | None,
                 environ: Mapping[str, str] | None = None) -> Mapping[str, Any]:
    """A raw config whose ``[engine]`` names a recipe, with the recipe merged in (else ``data`` as is).

    An unknown recipe id is a ``ConfigError`` at ``engine.recipe`` that lists the known ids.
    """
    engine = data.get("engine")
    if not isinstance(engine, Mapping) or "recipe" not in engine:
        return data
    rid = engine["recipe"]
    if not isinstance(rid, str) or not rid:
        return data  # the schema reports the wrong type
    found = find_recipe(rid, environ)
    if found is None:
        known = ", ".join(sorted(all_recipes(environ))) or "none"
        where = ", ".join(str(d) for d in user_dirs(environ))
        fault = f"no recipe {rid!r} (known: {known}; user recipes in {where})"
        raise ConfigError(path, [ConfigProblem("engine.recipe", fault)])
    return {**data, "engine": merge_engine(engine, found.recipe)}


def version_key(version: str | None) -> tuple[int, ...]:
    """``"0.17.1rc1.dev25+g1a629ce0d"`` → (0, 17, 1): major, minor, patch for ordering."""
    return tuple(int(x) for x in re.findall(r"\d+", version or "")[:3])


__all__ = ["FoundRecipe", "Recipe", "RecipeError", "all_recipes", "apply_recipe", "find_recipe",
           "merge_engine", "merge_flags", "version_key"]
