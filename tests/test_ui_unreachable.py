"""An unreachable node on the dashboard: the whole reason under the node's title (wrapped, never cut), and the
engine panel saying what is unknown and why."""

from __future__ import annotations

import time

from textual.widgets import Static

from sparktui.domain.events import EngineChanged, EngineState, NodeLinkChanged
from tests.ui_fakes import make_app, settle

REASON = ("10.0.0.2:22: no answer within 3 s — is the host up and its link connected? (the second Spark, "
          "on the far end of the cable)")


async def test_link_reason_is_shown_whole_and_wrapped() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(NodeLinkChanged("spark1", "connected"),
                     NodeLinkChanged("spark2", "retrying", REASON,
                                     retry_at=time.monotonic() + 4, reason=REASON))
        await settle(pilot, app)
        line = app.query_one("#node-spark2 #node-link", Static)
        assert line.display
        assert str(line.render()) == REASON
        assert line.size.height >= 2, "a reason longer than the panel is wrapped, not cut"
        title = str(app.query_one("#node-spark2 #node-title", Static).render())
        assert "retrying in" in title and "no answer" not in title  # said once, under the title
        assert not app.query_one("#node-spark1 #node-link", Static).display
        backend.post(NodeLinkChanged("spark2", "connected"))
        await settle(pilot, app)
        assert not line.display


async def test_engine_panel_says_what_is_unknown_and_why() -> None:
    app, backend = make_app()
    detail = ("cannot tell what runs on spark2 (10.0.0.2:22): connection refused — is sshd running? "
              "and its Ray worker may still hold the GPU")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(EngineChanged(EngineState.UNKNOWN, detail))
        await settle(pilot, app)
        why = app.query_one("#engine-why", Static)
        assert why.display and str(why.render()) == detail
        assert why.size.height >= 2
        backend.post(EngineChanged(EngineState.STOPPED, "nothing of ours runs"))
        await settle(pilot, app)
        assert not why.display
