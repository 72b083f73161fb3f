"""What the ``SshBackend``'s parts share: the config, the engine session, where events go, the node
transports and the engine controller once connected, and the tasks they start (cancelled when ``run``
ends: the watching stops, never the engine)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from sparktui.config import SparkConfig
from sparktui.domain.engine_session import EngineSession
from sparktui.domain.events import EventSink

if TYPE_CHECKING:
    from sparktui.remote.engine import EngineController
    from sparktui.remote.transport import Transport


class BackendWiring:
    """The one place the parts (node watch, log feed, operations, ready watch) find the cluster."""

    def __init__(self, config: SparkConfig, session: EngineSession, post: EventSink) -> None:
        self.config = config
        self.session = session
        #: Posts one event to the dashboard (nothing before ``run`` gives the sink).
        self.post = post
        #: One per node, set when ``run`` opens the cluster.
        self.transports: dict[str, Transport] = {}
        #: The engine's operations and queries, once the transports exist.
        self.controller: EngineController | None = None
        self.tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """A task that lives as long as it runs, or until ``run`` ends."""
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def cancel_tasks(self) -> None:
        for task in list(self.tasks):
            task.cancel()

    def head_transport(self) -> Transport:
        return self.transports[self.config.head.name]

    def served_model(self) -> str:
        return self.config.engine.served_model_name or self.config.engine.model
