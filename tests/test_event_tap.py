"""``TappedBackend``: the same ``ClusterBackend`` with observers on its stream, each member passed through
by name (no ``__getattr__``), and the demo told from real nodes by the ``SimulatedCluster`` Protocol."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path

from sparktui.config import load_config
from sparktui.domain.events import ClusterBackend, Event, EventSink, Notice, SimulatedCluster
from sparktui.remote.backend import SshBackend
from sparktui.remote.event_tap import TappedBackend
from sparktui.sim.demo import DemoBackend

CONFIG = Path(__file__).resolve().parents[1] / "config.toml"


class Recording:
    """A backend that notes each call it gets."""

    node_names: Sequence[str] = ("a", "b")
    readonly = True
    detached = False
    log_source = "vllm"

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def run(self, sink: EventSink) -> None:
        self.calls.append("run")
        sink(Notice("hello"))

    async def start(self) -> None:
        self.calls.append("start")

    async def stop(self) -> None:
        self.calls.append("stop")

    async def restart(self) -> None:
        self.calls.append("restart")

    async def smoke_test(self) -> str:
        self.calls.append("smoke_test")
        return "12 tok/s"

    def select_log(self, source: str) -> None:
        self.calls.append(f"select_log {source}")
        self.log_source = source


def protocol_members() -> set[str]:
    return {name for name in vars(ClusterBackend) if not name.startswith("_")}


def test_the_tap_defines_every_member_of_the_protocol_and_forwards_nothing_else() -> None:
    assert protocol_members() == {"node_names", "readonly", "detached", "run", "start", "stop", "restart",
                                  "smoke_test", "select_log", "log_source"}
    assert protocol_members() <= set(vars(TappedBackend))
    assert "__getattr__" not in vars(TappedBackend)


async def test_each_member_reaches_the_backend_and_observers_see_the_stream() -> None:
    inner = Recording()
    seen: list[Event] = []
    shown: list[Event] = []
    tapped: ClusterBackend = TappedBackend(inner, seen.append)
    assert (tapped.node_names, tapped.readonly, tapped.detached) == (("a", "b"), True, False)
    await tapped.run(shown.append)
    await tapped.start()
    await tapped.stop()
    await tapped.restart()
    assert await tapped.smoke_test() == "12 tok/s"
    tapped.select_log("ray:b")
    assert tapped.log_source == "ray:b"
    assert inner.calls == ["run", "start", "stop", "restart", "smoke_test", "select_log ray:b"]
    assert shown == seen == [Notice("hello")]
    for name in ("run", "start", "stop", "restart", "smoke_test"):
        assert inspect.iscoroutinefunction(getattr(TappedBackend, name)), name


def test_the_demo_is_a_simulated_cluster_and_real_nodes_are_not() -> None:
    demo = DemoBackend(frozen_at=0)
    real = SshBackend(load_config(CONFIG))
    assert isinstance(demo, SimulatedCluster) and not demo.detached
    assert not isinstance(real, SimulatedCluster) and real.detached
    # Wrapped, the demo is no longer asked as one: the dashboard hands its clock and history to the app.
    assert not isinstance(TappedBackend(demo), SimulatedCluster)
