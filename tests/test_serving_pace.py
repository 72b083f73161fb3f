""""Serving slower than it should": the rules on a fake clock, the baseline, the likely cause, the serving
watch's event and notice, and ``[notify]``'s ``slower``."""

from __future__ import annotations

import asyncio
import tomllib

import pytest

from sparktui.config import ConfigError, parse_config
from sparktui.domain.bench import BenchRecord, LevelResult
from sparktui.domain.events import Event, Notice, ServingSampled, ServingSlow
from sparktui.domain.notify import NotificationFilter
from sparktui.domain.serving import MetricsScrape, ServingSnapshot, SpecAcceptance
from sparktui.domain.serving_pace import (
    Baseline,
    Evidence,
    PaceSettings,
    ServingPace,
    baseline_for,
    baseline_from,
    settings_from,
)
from sparktui.remote.api_client import HealthResult
from sparktui.remote.serving_watch import ServingWatch

SETTINGS = PaceSettings(slow_ratio=0.8, slow_seconds=300.0, acceptance_drop=1 / 3, early_seconds=60.0,
                        cold_start_seconds=120.0)
BASE = Baseline(((1, 40.0), (4, 100.0), (16, 200.0)), started_at=1_700_000_000.0)


def _snap(tok_s: float | None, running: float = 1.0, spec: float | None = None) -> ServingSnapshot:
    return ServingSnapshot(at=0.0, requests_running=running, generation_tokens_per_s=tok_s,
                           spec=None if spec is None else SpecAcceptance(spec, 300.0, 1 + 3 * spec))


def _feed(pace: ServingPace, start: float, end: float, step: float, **kw: float | None):  # type: ignore[no-untyped-def]
    reading = None
    t = start
    while t <= end:
        reading = pace.observe(_snap(**kw), t)  # type: ignore[arg-type]
        t += step
    return reading


def test_comparable_load_is_the_nearest_level_within_the_band() -> None:
    assert BASE.level_for(1) == (1, 40.0)
    assert BASE.level_for(5) == (4, 100.0)
    assert BASE.level_for(2) is None          # between c=1 and c=4: no comparable level
    assert BASE.level_for(40) is None and BASE.level_for(0) is None


def test_a_sustained_drop_raises_once_with_the_figures() -> None:
    pace = ServingPace(SETTINGS, BASE)
    assert _feed(pace, 0, 290, 10, tok_s=24.0).slow is None          # 60 %, but not for 5 min yet
    reading = pace.observe(_snap(24.0), 300.0)
    assert reading.raised and reading.slow is not None
    slow = reading.slow
    assert (slow.rule, slow.tok_s, slow.expected_tok_s, slow.concurrency) == ("throughput", 24.0, 40.0, 1)
    assert slow.ratio == pytest.approx(0.6)
    assert slow.describe().startswith("serving slower than it should for 5 min: 24.0 tok/s vs 40.0 at c=1 in "
                                      "the last benchmark (60 %)")
    assert slow.to_json()["ratio"] == 0.6 and slow.to_json()["baseline_tok_s"] == 40.0
    again = pace.observe(_snap(24.0), 310.0)
    assert again.slow is not None and not again.raised                # said once
    assert not pace.observe(_snap(39.0), 320.0).slow                   # recovered
    assert _feed(pace, 330, 630, 10, tok_s=20.0).raised               # a second episode is said again


def test_a_dip_an_idle_engine_and_another_load_do_not_count() -> None:
    pace = ServingPace(SETTINGS, BASE)
    _feed(pace, 0, 200, 10, tok_s=20.0)
    pace.observe(_snap(38.0), 210.0)                                  # back at 95 %: the count starts over
    assert _feed(pace, 220, 500, 10, tok_s=20.0).slow is None
    pace = ServingPace(SETTINGS, BASE)
    _feed(pace, 0, 200, 10, tok_s=20.0)
    pace.observe(_snap(0.0, running=0), 210.0)                        # idle: nothing to compare
    assert _feed(pace, 220, 500, 10, tok_s=20.0).slow is None
    pace = ServingPace(SETTINGS, BASE)
    reading = _feed(pace, 0, 900, 10, tok_s=10.0, running=2)          # c=2 is no benchmarked load
    assert reading.slow is None and reading.ratio is None
    assert ServingPace(SETTINGS, None).observe(_snap(1.0), 0.0).ratio is None   # no baseline


