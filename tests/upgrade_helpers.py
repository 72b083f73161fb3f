"""What the upgrade's test-bed tests share: a docker bed with a serving engine (its own state dir), images
made on the head only (``FROM`` the CI image with ``ENV`` lines: ``derived_image``), the upgrade run as a
user runs it, and what runs where, by image ID."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import run_sparktui
from tests.test_docker_testbed import PREFIX, assert_clean, docker_overrides
from tests.testbed import Testbed

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


def status_says_ready(config: Path) -> bool:
    """`sparktui status --json` says ready (`supervise_helpers.serves` asks for a completion)."""
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


