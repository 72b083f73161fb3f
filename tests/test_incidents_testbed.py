"""`sparktui incidents collect` on the test bed (real sshd, real Ray, the stand-in engine serving on two
hosts): every evidence file is written and non-empty, py-spy's absence is said in its own file, and
`incidents --json` lists the incident; a node that does not answer is recorded and loses nothing of the
other's evidence."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_helpers import run_sparktui
from tests.lifecycle_helpers import lifecycle_overrides, make_model_dirs
from tests.testbed import Testbed

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

#: Every incident holds these; per node: its Ray logs, its stacks (or why none), its kernel lines.
COMMON = {"vllm-spark1.log", "nccl.txt", "ray-nodes.txt", "argv.txt", "config.toml", "timeline.txt"}
PER_NODE = {f"{kind}-{n}.{ext}" for n in ("spark1", "spark2")
            for kind, ext in (("ray", "log"), ("stacks", "txt"), ("kernel", "txt"))}


def test_collect_keeps_every_evidence_file_of_a_serving_engine(
        make_testbed: Callable[..., Testbed], tmp_path: Path) -> None:
    bed = make_testbed()
    make_model_dirs(bed)
    overrides = lifecycle_overrides(bed, pace=3.0, env={"NCCL_DEBUG": "INFO"})
    config = str(bed.write_config(tmp_path / "config.toml", **overrides))
    store = str(tmp_path / "incidents")
    start = run_sparktui("--config", config, "start", "--wait", timeout=300)
    assert start.returncode == 0, start.stdout + start.stderr
    try:
        t0 = time.monotonic()
        out = run_sparktui("--config", config, "incidents", "--dir", store, "collect", "--cause", "manual",
                           "--json", timeout=180)
        took = time.monotonic() - t0
        assert out.returncode == 0, out.stdout + out.stderr
        print(f"incidents collect took {took:.1f} s")
        listed = json.loads(run_sparktui("incidents", "--dir", store, "--json").stdout)["incidents"]
        (incident,) = listed
        assert incident["cause"] == "manual" and incident["missing"] == []
        sizes = {f["name"]: f["size"] for f in incident["files"]}
        assert set(sizes) >= COMMON | PER_NODE, sorted(sizes)
        assert all(size > 0 for size in sizes.values()), sizes
        folder = Path(store) / incident["id"]
        for n in ("spark1", "spark2"):
            stacks = (folder / f"stacks-{n}.txt").read_text()
            assert stacks.startswith(f"py-spy not found on {n}"), stacks[:300]
            assert "processes of ours on" in stacks and "wchan" in stacks, stacks
        assert "NCCL_DEBUG=INFO" in (folder / "nccl.txt").read_text()
        assert "2 of 2 node(s) alive" in (folder / "ray-nodes.txt").read_text()
        argv = (folder / "argv.txt").read_text()
        assert "sparktui.sim.vllm_standin serve" in argv and "as the config plans it" in argv
        assert (folder / "config.toml").read_text() == Path(config).read_text()
        shown = run_sparktui("incidents", "--dir", store, "show", incident["id"], timeout=60)
        assert shown.returncode == 0 and "=== stacks-spark2.txt" in shown.stdout

        # spark2 unreachable: its failure is recorded, spark1's evidence is all there.
        bed.kill_sshd("spark2")
        out = run_sparktui("--config", config, "incidents", "--dir", store, "collect", "--json", timeout=180)
        assert out.returncode == 1, out.stdout + out.stderr
        second = json.loads(out.stdout)
        assert any(m.startswith("spark2:") for m in second["missing"]), second["missing"]
        names = {f["name"] for f in second["files"]}
        assert {"vllm-spark1.log", "ray-spark1.log", "stacks-spark1.txt", "missing.txt"} <= names, names
    finally:
        run_sparktui("--config", config, "stop", timeout=300)


def test_collect_reads_an_engine_in_containers(docker_testbed: Testbed, tmp_path: Path) -> None:
    """``runtime = "docker"``: the logs through the host side of the mounts, the processes from the host's
    /proc, py-spy looked for on the host and then in the node's container (named when missing)."""
    from tests.test_docker_testbed import docker_overrides

    bed = docker_testbed
    make_model_dirs(bed)
    config = str(bed.write_config(tmp_path / "config.toml", **docker_overrides(bed)))
    store = str(tmp_path / "incidents")
    start = run_sparktui("--config", config, "start", "--wait", timeout=300)
    assert start.returncode == 0, start.stdout + start.stderr
    try:
        out = run_sparktui("--config", config, "incidents", "--dir", store, "collect", "--json", timeout=180)
        assert out.returncode == 0, out.stdout + out.stderr
        incident = json.loads(out.stdout)
        sizes = {f["name"]: f["size"] for f in incident["files"]}
        assert set(sizes) >= COMMON | PER_NODE, sorted(sizes)
        assert all(size > 0 for size in sizes.values()), sizes
        folder = Path(store) / incident["id"]
        stacks = (folder / "stacks-spark2.txt").read_text()
        assert stacks.startswith(("py-spy not found on spark2 (not on the host's PATH or in container "
                                  "sparktui-ray-spark2)", "stack dumps by")), stacks[:300]
        assert "processes of ours on spark2 (from /proc): 0" not in stacks, stacks
        assert "==> worker-" in (folder / "ray-spark2.log").read_text()
        assert "vLLM processes running: 1" in (folder / "argv.txt").read_text()
    finally:
        run_sparktui("--config", config, "stop", timeout=300)
