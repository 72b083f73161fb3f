"""Snapshots of the demo screen (pytest-textual-snapshot), frozen at fixed points of the simulated start so
every run draws the same picture: mid-start (weights loading) at 120×40, serving at 200×50, and the
failure scenarios' end screens (``--demo oom|nccl-socket-fallback|wedge|worker-lost``) at 120×40.

Update after an intended change: ``pytest tests/test_ui_snapshots.py --snapshot-update`` and review the SVGs.
"""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot

from sparktui.sim.demo import DemoBackend
from sparktui.ui.app import SparkApp


def demo_app(frozen_at: float, scenario: str = "start") -> SparkApp:
    backend = DemoBackend(seed=7, frozen_at=frozen_at, scenario=scenario)
    return SparkApp(backend, roles=backend.node_roles, cluster_name="demo: two simulated DGX Sparks")


async def _settled(pilot: Pilot[Any]) -> None:
    app = pilot.app
    assert isinstance(app, SparkApp)
    await pilot.pause()
    app.drain()
    await pilot.pause()
    app.drain()
    await pilot.pause()
    # A failure's diagnosis can overflow the engine column (its scrollbar shows); where the column was
    # scrolled to depends on when its content grew during the run. Show its top, as a person first sees it.
    app.query_one("#engine").scroll_home(animate=False, immediate=True)
    await pilot.pause()


def test_demo_starting_120x40(snap_compare: Any) -> None:
    assert snap_compare(demo_app(30.0), terminal_size=(120, 40), run_before=_settled)


def test_demo_serving_200x50(snap_compare: Any) -> None:
    assert snap_compare(demo_app(75.0), terminal_size=(200, 50), run_before=_settled)


def test_demo_oom_failed_120x40(snap_compare: Any) -> None:
    assert snap_compare(demo_app(70.0, "oom"), terminal_size=(120, 40), run_before=_settled)


def test_demo_nccl_socket_fallback_120x40(snap_compare: Any) -> None:
    assert snap_compare(demo_app(75.0, "nccl-socket-fallback"), terminal_size=(120, 40), run_before=_settled)


def test_demo_wedged_120x40(snap_compare: Any) -> None:
    assert snap_compare(demo_app(95.0, "wedge"), terminal_size=(120, 40), run_before=_settled)


def test_demo_worker_lost_120x40(snap_compare: Any) -> None:
    assert snap_compare(demo_app(90.0, "worker-lost"), terminal_size=(120, 40), run_before=_settled)


# Every terminal size at three moments (issue 15): starting, ready (serving), failed — 80×24 gets the compact
# layout, 120×40 and 200×50 the full one. (120×40 starting and 200×50 serving are the two above.)
MOMENTS = {"starting": (30.0, "start"), "ready": (75.0, "start"), "failed": (70.0, "oom")}


def test_demo_starting_80x24(snap_compare: Any) -> None:
    assert snap_compare(demo_app(*MOMENTS["starting"]), terminal_size=(80, 24), run_before=_settled)


def test_demo_ready_80x24(snap_compare: Any) -> None:
    assert snap_compare(demo_app(*MOMENTS["ready"]), terminal_size=(80, 24), run_before=_settled)


def test_demo_failed_80x24(snap_compare: Any) -> None:
    assert snap_compare(demo_app(*MOMENTS["failed"]), terminal_size=(80, 24), run_before=_settled)


def test_demo_ready_120x40(snap_compare: Any) -> None:
    assert snap_compare(demo_app(*MOMENTS["ready"]), terminal_size=(120, 40), run_before=_settled)


def test_demo_starting_200x50(snap_compare: Any) -> None:
    assert snap_compare(demo_app(*MOMENTS["starting"]), terminal_size=(200, 50), run_before=_settled)


def test_demo_failed_200x50(snap_compare: Any) -> None:
    assert snap_compare(demo_app(*MOMENTS["failed"]), terminal_size=(200, 50), run_before=_settled)
