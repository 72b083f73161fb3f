"""The start plan on three test hosts (real sshd, real Ray, the stand-in engine): every worker's
`ray start` runs at the same time as the others', and they begin once the head's GCS answers — before
`ray start --head` has returned — each sending its start once the GCS lists the head's node (a worker that
finds none sleeps two seconds), while `vllm serve` waits for the head's start. Asserted from the step
times the controller records (``EngineController.marks``), never against a time bound."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sparktui.domain.lifecycle.gcs_wait import GCS_STEP
from sparktui.remote.cluster import close_cluster, open_cluster
from sparktui.remote.engine import EngineController
from tests.lifecycle_helpers import lifecycle_config, make_model_dirs
from tests.testbed import Testbed

pytestmark = [pytest.mark.testbed, pytest.mark.ray]


async def test_workers_start_in_parallel_once_the_gcs_answers(
        make_testbed: Callable[..., Testbed]) -> None:
    bed = make_testbed(["spark1", "spark2", "spark3"])
    make_model_dirs(bed)
    config = lifecycle_config(bed, tensor_parallel_size=3)
    transports = await open_cluster(config)
    controller = EngineController(config, transports)
    try:
        view = await controller.start(preflight=False)
        assert view.ok, [(s.name, s.node, s.status, s.message) for s in view.steps]
        marks = controller.marks

        def span(step: str, node: str) -> tuple[float, float]:
            return marks[f"begin:{step}:{node}"], marks[f"done:{step}:{node}"]

        w2, w3 = span("ray start (worker)", "spark2"), span("ray start (worker)", "spark3")
        # Overlap: each worker's `ray start` began before the other's had finished.
        assert w2[0] < w3[1] and w3[0] < w2[1], (w2, w3)
        head = span("ray start (head)", "spark1")
        gcs = span(GCS_STEP, "spark1")
        # The workers were sent when the GCS answered, not when `ray start --head` returned, and each waited
        # for the head's node in it (Ray's CLI imported meanwhile) …
        assert gcs[1] <= min(w2[0], w3[0]), (gcs, w2, w3)
        for worker in (s for s in view.steps if s.name == "ray start (worker)"):
            assert any("ray_join: Ray's CLI in" in ln and "head node registered after" in ln
                       for ln in worker.output_tail), worker.output_tail
        # … and `vllm serve` only once it had.
        assert marks["serve_launch"] >= head[1]
    finally:
        await controller.stop()
        await close_cluster(transports)
