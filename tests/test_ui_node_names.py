"""Node names are any printable text: an FQDN, a space, Rich markup, other scripts. The config accepts them
and the dashboard shows them (panels, log filter, link state) with no invalid widget id, no markup error."""

from __future__ import annotations

import asyncio
import time

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sparktui.config import parse_config
from sparktui.domain.events import EngineChanged, EngineState, NodeLinkChanged
from sparktui.ui.app import SparkApp
from sparktui.ui.widgets.node_panel import NodePanel
from sparktui.ui.widgets.util import node_widget_id
from tests.test_ui_panels import gb10_sample
from tests.ui_fakes import FIXED_NOW, FakeBackend, settle

printable_names = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=24).filter(
    lambda s: s.isprintable() and s.strip() != "" and s != "spark2")


def test_widget_ids_are_valid_and_distinct() -> None:
    names = ["spark1", "spark1.lan", "spark1_lan", "spark 1", "Kühl", "名前", "[bold]x", "-a", "1"]
    ids = [node_widget_id(n) for n in names]
    assert len(set(ids)) == len(ids)
    assert ids[0] == "node-spark1"  # a name that is a valid id keeps its readable id


async def _dashboard(name: str) -> None:
    config = parse_config({"nodes": [{"name": name, "host": "10.0.0.1", "role": "head"},
                                     {"name": "spark2", "host": "10.0.0.2"}],
                           "engine": {"model": "/models/m"}}, "<fuzz>")
    names = tuple(n.name for n in config.nodes)
    backend = FakeBackend(nodes=names)
    app = SparkApp(backend, config.ui, roles={n.name: n.role for n in config.nodes}, clock=lambda: FIXED_NOW)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(NodeLinkChanged(name, "connected"),
                     backend.sampled(name, gb10_sample(1, 10_000)),
                     backend.sampled(name, gb10_sample(2, 20_000)),
                     NodeLinkChanged("spark2", "retrying", f"{name}: connection refused",
                                     retry_at=time.monotonic() + 3),
                     EngineChanged(EngineState.UNKNOWN, f"unknown: the head ({name}) is unreachable"))
        await settle(pilot, app)
        panel = app.query_one(f"#{node_widget_id(name)}", NodePanel)
        assert panel is not None
        await pilot.press("o", "o")  # the log's node filter cycles through the names
        await settle(pilot, app)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(printable_names)
@example("spark1.lan")
@example("spark 1")
@example("[bold]spark[/b]")
@example("Kühl-名前")
def test_any_printable_node_name_through_the_dashboard(name: str) -> None:
    asyncio.run(_dashboard(name))
