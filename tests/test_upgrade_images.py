"""The image in use after an upgrade (the override on the head) and the record of images tried."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sparktui.config import SparkConfig, parse_config
from sparktui.domain.upgrade import images as I

OLD_ID = "sha256:" + "a" * 64
NEW_ID = "sha256:" + "b" * 64


def config(tmp_path: Path | None = None, **engine: object) -> SparkConfig:
    state = {"state_dir": str(tmp_path)} if tmp_path else {}
    return parse_config({"nodes": [{"name": "spark1", "host": "a", "role": "head", "python": sys.executable},
                                   {"name": "spark2", "host": "b"}],
                         "engine": {"runtime": "docker", "model": "/models/m", "image": "vllm:old", **state,
                                    **engine}})


def promoted(**kw: object) -> I.ImageInUse:
    base: dict[str, object] = {"ref": "vllm:new", "image_id": NEW_ID, "vllm_version": "0.22.0",
                               "configured": "vllm:old", "previous_ref": "vllm:old", "previous_id": OLD_ID,
                               "by": "`sparktui upgrade`", "host": "laptop", "at": 1_780_000_000.0}
    base.update(kw)
    return I.ImageInUse(**base)  # type: ignore[arg-type]


def test_a_start_uses_the_promoted_image_by_id() -> None:
    cfg = config()
    assert I.start_image(cfg, None) == "vllm:old"
    assert I.start_image(cfg, promoted()) == NEW_ID
    # engine.image edited after the upgrade: the person's edit wins
    assert I.start_image(config(image="vllm:mine"), promoted()) == "vllm:mine"
    # the host runtime runs the nodes' own vLLM: no image override
    assert I.start_image(config(runtime="host"), promoted()) == "vllm:old"


def test_override_round_trip_and_bad_text() -> None:
    p = promoted()
    assert I.ImageInUse.parse(p.to_json()) == p
    assert I.ImageInUse.parse("noise line\n" + p.to_json() + "\n") == p
    for junk in ("", "{}", "[]", "not json", '{"ref": "x"}', '{"ref": "x", "image_id": "y", "at": "soon"}'):
        assert I.ImageInUse.parse(junk) is None
    assert p.describe().startswith("vllm:new (bbbbbbbbbbbb, vLLM 0.22.0), promoted by `sparktui upgrade` on "
                                   "laptop at ")
    assert I.kept_images(p) == {NEW_ID, OLD_ID} and I.kept_images(None) == frozenset()
    assert I.short_id(None) == "?"


def test_the_node_script_keeps_it_beside_desired_json(tmp_path: Path) -> None:
    """The real node script, run here as the head runs it (a local node)."""
    cfg = config(tmp_path)
    assert I.image_path(cfg, None) == f"{tmp_path}/image.json"
    read = subprocess.run(I.read_argv(cfg, None), capture_output=True, text=True, check=True)
    assert I.ImageInUse.parse(read.stdout) is None
    wrote = subprocess.run(I.write_argv(cfg, None, promoted()), capture_output=True, text=True, check=True)
    assert wrote.stdout.strip() == "OK"
    read = subprocess.run(I.read_argv(cfg, None), capture_output=True, text=True, check=True)
    assert I.ImageInUse.parse(read.stdout) == promoted()


def record(at: float, event: I.ImageEvent, ref: str, image_id: str | None, **kw: object) -> I.ImageRecord:
    return I.ImageRecord(at=at, event=event, ref=ref, image_id=image_id, vllm_version=kw.pop("v", None),  # type: ignore[arg-type]
                         reason=str(kw.pop("reason", "")), **kw)  # type: ignore[arg-type]


def test_history_round_trip_skips_bad_lines(tmp_path: Path) -> None:
    store = I.ImageHistory(tmp_path / "images.jsonl")
    assert store.load() == []
    figures = ({"concurrency": 4, "baseline_tok_s": 40.0, "candidate_tok_s": 30.0, "ratio": 0.75},)
    r1 = record(2.0, I.ImageEvent.ROLLED_BACK, "vllm:slow", "sha256:" + "c" * 64, v="0.23.0",
                reason="the new image is slower", figures=figures, downtime_s=41.5, previous_ref="vllm:old",
                previous_id=OLD_ID, cluster="lab")
    r0 = record(1.0, I.ImageEvent.PROMOTED, "vllm:new", NEW_ID, v="0.22.0", cluster="lab")
    store.append(r1)
    with store.path.open("a") as f:
        f.write('{"half a line\n{"at": 3, "event": "exploded", "ref": "x"}\n')
    store.append(r0)
    assert store.load() == [r0, r1]
    assert I.ImageRecord.from_json(r1.to_json()).figures == figures


def test_summaries_per_image() -> None:
    records = [
        record(1.0, I.ImageEvent.PROMOTED, "vllm:new", NEW_ID, v="0.22.0", reason="as fast"),
        record(2.0, I.ImageEvent.REFUSED, "vllm:nightly", None, v="0.30.0", reason="--task: not accepted"),
        record(3.0, I.ImageEvent.ROLLED_BACK, "vllm:new", NEW_ID, reason="did not reach ready"),
        record(4.0, I.ImageEvent.PROMOTED, "vllm:new2", "sha256:" + "d" * 64, cluster="other"),
    ]
    summaries = I.image_summaries(records, cluster="")
    assert [(s.ref, s.last_event) for s in summaries] == [("vllm:new", I.ImageEvent.ROLLED_BACK),
                                                          ("vllm:nightly", I.ImageEvent.REFUSED)]
    new = summaries[0]
    assert (new.promoted_at, new.rolled_back_at, new.vllm_version, new.reason) == (1.0, 3.0, "0.22.0",
                                                                                   "did not reach ready")
    assert len(I.image_summaries(records)) == 3


def test_rollback_target() -> None:
    assert I.rollback_target(None, [], "vllm:old") is None
    assert I.rollback_target(promoted(), [], "vllm:old") == ("vllm:old", OLD_ID)
    hand_written = promoted(previous_ref=None, previous_id=None)
    earlier = [record(1.0, I.ImageEvent.PROMOTED, "vllm:mid", "sha256:" + "e" * 64),
               record(2.0, I.ImageEvent.PROMOTED, "vllm:new", NEW_ID)]
    assert I.rollback_target(hand_written, earlier, "vllm:old") == ("vllm:mid", "sha256:" + "e" * 64)
    assert I.rollback_target(hand_written, [], "vllm:old") == ("vllm:old", None)
