"""The dashboard's `b` key: a short benchmark through the head's transport against a stand-in server on
loopback, with power from the dashboard's own telemetry (a ``PowerTap`` on the event stream), saved in
the bench history and shown as the bench chart."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparktui.commands.bench import quick_bench
from sparktui.config import parse_config
from sparktui.domain.bench import PowerTap
from sparktui.domain.events import EngineChanged, EngineState, NodeReading, NodeSampled
from sparktui.domain.telemetry import Sample
from sparktui.remote.transport import LocalTransport
from sparktui.ui.app import SparkApp
from sparktui.ui.screens.bench_chart import BenchChartScreen, chart_text
from tests.standin_api import standin_api
from tests.ui_fakes import FakeBackend, notifications, settle
from tests.waiting import wait_until


@pytest.fixture
def server() -> Iterator[int]:
    with standin_api() as port:
        yield port


async def test_b_runs_a_short_bench(server: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    config = parse_config({"nodes": [{"name": "spark1", "host": "localhost", "local": True, "role": "head"}],
                           "engine": {"model": "/models/standin-model", "api_port": server,
                                      "tensor_parallel_size": 1}})
    tap = PowerTap()
    transport = LocalTransport("spark1")
    await transport.connect()
    backend = FakeBackend()
    app = SparkApp(backend, roles={"spark1": "head"}, bench=lambda: quick_bench(config, transport, tap))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, app)
            await pilot.press("b")
            await settle(pilot, app)
            assert any("not ready" in n for n in notifications(app))
            backend.post(EngineChanged(EngineState.READY))
            await settle(pilot, app)
            # The dashboard's telemetry feeds the tap: 100 W, before and long after the sweep.
            for i, at in enumerate((0.0, 1e9)):
                gpu = {"source": "nvml", "devices": [{"index": 0, "power_w": 100.0}]}
                sample = Sample.from_json({"v": 1, "seq": i + 1, "mono": at, "wall": at, "gpu": gpu},
                                          received=at)
                tap(NodeSampled("spark1", NodeReading(), sample))
            await pilot.press("b")
            await settle(pilot, app)
            await wait_until(lambda: isinstance(app.screen, BenchChartScreen), "its chart opens", pilot=pilot,
                             timeout=60, state=lambda: notifications(app))
            chart = app.screen.chart   # type: ignore[attr-defined]
            assert [(r.concurrency, r.previous_tok_s) for r in chart.rows] == [(1, None), (4, None)]
            assert all(r.tok_s and r.joules_per_token for r in chart.rows)
            text = chart_text(chart, 100).plain
            assert "energy per output token (J/token, all nodes' GPUs): c=1 " in text
            assert "decode ceiling unknown" in text   # the stand-in's model directory has no config.json
    finally:
        await transport.close()
    (line,) = (tmp_path / "sparktui" / "bench.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert [lv["completed"] for lv in record["levels"]] == [8, 8]
    assert record["levels"][0]["energy"]["joules"]["spark1"] > 0
