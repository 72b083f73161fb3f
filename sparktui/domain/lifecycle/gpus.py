"""Preflight's GPU count: how many GPUs the engine's world (the container, or the host) sees on a node.

``nvidia-smi -L`` prints one line per GPU — ``GPU 0: NVIDIA H200 (UUID: GPU-9aa1e10e-…)`` — and, where the
driver finds none (a container started without ``--gpus all`` / the NVIDIA runtime), "No devices were
found" with exit status 6. A node whose GPU the container cannot see joins Ray with 0 GPUs and vLLM
then fails with "TP size 2 exceeds available GPUs 1"; preflight names it first. Pure code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sparktui.domain.events import StepStatus, StepView
from sparktui.domain.parallel_fit import parallel_fit_fault

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


def counted_gpus(exit_status: int | None, stdout: str, stderr: str) -> int | None:
    """The GPUs a node's listing shows; None when it could not tell (no nvidia-smi where it ran)."""
    text = stdout + "\n" + stderr
    if exit_status in (126, 127) or ("not found" in text.lower() and "No devices" not in text):
        return None
    return len(parse_gpu_list(stdout))


def check_world(tp: int, pp: int, counted: Mapping[str, int | None]) -> StepView | None:
    """TP × PP against the GPUs counted on every node (one view for the cluster); None while a node's count
    is unknown (its own GPUs check says why)."""
    if not counted or any(n is None for n in counted.values()):
        return None
    known = {node: n for node, n in counted.items() if n is not None}
    fault = parallel_fit_fault(tp, pp, known, counted=True)
    if fault is None:
        return StepView(WORLD_CHECK, None, StepStatus.OK,
                        message=f"{tp} × {pp} workers on {sum(known.values())} GPU(s)")
    return StepView(WORLD_CHECK, None, StepStatus.FAILED, message=fault)


#: The name of preflight's cluster-wide GPU check.
WORLD_CHECK = "GPUs for TP × PP"


def gpu_fix(docker: bool) -> str:
    if docker:
        return ("start its container with `--gpus all` (the NVIDIA container runtime: "
                "nvidia-container-toolkit, `nvidia-ctk runtime configure --runtime=docker`)")
    return "check the driver (`nvidia-smi` on the node) and CUDA_VISIBLE_DEVICES in engine.env"


def check_gpus(node: str, exit_status: int | None, stdout: str, stderr: str, expected: float,
               docker: bool) -> StepView:
    """One view: the GPUs seen against the GPUs this node must give Ray (its ``gpus`` in the config)."""
    gpus = parse_gpu_list(stdout)
    where = "in the container" if docker else "on the node"
    need = int(expected) if float(expected).is_integer() else expected
    if gpus and len(gpus) >= expected:
        names = ", ".join(sorted({g.name for g in gpus}))
        return StepView("GPUs", node, StepStatus.OK, message=f"{len(gpus)} GPU(s) {where}: {names}")
    text = (stdout + "\n" + stderr).strip()
    last = text.splitlines()[-1] if text else f"exit {exit_status}"
    if gpus:   # some seen, fewer than the config's `gpus` for this node says
        return StepView("GPUs", node, StepStatus.FAILED,
                        message=f"{len(gpus)} GPU(s) {where}, but this node's `gpus` says {need}: set gpus = "
                                f"{len(gpus)} on it, or make the others visible: " + gpu_fix(docker))
    if counted_gpus(exit_status, stdout, stderr) is None:
        return StepView("GPUs", node, StepStatus.WARNING,
                        message=f"GPU count unknown: nvidia-smi is not {where} ({last})")
    return StepView("GPUs", node, StepStatus.FAILED,
                    message=f"{len(gpus)} GPU(s) {where}, {need} needed: Ray will not see this node's GPU — "
                            + gpu_fix(docker),
                    output_tail=tuple(text.splitlines()[-3:]))
