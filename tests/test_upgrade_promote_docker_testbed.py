"""`sparktui upgrade IMAGE` on real Docker Engines: a slower image (the stand-in at half speed) is rolled
back with both figures; a good one is promoted on both nodes, `status` names it and the upgrade's stages
and outcome as the head keeps them, and the next plain `start` uses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparktui.domain.upgrade.progress import STAGES
from tests.cli_helpers import run_sparktui
from tests.testbed import Testbed, docker_image
from tests.testbed.docker_image import derived_image
from tests.upgrade_helpers import image_id, running_images, upgrade, upgrade_bed

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

__all__ = ["upgrade_bed"]   # the fixture


def test_a_slower_image_is_rolled_back_with_its_figures_and_a_good_one_promoted_and_kept(
        upgrade_bed: tuple[Testbed, Path]) -> None:
    bed, config = upgrade_bed
    base = image_id(bed, "spark1", docker_image.IMAGE)

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

    # Good: promoted on both nodes, and the next plain start uses it.
    good = derived_image(bed, "spark1", "sparktui-ci:good", {"SPARKTUI_STANDIN_VERSION": "0.8.4"})
    code, report = upgrade(config, "sparktui-ci:good")
    assert code == 0 and report["outcome"] == "promoted" and report["image_id"] == good, report
    print(f"good: promoted, downtime {report['downtime_s']} s; " + "; ".join(
        f"c={lv['concurrency']}: {lv['ratio']:.0%}" for lv in report["verdict"]["figures"]))
    assert running_images(bed) == {"spark1": {good}, "spark2": {good}}
    status = json.loads(run_sparktui("--config", str(config), "status", "--json", timeout=120).stdout)
    assert status["image"]["source"] == "upgrade" and status["image"]["ref"] == "sparktui-ci:good", status
    assert status["image"]["vllm_version"] == "0.8.4" and status["image"]["image_id"] == good
    # The upgrade kept its progress on the head (what the dashboard shows): its stages and outcome.
    kept = status["upgrade"]
    assert (kept["phase"], kept["outcome"], kept["image"], kept["image_id"]) == (
        "ended", "promoted", "sparktui-ci:good", good), kept
    assert kept["downtime_s"] == report["downtime_s"] and kept["pid"] > 0, kept
    ran = {s["stage"]: s["status"] for s in kept["stages"]}
    assert list(ran) == list(STAGES) and ran["roll back"] == "skipped", ran
    assert all(ran[s] == "ok" for s in ("image", "check", "distribute", "switch", "verify", "promote")), ran
    assert kept["text"].startswith(f"upgrade to sparktui-ci:good: promoted, downtime {kept['downtime_s']} s")
    assert run_sparktui("--config", str(config), "stop", timeout=300).returncode == 0
    out = run_sparktui("--config", str(config), "start", "--wait", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert running_images(bed) == {"spark1": {good}, "spark2": {good}}
