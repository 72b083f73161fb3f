"""Worker GPU missing: preflight's GPU count (``nvidia-smi -L``, real output recorded on an H200, and the
test bed's stand-in) and the Ray wait's diagnosis naming the node with the fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sparktui.domain.events import StepStatus
from sparktui.domain.lifecycle.gpus import check_gpus, parse_gpu_list
from sparktui.domain.lifecycle.ray_state import ExpectedNode, RayNode, RayState, evaluate
from tests.fixtures.telemetry import sparks

RECORDED = (sparks.HERE / "h200" / "nvidia-smi-L.txt").read_text()


def test_recorded_nvidia_smi_list_counts_one_gpu() -> None:
    (gpu,) = parse_gpu_list(RECORDED)
    assert gpu.index == 0 and gpu.name == "NVIDIA H200" and gpu.uuid.startswith("GPU-9aa1e10e")
    view = check_gpus("spark1", 0, RECORDED, "", 1.0, docker=True)
    assert view.status is StepStatus.OK and view.message == "1 GPU(s) in the container: NVIDIA H200"


def test_no_device_in_the_container_is_named_with_the_fix() -> None:
    view = check_gpus("spark2", 6, "No devices were found\n", "", 1.0, docker=True)
    assert view.status is StepStatus.FAILED and view.node == "spark2"
    assert "0 GPU(s) in the container, 1 needed" in view.message and "--gpus all" in view.message
    assert "NVIDIA container runtime" in view.message
    missing = check_gpus("spark2", 127, "", "sh: 1: nvidia-smi: not found", 1.0, docker=True)
    assert missing.status is StepStatus.WARNING and "GPU count unknown" in missing.message


def test_the_stand_in_answers_like_nvidia_smi(tmp_path: Path) -> None:
    count = tmp_path / "gpus"
    env = {**os.environ, "SPARKTUI_STANDIN_GPUS_FILE": str(count)}
    argv = [sys.executable, "-m", "sparktui.sim.nvidia_smi_standin", "-L"]
    one = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)
    assert one.returncode == 0 and len(parse_gpu_list(one.stdout)) == 1
    assert one.stdout.startswith("GPU 0: NVIDIA GB10 (UUID: GPU-")
    count.write_text("0\n")
    none = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)
    assert none.returncode == 6 and none.stdout == "No devices were found\n"


def test_ray_wait_names_the_worker_whose_gpu_ray_does_not_see() -> None:
    state = RayState(nodes=(RayNode("10.0.0.1", True, 1.0, is_head=True), RayNode("10.0.0.2", True, 0.0)),
                     gpu_total=1.0)
    expected = (ExpectedNode("spark1", "10.0.0.1", 1.0), ExpectedNode("spark2", "10.0.0.2", 1.0))
    ready = evaluate(state, expected)
    assert not ready.ready and ready.short_gpus == ("spark2",)
    assert "node spark2 (10.0.0.2) has 0 of 1 GPU(s) in Ray" in ready.diagnosis
    assert "--gpus all" in ready.diagnosis and "--num-gpus 1" in ready.diagnosis
    assert "spark1" not in ready.diagnosis


def test_docker_counts_with_the_gpus_the_engine_gets() -> None:
    from sparktui.domain.lifecycle.gpus import gpu_list_docker_argv

    argv = gpu_list_docker_argv("nvcr.io/nvidia/vllm:25.11-py3", ["nvidia-smi", "-L"])
    assert argv[:2] == ["docker", "run"] and "--gpus" in argv and argv[argv.index("--gpus") + 1] == "all"
    assert argv[-4:] == ["--entrypoint", "nvidia-smi", "nvcr.io/nvidia/vllm:25.11-py3", "-L"]
    # Docker without the NVIDIA runtime refuses before nvidia-smi runs: the fix is named.
    err = 'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].'
    view = check_gpus("spark2", 125, "", err, 1.0, docker=True)
    assert view.status is StepStatus.FAILED and "--gpus all" in view.message
