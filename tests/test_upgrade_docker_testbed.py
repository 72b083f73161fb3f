"""`sparktui upgrade IMAGE` on real Docker Engines (two test hosts, the CI image with the stand-in engine).

Each new image is made on the head only (``FROM`` the CI image, a few ``ENV``/``LABEL`` lines), so the
upgrade must distribute it: a broken image (its vLLM fails at start) is tried and rolled back by itself,
the previous image serving again on both nodes; an image whose vLLM lacks a flag this engine uses is refused
before any downtime; a slower image is rolled back with both figures; a good image is promoted on both
nodes, and the next plain ``start`` uses it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import run_sparktui
from tests.test_docker_testbed import PREFIX, assert_clean, docker_overrides
from tests.testbed import Testbed, docker_image
from tests.testbed.docker_image import derived_image

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

#: The engine's state dir on every host for these tests only: the image kept there by a promotion must
#: not leak into the other docker tests' starts.
STATE = "/tmp/upgrade-state"


def image_id(bed: Testbed, node: str, image: str) -> str:
    return bed.docker(node, "image", "inspect", "--format", "{{.Id}}", image).stdout.strip()


def running_images(bed: Testbed) -> dict[str, set[str]]:
    """Each host's running containers of ours, by image ID."""
    out: dict[str, set[str]] = {}
    for name in bed.names:
        ids = bed.docker(name, "ps", "-q", "--filter", f"name={PREFIX}-").stdout.split()
        out[name] = {bed.docker(name, "inspect", "--format", "{{.Image}}", cid).stdout.strip() for cid in ids}
    return out


def upgrade(config: Path, image: str) -> tuple[int, dict[str, Any]]:
    return upgrade_verb(config, "upgrade", image)


def upgrade_verb(config: Path, *args: str) -> tuple[int, dict[str, Any]]:
    res = run_sparktui("--config", str(config), *args, "--yes", "--json", timeout=900)
    try:
        return res.returncode, json.loads(res.stdout)
    except ValueError:
        raise AssertionError(f"exit {res.returncode}: {res.stdout}\n{res.stderr}") from None


def serves(config: Path) -> bool:
    res = run_sparktui("--config", str(config), "status", "--json", "--timeout", "15", timeout=120)
    return json.loads(res.stdout)["engine"]["state"] == "ready"


