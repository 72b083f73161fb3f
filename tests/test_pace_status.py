"""``sparktui status``'s serving pace (``sparktui.domain.pace_status``): never the 5-minute verdict, which one
short window cannot give; what the window shows against the last benchmark and the decode ceiling; the
stand-in's /metrics read through the head's link when the engine is idle."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparktui.commands.status import _serving_pace
from sparktui.config import parse_config
from sparktui.domain.bench import BenchRecord, LevelResult
from sparktui.domain.pace_reading import PaceReading
from sparktui.domain.pace_status import pace_status
from sparktui.domain.serving import LatencyQuantiles, ServingSnapshot
from sparktui.domain.serving_pace import Baseline, PaceSettings, ServingPace
from sparktui.remote.transport import LocalTransport
from tests.standin_api import standin_api

BASE = Baseline(((1, 40.0), (4, 100.0)), started_at=1_775_657_400.0, ceiling_tok_s=55.0)
SETTINGS = PaceSettings()


def test_one_stream_now_against_the_bench_and_the_ceiling_and_no_verdict() -> None:
    snap = ServingSnapshot(at=0.0, requests_running=1, generation_tokens_per_s=32.4, window_seconds=2.0,
                           itl=LatencyQuantiles(p50=1 / 38.0))
    reading = ServingPace(SETTINGS, BASE).observe(snap, 0.0)
    out = pace_status(BASE, SETTINGS, snap, reading)
    assert out["verdict"] is None and "over 5 min of serving" in out["verdict_note"]
    assert out["text"].startswith("serving pace now: 32.4 tok/s with 1 running over 2 s = 81 % of bench · "
                                  "69 % of ceiling 55; bench of 2026-04-08: c=1 40.0 · c=4 100.0 tok/s; "
                                  "ceiling 55 tok/s for one stream;")
    assert out["now"]["ratio"] == 0.81 and out["baseline"]["ceiling_tok_s"] == 55.0
    json.dumps(out)


def test_other_load_idle_and_no_bench_say_what_they_can() -> None:
    two = ServingSnapshot(at=0.0, requests_running=2, generation_tokens_per_s=60.0, window_seconds=2.0)
    out = pace_status(BASE, SETTINGS, two, ServingPace(SETTINGS, BASE).observe(two, 0.0))
    assert "= no bench level at this load;" in out["text"]
    idle = ServingSnapshot(at=0.0, requests_running=0)
    assert pace_status(BASE, SETTINGS, idle, None)["text"].startswith("serving pace: no request running now; "
                                                                      "bench of 2026-04-08")
    assert pace_status(None, SETTINGS, None, None)["text"].startswith("serving pace: no benchmark of this")
    assert PaceReading().to_json()["slow"] is None


@pytest.fixture
def server() -> Iterator[int]:
    with standin_api() as port:
        yield port


async def test_status_reads_the_idle_stand_in_and_names_its_last_bench(
        server: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    config = parse_config({"nodes": [{"name": "spark1", "host": "localhost", "local": True, "role": "head"}],
                           "engine": {"model": "/models/standin-model", "api_port": server,
                                      "tensor_parallel_size": 1}})
    transport = LocalTransport("spark1")
    await transport.connect()
    try:
        none = await _serving_pace(config, transport)
        assert none is not None and none["baseline"] is None
        level = LevelResult(concurrency=1, requests=4, completed=4, failed=0, seconds=10.0, output_tokens=300,
                            input_tokens=100)
        image = config.engine.image if config.engine.runtime == "docker" else ""   # as bench_record names it
        record = BenchRecord(1_775_657_400.0, "/models/standin-model", image, (level,), 128, 64, "builtin",
                             ceiling={"tok_s": 55.0})
        from sparktui.domain.bench_history import BenchStore

        BenchStore().append(record)
        out = await _serving_pace(config, transport)
    finally:
        await transport.close()
    assert out is not None and out["baseline"]["levels"] == [{"concurrency": 1, "output_tok_s": 30.0}]
    assert out["text"].startswith("serving pace: no request running now; bench of 2026-04-08: c=1 30.0 "
                                  "tok/s; ceiling 55 tok/s for one stream")
