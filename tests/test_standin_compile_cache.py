"""The stand-in's torch.compile cache (no Ray needed: the replayed lines and the files on disk).

A recording that compiles (the DGX Spark one, vLLM 0.19.2) replays its compile on a cold start and writes
an entry under ``VLLM_CACHE_ROOT/torch_compile_cache/<hash>/rank_0_0/backbone``; the next start with the
same factors replays vLLM's cache-hit lines instead, which the parser takes as a skipped compile.
"""

from __future__ import annotations

from pathlib import Path

from sparktui.domain.logs import timeline_from_bytes
from sparktui.sim import standin_script as script
from sparktui.sim.recording import DGX_SPARK_RECORDING, load_recording
from sparktui.sim.standin_compile_cache import CACHE_FILE, CompileCache, cache_root, compile_segment

FACTORS = (DGX_SPARK_RECORDING, "/tmp/models/m", 2, 1, 4096)


def _log(cache: CompileCache) -> bytes:
    end = script.find_anchors(cache.lines).end
    return "".join(line.text + "\n" for line in cache.lines[:end]).encode()


def test_cache_root_is_vllms() -> None:
    assert cache_root({"VLLM_CACHE_ROOT": "/data/c"}) == Path("/data/c")
    assert cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/vllm")
    assert cache_root({}) == Path.home() / ".cache" / "vllm"


def test_cold_start_compiles_and_saves_then_warm_start_loads_from_the_cache(tmp_path: Path) -> None:
    lines = load_recording(DGX_SPARK_RECORDING)
    env = {"VLLM_CACHE_ROOT": str(tmp_path)}
    cold = CompileCache.for_start(lines, FACTORS, env)
    assert not cold.warm and cold.directory is not None
    assert cold.directory.relative_to(tmp_path).parts[0] == "torch_compile_cache"
    assert cold.directory.parts[-2:] == ("rank_0_0", "backbone")
    text = _log(cold).decode()
    assert f"Using cache directory: {cold.directory} for vLLM's torch.compile" in text
    assert "Compiling a graph for compile range (1, 2048) takes 18.92 s" in text
    assert "/root/.cache/vllm" not in text  # the recorded root is this run's
    snap = timeline_from_bytes(_log(cold))
    assert snap.stage("compile").status == "done" and not snap.facts.get("compile_cache_hit")

    cold.save()
    assert (cold.directory / CACHE_FILE).is_file()
    assert not list(cold.directory.glob(".*"))  # written through a temporary name, renamed

    warm = CompileCache.for_start(lines, FACTORS, env)
    assert warm.warm and warm.directory == cold.directory
    text = _log(warm).decode()
    hit = "Directly load the compiled graph(s) for compile range (1, 2048) from the cache, took 3.784 s"
    assert hit in text
    assert "Directly load AOT compilation from path " + str(tmp_path) in text
    assert "Compiling a graph" not in text and "Cache the graph" not in text and "saved AOT" not in text
    assert "torch.compile took 3.78 s in total" in text
    assert "took 110.07 s (compilation: 3.78 s)" in text
    snap = timeline_from_bytes(_log(warm))
    assert snap.stage("compile").status == "skipped" and snap.facts["compile_cache_hit"] is True
    # The compile time is skipped: at the cold start's seconds per recorded second, the replay is shorter.
    cold_end, warm_end = script.find_anchors(cold.lines).end, script.find_anchors(warm.lines).end
    assert warm.saved_seconds > 15
    assert cold.pace(60.0, cold_end) == 60.0
    assert warm.pace(60.0, warm_end) < 60.0 * (1 - 15 / script.capped_span(cold.lines, 0, cold_end))
    # Other factors (another max-model-len): another entry, compiled afresh.
    assert not CompileCache.for_start(lines, (*FACTORS[:-1], 8192), env).warm


def test_a_corrupt_entry_compiles_again_and_the_disabled_cache_writes_nothing(tmp_path: Path) -> None:
    lines = load_recording(DGX_SPARK_RECORDING)
    env = {"VLLM_CACHE_ROOT": str(tmp_path)}
    cold = CompileCache.for_start(lines, FACTORS, env)
    assert cold.directory is not None
    cold.directory.mkdir(parents=True)
    (cold.directory / CACHE_FILE).write_text("{('(1, 2048)', 0")  # a start killed mid-write (no rename)
    assert not CompileCache.for_start(lines, FACTORS, env).warm
    off = CompileCache.for_start(lines, FACTORS, {**env, "VLLM_DISABLE_COMPILE_CACHE": "1"})
    off.save()
    assert off.directory is None and off.save_after is None
    assert "vLLM's torch.compile cache is disabled." in _log(off).decode()


def test_recordings_without_a_compile_replay_as_recorded(tmp_path: Path) -> None:
    lines = load_recording()  # vLLM 0.8.3, V0: no torch.compile
    assert compile_segment(lines) is None
    plain = CompileCache.for_start(lines, FACTORS, {"VLLM_CACHE_ROOT": str(tmp_path)})
    assert plain.lines == lines and plain.save_after is None and plain.pace(4.0, len(lines)) == 4.0
    plain.save()
    assert list(tmp_path.iterdir()) == []
