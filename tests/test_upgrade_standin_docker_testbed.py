"""`sparktui upgrade`'s checks before any downtime, on a real dockerd: a tiny image ``FROM`` the CI image
with ``ENV`` lines stages a newer vLLM that lacks a flag the recipe uses; its version and help are asked the
way the upgrade asks them (a throw-away container of the candidate image, no network) and judged by the
upgrade's own modules. The CI image itself (the stand-in as vLLM 0.8.3) passes the same check."""

from __future__ import annotations

from typing import Any

import pytest

from sparktui.config import SparkConfig, parse_config
from sparktui.domain.upgrade.flag_check import check_recipe
from sparktui.domain.upgrade.serve_help import ServeHelp, image_help_argvs, image_version_argv, read_help
from tests.testbed import Testbed, docker_image

pytestmark = [pytest.mark.testbed]

HEAD = "spark1"


def config(**engine: Any) -> SparkConfig:
    nodes = [{"name": HEAD, "host": "a", "role": "head"}, {"name": "spark2", "host": "b"}]
    return parse_config({"nodes": nodes, "engine": {"runtime": "docker", "model": "/tmp/models/m",
                                                    "image": docker_image.IMAGE, **engine}})


def ask(bed: Testbed, cfg: SparkConfig, image: str) -> tuple[str, ServeHelp]:
    """The candidate's ``vllm --version`` and its help, as the upgrade runs them on the head."""
    version = bed.exec(HEAD, image_version_argv(cfg, image), timeout=120)
    assert version.returncode == 0, version.stderr
    answers = []
    for argv in image_help_argvs(cfg, image):
        res = bed.exec(HEAD, argv, timeout=120)
        answers.append((res.returncode == 0, res.stdout))
    return version.stdout.strip(), read_help(answers, version.stdout)


def test_an_image_whose_vllm_lacks_a_recipe_flag_is_refused_before_downtime(docker_testbed: Testbed) -> None:
    bed = docker_testbed
    cfg = config(extra_args=["--enforce-eager", "--max-model-len", "4096"])

    version, current = ask(bed, cfg, docker_image.IMAGE)
    assert version == "0.8.3" and not current.summary      # vLLM < 0.10: --help=all refused, --help is full
    assert check_recipe(cfg, current).ok

    tag = "sparktui-ci:vllm-0.22-no-eager"
    image_id = docker_image.derived_image(bed, HEAD, tag, {"SPARKTUI_STANDIN_VERSION": "0.22.0",
                                                           "SPARKTUI_STANDIN_LACKS": "--enforce-eager"})
    try:
        assert image_id.startswith("sha256:")
        version, candidate = ask(bed, cfg, tag)
        assert version == "0.22.0" and candidate.version == "0.22.0"
        report = check_recipe(cfg, candidate)
        assert not report.ok
        assert report.lines() == ["--enforce-eager: not accepted by vLLM 0.22.0"]
        # Started anyway, its vLLM refuses the flag as vLLM does (what a start on this image would log).
        run = bed.exec(HEAD, ["docker", "run", "--rm", "--network", "none", "--entrypoint", "vllm", tag,
                              "serve", "/tmp/models/m", "--enforce-eager"], timeout=120)
        assert run.returncode == 2
        last = run.stderr.strip().splitlines()[-1]
        assert last == "vllm serve: error: unrecognized arguments: --enforce-eager"
    finally:
        bed.docker(HEAD, "image", "rm", "-f", tag, check=False)
