"""Worker GPU missing on the test bed: spark2's stand-in ``nvidia-smi -L`` finds no device (as in a
container started without ``--gpus all``) → preflight fails naming spark2 with the fix."""

from __future__ import annotations

import pytest

from sparktui.domain.events import StepStatus
from tests.test_lifecycle_testbed import harness
from tests.testbed import Testbed

pytestmark = [pytest.mark.testbed]


async def test_preflight_names_the_worker_without_a_gpu(testbed: Testbed) -> None:
    count = testbed.host_tmp("spark2") / "sparktui-standin-gpus"
    count.write_text("0\n")
    try:
        async with harness(testbed) as h:
            view = await h.controller.preflight()
    finally:
        count.unlink(missing_ok=True)
    gpus = {s.node: s for s in view.steps if s.name == "preflight: GPUs"}
    assert gpus["spark1"].status is StepStatus.OK, gpus["spark1"].message
    assert gpus["spark2"].status is StepStatus.FAILED
    assert "0 GPU(s) on the node, 1 needed" in gpus["spark2"].message
    assert not view.ok and "spark2" in view.message and "GPUs" in view.message, view.message