def test_acceptance_falling_by_a_third_names_the_draft_model() -> None:
    pace = ServingPace(SETTINGS, None)                                # no benchmark needed for this rule
    _feed(pace, 0, 60, 10, tok_s=50.0, spec=0.6)                      # the early level: 60 %
    assert pace.early_acceptance == pytest.approx(0.6)
    assert _feed(pace, 70, 360, 10, tok_s=33.0, spec=0.45).slow is None    # −25 %: not a third
    reading = _feed(pace, 370, 670, 10, tok_s=33.0, spec=0.26)
    assert reading.raised and reading.slow is not None
    assert reading.slow.rule == "acceptance"
    assert reading.slow.describe().startswith("serving slower than it should for 5 min: acceptance 26 % "
                                              "(was 60 %) — likely speculative decoding's acceptance dropped")
    assert "sparktui audit" in (reading.slow.cause or "")


def test_with_a_baseline_the_figures_and_the_acceptance_cause_go_together() -> None:
    pace = ServingPace(SETTINGS, BASE)
    _feed(pace, 0, 60, 10, tok_s=55.0, spec=0.6)
    reading = _feed(pace, 70, 370, 10, tok_s=33.0, spec=0.26)     # 82 % of the benchmark: acceptance speaks
    assert reading.slow is not None and reading.slow.rule == "acceptance"
    assert reading.slow.ratio == pytest.approx(33 / 40)
    reading = _feed(pace, 380, 680, 10, tok_s=24.0, spec=0.26)
    assert reading.slow is not None and reading.slow.rule == "throughput"
    assert reading.slow.acceptance == pytest.approx(0.26)
    assert reading.slow.early_acceptance == pytest.approx(0.6)
    assert "acceptance dropped" in (reading.slow.cause or "")


@pytest.mark.parametrize(("evidence", "cause"), [
    (Evidence(nccl_warning="NCCL is on TCP sockets"), "NCCL is on TCP sockets"),
    (Evidence(clock_events={"spark-2": ("HW thermal slowdown",)}, served_seconds=9999),
     "spark-2's GPU clocks held down (HW thermal slowdown)"),
    (Evidence(served_seconds=400.0), "a cold start"),                 # slow since 100 s after ready
    (Evidence(served_seconds=4000.0), None),
])
def test_the_likely_cause(evidence: Evidence, cause: str | None) -> None:
    pace = ServingPace(SETTINGS, BASE)
    _feed(pace, 0, 290, 10, tok_s=20.0)
    slow = pace.observe(_snap(20.0), 300.0, lambda: evidence).slow
    assert slow is not None
    assert (slow.cause or None) == cause or (cause is not None and (slow.cause or "").startswith(cause))


def test_a_restart_forgets_the_early_level() -> None:
    pace = ServingPace(SETTINGS, BASE)
    _feed(pace, 0, 60, 10, tok_s=40.0, spec=0.6)
    pace.observe(ServingSnapshot(at=0.0, counter_reset=True), 70.0)
    assert pace.early_acceptance is None


def _record(started: float, image: str, flags: tuple[str, ...], rate: float, model: str = "m") -> BenchRecord:
    level = LevelResult(concurrency=1, requests=4, completed=4, failed=0, seconds=10.0,
                        output_tokens=int(rate * 10), input_tokens=100)
    return BenchRecord(started, model, image, (level,), 128, 64, "builtin", flags)


NODE = ('[[nodes]]\nname = "a"\nhost = "10.0.0.1"\nrole = "head"\n'
        '[engine]\nmodel = "m"\ntensor_parallel_size = 1\n')


def _config(text: str):  # type: ignore[no-untyped-def]
    return parse_config(tomllib.loads(text))


def test_the_baseline_is_the_last_benchmark_of_the_same_model_image_and_flags() -> None:
    history = [_record(1.0, "img:a", (), 40.0), _record(2.0, "img:a", (), 42.0),
               _record(3.0, "img:b", (), 90.0), _record(4.0, "img:a", ("--enforce-eager",), 10.0),
               _record(5.0, "img:a", (), 0.0), _record(6.0, "img:a", (), 99.0, model="other")]
    base = baseline_from(history, "m", "img:a", ())
    assert base is not None and base.levels == ((1, 42.0),) and base.started_at == 2.0
    assert baseline_from(history, "m", "img:c", ()) is None
    config = _config('[engine]\nmodel = "m"\ntensor_parallel_size = 1\nruntime = "docker"\nimage = "img:b"\n'
                          '[[nodes]]\nname = "a"\nhost = "10.0.0.1"\nrole = "head"\n')
    found = baseline_for(config, history)
    assert found is not None and found.levels == ((1, 90.0),)


