"""The start explanation's context from the config and what sparktui kept (domain.perf.start_context)."""

from __future__ import annotations

import json
from pathlib import Path

from sparktui.config import load_config
from sparktui.domain.history import RunRecord
from sparktui.domain.perf.disk_read import DiskRead
from sparktui.domain.perf.start_context import compile_cache_kept, load_options, start_context
from sparktui.domain.perf.start_explain import LoadOptions

HELP = Path(__file__).parent / "fixtures" / "vllm_help"


def config(tmp_path: Path, engine: str = ""):  # type: ignore[no-untyped-def]
    path = tmp_path / "config.toml"
    path.write_text(f"""
[cluster]
name = "ctx"
[[nodes]]
name = "spark1"
host = "spark1.local"
ip = "10.0.0.1"
role = "head"
[[nodes]]
name = "spark2"
host = "spark2.local"
ip = "10.0.0.2"
[engine]
model = "org/model"
tensor_parallel_size = 2
state_dir = {json.dumps(str(tmp_path / "state"))}
{engine}
""")
    return load_config(path)


def test_the_default_cache_mounts_keep_the_compile_cache(tmp_path: Path) -> None:
    assert compile_cache_kept(config(tmp_path))
    assert not compile_cache_kept(config(tmp_path, "cache_mounts = []"))
    assert compile_cache_kept(config(tmp_path, 'runtime = "host"\ncache_mounts = []'))


def test_options_only_from_a_full_help() -> None:
    assert load_options(None) is None
    # vLLM >= 0.10's plain --help lists the groups only: it cannot say a flag is missing.
    assert load_options((HELP / "vllm-grouped-summary-help.txt").read_text()) is None
    assert load_options((HELP / "vllm-0.22-serve-help-loadconfig.txt").read_text()) == LoadOptions(
        eager_strategy=True, fast_formats=("instanttensor",))


def test_rates_and_earlier_runs_as_the_explanation_wants_them(tmp_path: Path) -> None:
    reads = {"spark1": DiskRead("spark1", 2.5, bytes=1), "spark2": DiskRead("spark2", 1.5, bytes=1)}
    runs = [RunRecord(1.0, "org/model", "img", "ready"), RunRecord(2.0, "other/model", "img", "ready")]
    ctx = start_context(config(tmp_path), disk_reads=reads, earlier=runs, image="img")
    assert dict(ctx.disk_gib_s) == {"head": 2.5, "10.0.0.2": 1.5}
    assert [r.model for r in ctx.earlier] == ["org/model"]
    assert ctx.cache_mounted is True and ctx.options is None
