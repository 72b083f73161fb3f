"""`sparktui upgrade IMAGE` on real Docker Engines (two test hosts, the CI image with the stand-in engine),
where it must not keep the new image: one whose vLLM lacks a flag this engine uses is refused before any
downtime (the engine untouched); a broken one (its vLLM fails at start), made on the head only, is
distributed, tried and rolled back by itself, the previous image serving again on both nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.testbed import Testbed, docker_image
from tests.testbed.docker_image import derived_image
from tests.upgrade_helpers import (
    container_ids,
    image_id,
    running_images,
    stages_of,
    status_says_ready,
    upgrade,
    upgrade_bed,
)

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

__all__ = ["upgrade_bed"]   # the fixture


def test_a_missing_flag_is_refused_and_a_broken_image_rolled_back(upgrade_bed: tuple[Testbed, Path]) -> None:
    bed, config = upgrade_bed
    base = image_id(bed, "spark1", docker_image.IMAGE)

    # A vLLM that lacks a flag this engine is started with: refused before any downtime.
    derived_image(bed, "spark1", "sparktui-ci:noflag", {"SPARKTUI_STANDIN_VERSION": "0.22.0",
                                                        "SPARKTUI_STANDIN_LACKS": "--max-model-len"})
    before = container_ids(bed)
    code, report = upgrade(config, "sparktui-ci:noflag")
    assert code == 8 and report["outcome"] == "refused", report
    assert "--max-model-len" in report["reason"] and "0.22.0" in report["reason"], report["reason"]
    assert "switch" not in stages_of(report) and "distribute" not in stages_of(report)
    assert bed.docker("spark2", "image", "inspect", "sparktui-ci:noflag", check=False).returncode != 0
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
    assert status_says_ready(config)
