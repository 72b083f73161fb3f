"""Preflight's per-image cache of `vllm --version` / `serve --help`: kept per image ID, a bad entry is
ignored and replaced, a value that is not an image ID never becomes a path, XDG_CACHE_HOME is honoured."""

from __future__ import annotations

from pathlib import Path

from sparktui.domain.lifecycle.vllm_facts_cache import VllmFactsCache, cache_dir

IMAGE = "sha256:" + "ab12" * 16


def test_kept_per_image_id_and_field(tmp_path: Path) -> None:
    cache = VllmFactsCache(tmp_path / "c")
    assert cache.get(IMAGE, "version vllm") is None
    cache.put(IMAGE, "version vllm", "0.17.1")
    cache.put(IMAGE, "help vllm", "--max-model-len …")
    again = VllmFactsCache(tmp_path / "c")   # another process, the same machine
    assert again.get(IMAGE, "version vllm") == "0.17.1"
    assert again.get(IMAGE, "help vllm") == "--max-model-len …"
    assert again.get("sha256:" + "cd34" * 16, "version vllm") is None   # another image: asked afresh
    assert again.get(IMAGE, "version /opt/other/vllm") is None


def test_bad_entries_and_non_ids_cost_only_time(tmp_path: Path) -> None:
    cache = VllmFactsCache(tmp_path)
    (tmp_path / (IMAGE.removeprefix("sha256:") + ".json")).write_text("{not json")
    assert cache.get(IMAGE, "version vllm") is None
    cache.put(IMAGE, "version vllm", "0.9.0")
    assert cache.get(IMAGE, "version vllm") == "0.9.0"
    for bad in ("../../etc/passwd", "", None, "nvcr.io/nvidia/vllm:25.11-py3"):
        cache.put(bad, "version vllm", "x")
        assert cache.get(bad, "version vllm") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == [IMAGE.removeprefix("sha256:") + ".json"]
    (tmp_path / "file").touch()
    VllmFactsCache(tmp_path / "file" / "below").put(IMAGE, "v", "x")   # cannot be written: no error


def test_xdg_cache_home() -> None:
    assert cache_dir({"XDG_CACHE_HOME": "/x/cache", "HOME": "/h"}) == Path("/x/cache/sparktui/vllm-facts")
    assert cache_dir({"XDG_CACHE_HOME": "rel", "HOME": "/h"}) == Path("/h/.cache/sparktui/vllm-facts")
