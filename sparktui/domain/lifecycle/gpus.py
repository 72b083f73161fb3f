"""Preflight's GPU count: how many GPUs the engine's world (the container, or the host) sees on a node.

``nvidia-smi -L`` prints one line per GPU — ``GPU 0: NVIDIA H200 (UUID: GPU-9aa1e10e-…)`` — and, where the
driver finds none (a container started without ``--gpus all`` / the NVIDIA runtime), "No devices were
found" with exit status 6. A node whose GPU the container cannot see joins Ray with 0 GPUs and vLLM
then fails with "TP size 2 exceeds available GPUs 1"; preflight names it first. Pure code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sparktui.domain.events import StepStatus, StepView

_GPU_LINE = re.compile(r"^GPU (?P<i>\d+): (?P<name>.+?) \(UUID: (?P<uuid>[^)]+)\)\s*$", re.M)
#: ``nvidia-smi`` exits 6 when it finds no device (NVML_ERROR_NOT_FOUND); 127 / 126: not there.
NO_DEVICE_EXIT = 6


@dataclass(frozen=True)
class GpuListing:
    index: int
    name: str
    uuid: str


def gpu_list_docker_argv(image: str, argv: Sequence[str]) -> list[str]:
    """A throw-away container of the image with the GPUs as the engine's containers get them
    (``--gpus all``): without the NVIDIA runtime docker itself refuses, which is the fault to name."""
    return ["docker", "run", "--rm", "--network", "none", "--gpus", "all", "--entrypoint", argv[0], image,
            *argv[1:]]


def parse_gpu_list(text: str) -> list[GpuListing]:
    return [GpuListing(int(m["i"]), m["name"], m["uuid"]) for m in _GPU_LINE.finditer(text)]


def gpu_fix(docker: bool) -> str:
    if docker:
        return ("start its container with `--gpus all` (the NVIDIA container runtime: "
                "nvidia-container-toolkit, `nvidia-ctk runtime configure --runtime=docker`)")
    return "check the driver (`nvidia-smi` on the node) and CUDA_VISIBLE_DEVICES in engine.env"


def check_gpus(node: str, exit_status: int | None, stdout: str, stderr: str, expected: float,
               docker: bool) -> StepView:
    """One view: the GPUs seen against the GPUs this node must give Ray (its TP×PP share)."""
    gpus = parse_gpu_list(stdout)
    where = "in the container" if docker else "on the node"
    need = int(expected) if float(expected).is_integer() else expected
    if gpus and len(gpus) >= expected:
        names = ", ".join(sorted({g.name for g in gpus}))
        return StepView("GPUs", node, StepStatus.OK, message=f"{len(gpus)} GPU(s) {where}: {names}")
    text = (stdout + "\n" + stderr).strip()
    last = text.splitlines()[-1] if text else f"exit {exit_status}"
    if exit_status in (126, 127) or ("not found" in text.lower() and "No devices" not in text):
        return StepView("GPUs", node, StepStatus.WARNING,
                        message=f"GPU count unknown: nvidia-smi is not {where} ({last})")
    return StepView("GPUs", node, StepStatus.FAILED,
                    message=f"{len(gpus)} GPU(s) {where}, {need} needed: Ray will not see this node's GPU — "
                            + gpu_fix(docker),
                    output_tail=tuple(text.splitlines()[-3:]))
