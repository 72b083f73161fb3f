"""Node and engine panels: SSH state (a node whose link is lost), unknown memory, RoCE rates and rising error
counters from real telemetry samples, stage bars driven by a real log through the real stage machine, the
failure box, "no progress for N min", the asymmetry warning."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sparktui.config import UIConfig
from sparktui.domain.engine_view import timeline_view
from sparktui.domain.events import (
    EngineChanged,
    EngineState,
    NodeLinkChanged,
    NodeReading,
    NodeSampled,
    StageView,
    TimelineView,
)
from sparktui.domain.history import record_run
from sparktui.domain.logs import STAGE_LABELS, STAGES
from sparktui.domain.logs.stages import Timeline
from sparktui.domain.telemetry import CpuSample, GpuDevice, GpuSample, MemorySample, RdmaPort, Sample
from sparktui.sim.recording import DEFAULT_RECORDING, recording_text
from sparktui.ui.app import AppSwitches, SparkApp
from sparktui.ui.widgets.engine_panel import StageRow
from sparktui.ui.widgets.node_panel import NodePanel, NodeSummary
from sparktui.ui.widgets.stage_bar import StageBar
from tests.ui_fakes import FIXED_NOW, FakeBackend, make_app, settle
from tests.waiting import wait_until

GIB = 1024**3
DATA = Path(__file__).parent / "data" / "vllm-logs"


def panel_text(app: Any, node: str) -> str:
    panel = app.query_one(f"#node-{node}", NodePanel)
    return f"{panel.query_one('#node-title').render()}\n{panel.query_one(NodeSummary).render()}"


def gb10_sample(seq: int, tx_octets: int, symbol_errors: int = 0, util: float = 0.0) -> Sample:
    ports = tuple(
        RdmaPort(device=dev, port=1, state="ACTIVE", state_id=4, rate="200 Gb/sec (4X HDR)", rate_gbps=200.0,
                 link_layer="Ethernet",
                 counters={"port_xmit_data": tx_octets, "port_rcv_data": tx_octets // 2,
                           "symbol_error": symbol_errors if dev == "rocep1s0f1" else 0})
        for dev in ("rocep1s0f1", "roceP2p1s0f1")
    )
    return Sample(
        seq=seq, mono=float(seq), wall=FIXED_NOW + seq, interval=1.0,
        memory=MemorySample(total=127_600_748 * 1024, used=int(40 * GIB), available=int(81 * GIB)),
        cpu=CpuSample(percent=12.0),
        # GB10: NVML gives utilisation, temperature and power, but no memory figures.
        gpu=GpuSample(source="nvml", devices=(
            GpuDevice(index=0, name="NVIDIA GB10", util_percent=util, temperature_c=51.0, power_w=33.5,
                      memory_unified=True),
        )),
        rdma=ports,
    )


async def test_a_node_whose_ssh_is_lost() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(NodeLinkChanged("spark1", "connected"),
                     NodeLinkChanged("spark2", "connected"))
        await settle(pilot, app)
        assert "connected" in panel_text(app, "spark2")
        backend.post(NodeLinkChanged("spark2", "retrying", "Connection refused",
                                     retry_at=time.monotonic() + 4))
        await settle(pilot, app)
        text = panel_text(app, "spark2")
        assert "retrying in" in text and "(Connection refused)" in text
        assert app.query_one("#node-spark2").has_class("-link-down")
        assert not app.query_one("#node-spark1").has_class("-link-down")
        backend.post(NodeLinkChanged("spark2", "failed", "host key mismatch"))
        await settle(pilot, app)
        assert "failed (host key mismatch)" in panel_text(app, "spark2")
        backend.post(NodeLinkChanged("spark2", "connected"))
        await settle(pilot, app)
        assert not app.query_one("#node-spark2").has_class("-link-down")


async def test_unknown_memory_is_never_zero() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(NodeSampled("spark1", NodeReading(mem_total_gib=None, mem_used_gib=None, gpu_util=3.0)))
        await settle(pilot, app)
        text = panel_text(app, "spark1")
        assert "mem unknown" in text
        assert "0.0/" not in text


async def test_real_samples_give_rates_and_highlight_rising_errors() -> None:
    app, backend = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        # 25 Gb/s each way per device = 50 Gb/s on the cable: 25e9/8 bytes/s = 781_250_000 octets/4 per s.
        step = 25_000_000_000 // 8 // 4
        backend.post(backend.sampled("spark1", gb10_sample(1, 0)),
                     backend.sampled("spark1", gb10_sample(2, step)))
        await settle(pilot, app)
        text = panel_text(app, "spark1")
        assert "39.9/122 GiB" in text or "40.0/122 GiB" in text
        assert "tx 50.0" in text and "rx 25.0" in text
        assert "51°C" in text and "34 W" in text
        assert "symbol_error" not in text
        backend.post(backend.sampled("spark1", gb10_sample(3, 2 * step, symbol_errors=2)))
        await settle(pilot, app)
        assert "symbol_error +2" in panel_text(app, "spark1")


def fed_timeline(upto: str) -> Any:
    """The recorded real start through the real stage machine, up to the first line containing ``upto``."""
    timeline = Timeline(expected_nodes=2)
    lines = recording_text(DEFAULT_RECORDING).splitlines()
    cut = next(i for i, line in enumerate(lines) if upto in line)
    timeline.feed_text("\n".join(lines[: cut + 1]) + "\n", now=FIXED_NOW)
    return timeline_view(timeline.snapshot())


async def test_stage_bars_follow_a_fed_log() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        snap = fed_timeline("Loading safetensors checkpoint shards:  33% Completed | 10/30")
        backend.post(EngineChanged(EngineState.STARTING, timeline=snap))
        await settle(pilot, app)
        weights = app.query_one("#stage-weights", StageRow)
        assert weights.has_class("-running")
        bar = weights.query_one(StageBar)
        assert (bar.total, bar.progress) == (30, 10)
        assert "10/30" in str(weights.query_one(".stage-info").render())
        assert app.query_one("#stage-config", StageRow).has_class("-done")
        assert app.query_one("#stage-placement", StageRow).has_class("-done")
        assert app.query_one("#stage-cuda_graphs", StageRow).has_class("-pending")
        assert "starting: weights" in str(app.query_one("#engine-state").render())
        facts = str(app.query_one("#engine-facts").render())
        assert "vLLM 0.8.3" in facts and "TP 4" in facts
        # A stage without a count: indeterminate bar.
        snap = fed_timeline("Memory profiling takes")
        backend.post(EngineChanged(EngineState.STARTING, timeline=snap))
        await settle(pilot, app)
        running = [r for r in app.query(StageRow) if r.has_class("-running")]
        assert len(running) == 1
        if running[0].stage == "kv_cache":
            assert running[0].query_one(StageBar).total is None


async def test_failure_shows_kind_root_cause_and_hint() -> None:
    app, backend = make_app()
    log = DATA / ("09_dgx-spark-gb10-nemotron3-super-120b-nvfp4-no-scaledmm-kernel-enginecore-failed"
                  "_v0.26.0.txt")
    timeline = Timeline()
    timeline.feed_text(log.read_text(errors="replace"), now=FIXED_NOW)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(EngineChanged(EngineState.FAILED, timeline=timeline_view(timeline.snapshot())))
        await settle(pilot, app)
        box = str(app.query_one("#engine-failure").render())
        assert "kernel_unsupported" in box
        assert "Failed to find a kernel" in box
        assert "hint:" in box
        assert "failed" in str(app.query_one("#engine-state").render())


def _stalled_timeline() -> TimelineView:
    """A start whose running stage has not moved for 5 minutes (at the app's clock)."""
    shown = {"config": StageView("config", STAGE_LABELS["config"], "done", 3.0),
             "weights": StageView("weights", STAGE_LABELS["weights"], "running", 40.0, 3.0, 12.0)}
    stages = tuple(shown.get(name, StageView(name, STAGE_LABELS[name])) for name in STAGES)
    return TimelineView(stages=stages, last_progress_at=FIXED_NOW - 300.0)


async def test_a_stalled_stage_says_so() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(EngineChanged(EngineState.STARTING, timeline=_stalled_timeline()))
        await settle(pilot, app)
        info = str(app.query_one("#stage-weights").query_one(".stage-info").render())
        assert "3/12" in info and "no progress for 5m00s" in info


async def test_asymmetry_banner_during_graph_capture() -> None:
    now = [FIXED_NOW]
    app, backend = make_app(clock=lambda: now[0])
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        snap = fed_timeline("Capturing CUDA graph shapes:   6%")
        backend.post(EngineChanged(EngineState.STARTING, timeline=snap))
        for i in range(3):
            now[0] = FIXED_NOW + i * 40
            backend.post(backend.sampled("spark1", gb10_sample(i + 1, 0, util=97.0)),
                         backend.sampled("spark2", gb10_sample(i + 1, 0, util=0.0)))
            await settle(pilot, app)
        banner = app.query_one("#asymmetry")
        assert banner.display
        assert "spark2 idle" in str(banner.render())


async def test_stage_eta_from_earlier_runs() -> None:
    runs = [record_run(started_at=FIXED_NOW - 86_400 * i, model="m", image="i", outcome="ready",
                       stage_seconds={"config": 5, "placement": 10, "distributed": 3, "weights": 600,
                                      "kv_cache": 20, "cuda_graphs": 60, "engine": 1, "api": 1})
            for i in (3, 2, 1)]
    backend = FakeBackend()
    app = SparkApp(backend, UIConfig(), roles={"spark1": "head", "spark2": "worker"}, clock=lambda: FIXED_NOW,
                   history=lambda: runs)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        snap = fed_timeline("Loading safetensors checkpoint shards:  33% Completed | 10/30")
        backend.post(EngineChanged(EngineState.STARTING, timeline=snap))
        await settle(pilot, app)
        eta = str(app.query_one("#engine-eta").render())
        assert eta.startswith("ready in about ") and eta.endswith("; the last 3 runs took 11m40s")
        assert app.query_one("#engine-eta").display


async def test_a_node_whose_samples_stop_says_so() -> None:
    now = [FIXED_NOW]
    app, backend = make_app(clock=lambda: now[0], switches=AppSwitches(tick_seconds=0.1))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(backend.sampled("spark1", gb10_sample(1, 0)))
        await settle(pilot, app)
        assert "no sample for" not in panel_text(app, "spark1")
        now[0] += 12
        # The next tick sees the sample's age.
        await wait_until(lambda: "no sample for 12s" in panel_text(app, "spark1"), "the stale sample shown",
                         pilot=pilot, state=lambda: panel_text(app, "spark1"))


async def test_the_supervisors_presence_is_one_line_under_the_engines_state() -> None:
    from textual.widgets import Static

    from sparktui.domain.events import SupervisorSeen
    from sparktui.domain.presence import STALE_AFTER, LastDecision, SupervisorPresence

    app, backend = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        line = app.query_one("#engine-supervisor", Static)
        assert not line.display   # never a supervisor: nothing
        backend.post(SupervisorSeen(None, FIXED_NOW))
        await settle(pilot, app)
        assert not line.display
        presence = SupervisorPresence("spark1", 4242, FIXED_NOW - 600, FIXED_NOW - 5,
                                      decision=LastDecision("restart", "crashed", "", FIXED_NOW - 300))
        backend.post(SupervisorSeen(presence, FIXED_NOW))
        await settle(pilot, app)
        text = str(line.render())
        assert line.display and line.region.height >= 1 and line.region.y > 0, line.region
        assert text.startswith("supervised by spark1 (pid 4242) · last: restart after crash"), text
        backend.post(SupervisorSeen(presence, FIXED_NOW + STALE_AFTER + 60))
        await settle(pilot, app)
        assert str(line.render()).startswith("supervisor on spark1 (pid 4242): not seen for 1m")



async def test_the_image_a_start_uses_is_one_dim_line_above_the_supervisor() -> None:
    from textual.widgets import Static

    from sparktui.domain.events import ImageSeen

    app, backend = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        line = app.query_one("#engine-image", Static)
        assert not line.display   # not read yet (or the host runtime): nothing
        backend.post(ImageSeen("vllm/vllm-openai:v0.22.0 (4f1c2a9b0d1e, vLLM 0.22.0), promoted by "
                               "`sparktui upgrade` on laptop at 2026-12-04 15:30", True))
        await settle(pilot, app)
        text = str(line.render())
        assert line.display, text
        assert text.startswith("image vllm/vllm-openai:v0.22.0 (4f1c2a9b0d1e, vLLM 0.22.0)"), text
        backend.post(ImageSeen("nvcr.io/nvidia/vllm:25.11-py3", False))
        await settle(pilot, app)
        assert str(line.render()) == "image nvcr.io/nvidia/vllm:25.11-py3 (engine.image)"
