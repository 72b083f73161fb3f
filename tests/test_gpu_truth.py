"""GPU truth: NVML clock-event (throttle) reasons, clocks and Xid errors, from REAL H200 readings.

The probe runs unchanged against ``h200_replay_pynvml`` (a pynvml stand-in that answers with the rows NVML
gave on the H200, see ``tests/fixtures/telemetry/h200/README.md``): idle rows carry GpuIdle (0x1, not
shown), load rows SwPowerCap (0x4) at ~690 of 700 W with SM at 1455–1500 of 1980 MHz."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from sparktui.domain.telemetry import Sample, clock_event_names
from tests.fixtures.telemetry import sparks
from tests.ui_fakes import make_app, settle

REPO = Path(__file__).resolve().parents[1]
PROBE = REPO / "sparktui" / "probe.py"
RAW = sparks.HERE / "h200" / "nvml-clocks-raw.jsonl"
ROWS = [json.loads(line) for line in RAW.read_text().splitlines() if line]
FIRST_CAPPED = next(i for i, r in enumerate(ROWS) if r["CurrentClocksEventReasons"] == 4)


def probe_h200(start: int, count: int = 2) -> list[Sample]:
    env = {**os.environ, "PYTHONPATH": str(sparks.NVML_DIR), "H200_REPLAY_START": str(start)}
    out = subprocess.run([sys.executable, str(PROBE), "--count", str(count), "--interval", "0.05",
                          "--no-containers", "--nvml-module", "h200_replay_pynvml"],
                         capture_output=True, text=True, env=env, timeout=60, check=True)
    return [Sample.from_json(json.loads(line)) for line in out.stdout.splitlines()]


def test_the_recording_holds_both_states() -> None:
    masks = {r["CurrentClocksEventReasons"] for r in ROWS}
    assert {1, 4} <= masks                        # idle and power-capped, as NVML reported them
    assert all(r["driver"] == "580.159.04" for r in ROWS)
    assert clock_event_names(4) == ("SW power cap",)
    assert clock_event_names(1) == ()             # a resting GPU clocks down: not a slowdown
    assert clock_event_names(0x48) == ("HW slowdown", "HW thermal")
    assert clock_event_names(0x1000) == ("0x1000",)


def test_probe_reports_power_cap_clocks_and_no_xid() -> None:
    capped = probe_h200(FIRST_CAPPED)[0]
    gpu = capped.gpu.devices[0]
    assert gpu.clock_event_reasons == 4 and gpu.clock_events == ("SW power cap",)
    assert gpu.sm_clock_max_mhz == 1980 and gpu.mem_clock_mhz == 3201 and gpu.mem_clock_max_mhz == 3201
    assert gpu.sm_clock_mhz is not None and gpu.sm_clock_mhz < 1980
    assert gpu.power_w is not None and gpu.power_w > 500
    assert gpu.xid_errors == ()                  # the event set answered Timeout: none waiting
    idle = probe_h200(0)[0].gpu.devices[0]
    assert idle.clock_event_reasons == 1 and idle.clock_events == ()


def test_gb10_without_clock_event_calls_still_samples() -> None:
    env = {**os.environ, "PYTHONPATH": str(sparks.NVML_DIR)}
    out = subprocess.run([sys.executable, str(PROBE), "--count", "1", "--no-containers",
                          "--nvml-module", sparks.NVML_MODULE],
                         capture_output=True, text=True, env=env, timeout=60, check=True)
    data = json.loads(out.stdout)
    gpu = Sample.from_json(data).gpu.devices[0]
    assert gpu.mem_clock_mhz is None and "gpu[0].mem_clock_mhz" in data["problems"]
    assert gpu.clock_event_reasons is None and gpu.clock_events == () and gpu.xid_errors is None


async def test_throttle_reasons_from_the_recording_on_screen() -> None:
    from tests.test_ui_panels import panel_text

    app, backend = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        backend.post(*(backend.sampled("spark1", s) for s in probe_h200(0)))
        await settle(pilot, app)
        assert "clk " not in panel_text(app, "spark1")       # idle: nothing to say
        capped = probe_h200(FIRST_CAPPED)
        backend.post(*(backend.sampled("spark1", s) for s in capped))
        await settle(pilot, app)
        text = panel_text(app, "spark1")
        sm = capped[-1].gpu.devices[0].sm_clock_mhz
        assert "SW power cap" in text and f"SM {sm:.0f}/1980 MHz" in text, text


async def test_xid_errors_on_screen() -> None:
    from tests.test_ui_panels import panel_text

    stream = sparks.HERE / "h200" / "probe-stream.jsonl"
    raw: dict[str, Any] = json.loads(stream.read_text().splitlines()[0])
    raw["gpu"]["devices"][0]["xid_errors"] = [{"xid": 79, "wall": raw["wall"]}]
    app, backend = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        backend.post(backend.sampled("spark1", Sample.from_json(raw)))
        await settle(pilot, app)
        assert "Xid 79" in panel_text(app, "spark1")