@pytest.fixture
def upgrade_bed(docker_testbed: Testbed, tmp_path: Path) -> Any:
    bed = docker_testbed
    bed.make_model_dirs()
    # The short benchmark's figures move a little on a busy machine: the good image must pass at 80 %, the
    # half-speed one must not.
    config = bed.write_config(tmp_path / "config.toml", **docker_overrides(bed, state_dir=STATE),
                              upgrade={"min_speed_ratio": 0.8})
    out = run_sparktui("--config", str(config), "start", "--wait", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    yield bed, config
    run_sparktui("--config", str(config), "stop", timeout=300)
    for name in bed.names:
        bed.exec(name, ["rm", "-rf", STATE])
    assert_clean(bed)


def container_ids(bed: Testbed) -> dict[str, str]:
    return {n: bed.docker(n, "ps", "-q", "--no-trunc", "--filter", f"name={PREFIX}-").stdout.strip()
            for n in bed.names}


def stages_of(report: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {s["stage"]: s for s in report["stages"]}


def test_refused_broken_slower_rolled_back_good_promoted_and_kept(upgrade_bed: tuple[Testbed, Path]) -> None:
    bed, config = upgrade_bed
    base = image_id(bed, "spark1", docker_image.IMAGE)

    # A vLLM that lacks a flag this engine is started with: refused before any downtime.
    derived_image(bed, "spark1", "sparktui-ci:noflag", {"SPARKTUI_STANDIN_VERSION": "0.22.0",
                                                        "SPARKTUI_STANDIN_LACKS": "--max-model-len"})
    before = container_ids(bed)
    code, report = upgrade(config, "sparktui-ci:noflag")
    assert code == 8 and report["outcome"] == "refused", report
    assert "--max-model-len" in report["reason"] and "0.22.0" in report["reason"], report["reason"]
    assert "switch" not in stages_of(report)
    assert container_ids(bed) == before, "the engine was touched by a refused upgrade"

    # Broken (its vLLM fails at start), on the head only: distributed, tried, rolled back by itself.
    broken = derived_image(bed, "spark1", "sparktui-ci:broken", {"SPARKTUI_STANDIN_FAIL": "nccl"})
    assert bed.docker("spark2", "image", "inspect", "sparktui-ci:broken", check=False).returncode != 0
    code, report = upgrade(config, "sparktui-ci:broken")
    stages = stages_of(report)
    assert code == 7 and report["outcome"] == "rolled_back", report
    assert stages["distribute"]["status"] == "ok" and "copied to spark2" in stages["distribute"]["message"]
    assert image_id(bed, "spark2", "sparktui-ci:broken") == broken
    assert stages["switch"]["status"] == "failed" and stages["roll back"]["status"] == "ok", stages
    assert "did not reach ready" in report["reason"], report["reason"]
    print(f"broken: rolled back, downtime {report['downtime_s']} s: {report['reason'][:200]}")
    assert running_images(bed) == {"spark1": {base}, "spark2": {base}}
    assert serves(config)

    # Slower (the stand-in at half speed): rolled back with both figures.
    derived_image(bed, "spark1", "sparktui-ci:slow", {"SPARKTUI_STANDIN_SPEED": "0.5"})
    code, report = upgrade(config, "sparktui-ci:slow")
    assert code == 7 and report["outcome"] == "rolled_back", report
    figures = report["verdict"]["figures"]
    assert report["verdict"]["failed"] == "speed" and figures, report["verdict"]
    for level in figures:
        print(f"slow: c={level['concurrency']}: {level['baseline_tok_s']:.1f} → "
              f"{level['candidate_tok_s']:.1f} tok/s ({level['ratio']:.0%}); "
              f"downtime {report['downtime_s']} s")
    assert min(level["ratio"] for level in figures) < 0.8
    assert running_images(bed) == {"spark1": {base}, "spark2": {base}}

    # Good: a dry run changes nothing; then promoted on both nodes, and the next plain start uses it.
    good = derived_image(bed, "spark1", "sparktui-ci:good", {"SPARKTUI_STANDIN_VERSION": "0.8.4"})
    dry = run_sparktui("--config", str(config), "upgrade", "sparktui-ci:good", "--dry-run", "--json",
                       timeout=600)
    assert dry.returncode == 0 and json.loads(dry.stdout)["outcome"] == "checked", dry.stdout
    assert running_images(bed) == {"spark1": {base}, "spark2": {base}}
    code, report = upgrade(config, "sparktui-ci:good")
    assert code == 0 and report["outcome"] == "promoted" and report["image_id"] == good, report
    print(f"good: promoted, downtime {report['downtime_s']} s; " + "; ".join(
        f"c={lv['concurrency']}: {lv['ratio']:.0%}" for lv in report["verdict"]["figures"]))
    assert running_images(bed) == {"spark1": {good}, "spark2": {good}}
    status = json.loads(run_sparktui("--config", str(config), "status", "--json", timeout=120).stdout)
    assert status["image"]["source"] == "upgrade" and status["image"]["ref"] == "sparktui-ci:good", status
    assert status["image"]["vllm_version"] == "0.8.4" and status["image"]["image_id"] == good
    assert run_sparktui("--config", str(config), "stop", timeout=300).returncode == 0
    out = run_sparktui("--config", str(config), "start", "--wait", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert running_images(bed) == {"spark1": {good}, "spark2": {good}}

    # The way back: `sparktui rollback` returns to the image before it, the same way.
    code, report = upgrade_verb(config, "rollback")
    assert code == 0 and report["outcome"] == "promoted", report
    assert running_images(bed) == {"spark1": {base}, "spark2": {base}}
