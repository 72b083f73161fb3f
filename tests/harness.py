"""One engine controller over a test bed's real SSH transports, for the lifecycle tests of both runtimes:
the hosts' model dirs made, the cluster opened, and whatever a test did stopped and closed afterwards."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

from sparktui.config import SparkConfig
from sparktui.domain.events import OperationView, StepStatus
from sparktui.remote.cluster import close_cluster, open_cluster
from sparktui.remote.engine import EngineController
from sparktui.remote.engine_wait import wait_until_ready
from sparktui.remote.transport import Transport
from tests.lifecycle_helpers import make_model_dirs
from tests.testbed import Testbed


class Harness:
    def __init__(self, bed: Testbed, config: SparkConfig, transports: dict[str, Transport]) -> None:
        self.bed = bed
        self.config = config
        self.transports = transports
        self.views: list[OperationView] = []
        self.controller = EngineController(config, transports, on_progress=self.views.append)

    def new_controller(self, on_progress: Callable[[OperationView], None] | None = None) -> EngineController:
        """A controller that knows nothing (a dashboard run again), over the same connections."""
        return EngineController(self.config, self.transports, on_progress=on_progress)


@contextlib.asynccontextmanager
async def open_harness(bed: Testbed, config: SparkConfig) -> AsyncIterator[Harness]:
    make_model_dirs(bed)
    transports = await open_cluster(config)
    h = Harness(bed, config, transports)
    try:
        yield h
    finally:
        # Whatever happened, leave the shared hosts clean for the next test.
        with contextlib.suppress(Exception):
            await h.new_controller().stop()
        await close_cluster(transports)


def explain(view: OperationView) -> str:
    """An operation's message and every step that did not end OK, with its output's last lines."""
    lines = [view.message] + [f"{s.status} {s.node} {s.name}: {s.message} {list(s.output_tail)[-3:]}"
                              for s in view.steps if s.status is not StepStatus.OK]
    return "\n".join(lines)


async def start_ready(h: Harness, controller: EngineController | None = None, *,
                      timeout: float = 120) -> None:
    """Start, and wait until the engine is ready (the test fails with the reason otherwise)."""
    c = controller or h.controller
    view = await c.start()
    assert view.ok, explain(view)
    result = await wait_until_ready(c, timeout=timeout)
    assert result.outcome == "ready", result.detail
