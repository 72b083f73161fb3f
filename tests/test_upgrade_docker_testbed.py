"""`sparktui upgrade IMAGE` on real Docker Engines (two test hosts, the CI image with the stand-in engine).

Each new image is made on the head only (``FROM`` the CI image, a few ``ENV``/``LABEL`` lines), so the
upgrade must distribute it: a broken image (its vLLM fails at start) is tried and rolled back by itself,
the previous image serving again on both nodes; an image whose vLLM lacks a flag this engine uses is refused
before any downtime; a slower image is rolled back with both figures; a good image is promoted on both
nodes, and the next plain ``start`` uses it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import run_sparktui
from tests.test_docker_testbed import PREFIX, assert_clean, docker_overrides
from tests.testbed import Testbed, docker_image

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

#: The engine's state dir on every host for these tests only: the image kept there by a promotion must
#: not leak into the other docker tests' starts.
STATE = "/tmp/upgrade-state"


def variant(bed: Testbed, tag: str, *lines: str) -> str:
    """An image made on the head from the CI image (``lines``: Dockerfile lines); its image ID."""
    ctx = bed.dir / f"variant-{tag.replace(':', '-')}"
    shutil.rmtree(ctx, ignore_errors=True)
    ctx.mkdir(parents=True)
    (ctx / "Dockerfile").write_text("\n".join([f"FROM {docker_image.IMAGE}", *lines, f"LABEL variant={tag}"])
                                    + "\n")
    res = bed.exec("spark1", ["env", "DOCKER_BUILDKIT=0", "docker", "build", "-q", "-t", tag, str(ctx)],
                   timeout=300)
    assert res.returncode == 0, res.stderr
    return image_id(bed, "spark1", tag)


def image_id(bed: Testbed, node: str, image: str) -> str:
    return bed.docker(node, "image", "inspect", "--format", "{{.Id}}", image).stdout.strip()


def running_images(bed: Testbed) -> dict[str, set[str]]:
    """Each host's running containers of ours, by image ID."""
    out: dict[str, set[str]] = {}
    for name in bed.names:
        ids = bed.docker(name, "ps", "-q", "--filter", f"name={PREFIX}-").stdout.split()
        out[name] = {bed.docker(name, "inspect", "--format", "{{.Image}}", cid).stdout.strip() for cid in ids}
    return out


def upgrade(config: Path, image: str, *more: str) -> tuple[int, dict[str, Any]]:
    res = run_sparktui("--config", str(config), "upgrade", image, "--yes", "--json", *more, timeout=900)
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
    config = bed.write_config(tmp_path / "config.toml", **docker_overrides(bed, state_dir=STATE))
    out = run_sparktui("--config", str(config), "start", "--wait", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    yield bed, config
    run_sparktui("--config", str(config), "stop", timeout=300)
    for name in bed.names:
        bed.exec(name, ["rm", "-rf", STATE])
    assert_clean(bed)


def test_broken_is_rolled_back_and_good_is_promoted_and_kept(upgrade_bed: tuple[Testbed, Path]) -> None:
    bed, config = upgrade_bed
    base = image_id(bed, "spark1", docker_image.IMAGE)
    broken = variant(bed, "sparktui-ci:broken", "ENV SPARKTUI_STANDIN_FAIL=nccl")
    assert bed.docker("spark2", "image", "inspect", "sparktui-ci:broken", check=False).returncode != 0

    code, report = upgrade(config, "sparktui-ci:broken")
    print(json.dumps(report, indent=1)[:3000])
    assert code == 7, report
    assert report["outcome"] == "rolled_back", report
    stages = {s["stage"]: s for s in report["stages"]}
    assert stages["distribute"]["status"] == "ok" and "copied to spark2" in stages["distribute"]["message"]
    assert image_id(bed, "spark2", "sparktui-ci:broken") == broken
    assert stages["switch"]["status"] == "failed"
    assert stages["roll back"]["status"] == "ok"
    assert "NCCL" in report["reason"] or "nccl" in report["reason"].lower(), report["reason"]
    assert running_images(bed) == {"spark1": {base}, "spark2": {base}}
    assert serves(config)

    good = variant(bed, "sparktui-ci:good", "ENV SPARKTUI_UPGRADE_TEST=good")
    code, report = upgrade(config, "sparktui-ci:good")
    print(json.dumps(report, indent=1)[:3000])
    assert code == 0, report
    assert report["outcome"] == "promoted" and report["image_id"] == good, report
    print(f"downtime of a promotion: {report['downtime_s']} s")
    assert report["downtime_s"] is not None and report["downtime_s"] > 0
    assert running_images(bed) == {"spark1": {good}, "spark2": {good}}

    # The next plain start (a verified stop first) uses the promoted image; status names it.
    assert run_sparktui("--config", str(config), "stop", timeout=300).returncode == 0
    out = run_sparktui("--config", str(config), "start", "--wait", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert running_images(bed) == {"spark1": {good}, "spark2": {good}}


def test_a_dry_run_changes_nothing(upgrade_bed: tuple[Testbed, Path]) -> None:
    bed, config = upgrade_bed
    before = running_images(bed)
    variant(bed, "sparktui-ci:dry", "ENV SPARKTUI_UPGRADE_TEST=dry")
    res = run_sparktui("--config", str(config), "upgrade", "sparktui-ci:dry", "--dry-run", "--json",
                       timeout=600)
    report = json.loads(res.stdout)
    assert res.returncode == 0 and report["outcome"] == "checked", report
    assert running_images(bed) == before