def test_serving_settings_from_config() -> None:
    config = _config(NODE + '[serving]\nslow_ratio = 0.7\nslow_seconds = 60\nacceptance_drop = 0.25\n')
    assert settings_from(config.serving) == PaceSettings(0.7, 60.0, 0.25, 120.0)
    with pytest.raises(ConfigError, match="slow_ratio"):
        _config(NODE + '[serving]\nslow_ratio = 1.5\n')


def test_notify_announces_slower_when_asked() -> None:
    pace = ServingPace(SETTINGS, BASE)
    _feed(pace, 0, 290, 10, tok_s=20.0)
    slow = pace.observe(_snap(20.0), 300.0).slow
    assert slow is not None
    note = NotificationFilter("c", ["slower"], clock=lambda: 0.0).feed(ServingSlow(slow))
    assert note is not None and note.event == "slower" and note.detail == slow.describe()
    assert NotificationFilter("c", ["failed"]).feed(ServingSlow(slow)) is None


# ---- the serving watch -----------------------------------------------------------------------------
class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


class _Engine:
    """/health and /metrics of an engine generating ``rate`` tok/s with one request running."""

    def __init__(self, clock: _Clock, rate: float) -> None:
        self.clock, self.rate, self.tokens = clock, rate, 0.0
        self.last = 0.0

    async def health(self) -> HealthResult:
        return HealthResult(True, 0.0, 200)

    async def metrics_scrape(self) -> MetricsScrape:
        self.tokens += (self.clock.now - self.last) * self.rate
        self.last = self.clock.now
        return MetricsScrape(
            "# TYPE vllm:generation_tokens_total counter\n"
            f'vllm:generation_tokens_total{{model_name="m"}} {self.tokens}\n'
            "# TYPE vllm:num_requests_running gauge\n"
            'vllm:num_requests_running{model_name="m"} 1.0\n')


async def test_the_watch_posts_the_event_and_a_notice_once() -> None:
    clock = _Clock()
    engine = _Engine(clock, 24.0)
    watch = ServingWatch(engine, ready_at=0.0, interval=5.0, window_seconds=10.0, clock=clock,
                         sleep=clock.sleep, pace=ServingPace(PaceSettings(slow_seconds=60.0), BASE),
                         evidence=lambda: Evidence(served_seconds=clock.now + 3600))
    events: list[Event] = []
    task = asyncio.create_task(watch.run(events.append))
    while clock.now < 200:
        await asyncio.sleep(0)
    task.cancel()
    slow = [e for e in events if isinstance(e, ServingSlow)]
    notices = [e for e in events if isinstance(e, Notice) and "slower" in e.message]
    assert len(slow) == 1 and len(notices) == 1 and notices[0].severity == "warning"
    assert slow[0].slow.tok_s == pytest.approx(24.0) and slow[0].slow.expected_tok_s == 40.0
    sampled = [e.snapshot for e in events if isinstance(e, ServingSampled)]
    assert sampled[-1].pace is not None and sampled[-1].pace.ratio == pytest.approx(0.6)
    assert sampled[-1].pace.slow is not None


def test_one_stream_is_held_against_the_decode_ceiling_and_more_streams_are_not() -> None:
    from dataclasses import replace

    from sparktui.domain.pace_reading import PaceReading
    from sparktui.domain.serving import LatencyQuantiles

    pace = ServingPace(SETTINGS, replace(BASE, ceiling_tok_s=55.0))
    one = replace(_snap(38.0), itl=LatencyQuantiles(p50=1 / 38.0))
    reading = pace.observe(one, 0.0)
    assert reading.stream_tok_s is not None and round(reading.stream_tok_s) == 38
    assert reading.against() == ["95 % of bench", "69 % of ceiling 55"]
    # Four streams: the aggregate is held against the bench, the single-stream ceiling says nothing.
    four = replace(_snap(90.0, running=4.0), itl=LatencyQuantiles(p50=1 / 22.5))
    assert pace.observe(four, 10.0).against() == ["90 % of bench"]
    # No ceiling recorded with the bench (the model's config could not be counted): none shown.
    assert ServingPace(SETTINGS, BASE).observe(one, 0.0).against() == ["95 % of bench"]
    assert PaceReading().against() == [] and PaceReading().to_json()["text"] is None


def test_the_baseline_carries_the_ceiling_its_benchmark_recorded() -> None:
    from dataclasses import replace

    record = replace(_record(1.0, "img:a", (), 40.0), ceiling={"tok_s": 47.2})
    base = baseline_from([record], "m", "img:a", ())
    assert base is not None and base.ceiling_tok_s == 47.2
    base = baseline_from([_record(1.0, "img:a", (), 40.0)], "m", "img:a", ())
    assert base is not None and base.ceiling_tok_s is None
