"""A failure's diagnosis: the node of the process that logged it (the demo's OOM is on spark2, a worker whose
lines carry Ray's ``ip=``), and the order it is told in — kind, node and stage, the hint, then the raw message
(``sparktui.domain.logs.diagnosis``), in ``sparktui timeline`` as on the dashboard."""

from __future__ import annotations

from pathlib import Path

from sparktui.domain.logs import Timeline, render_human
from sparktui.domain.logs.diagnosis import diagnosis, node_label
from sparktui.sim.demo_story import STORY, start_log
from sparktui.sim.timeline_feed import TimelineFeed

DATA = Path(__file__).parent / "data" / "vllm-logs"
SINGLE_NODE_FAILURE = DATA / ("09_dgx-spark-gb10-nemotron3-super-120b-nvfp4-no-scaledmm-kernel"
                              "-enginecore-failed_v0.26.0.txt")


def _oom_timeline() -> Timeline:
    timeline = Timeline()
    timeline.feed_text(start_log(fail="oom"))
    return timeline


def test_an_oom_on_a_worker_names_the_worker_by_its_ray_address() -> None:
    failure = _oom_timeline().snapshot().failure
    assert failure is not None and failure.kind == "oom" and failure.stage == "kv_cache"
    # The worker's own line ("(RayWorkerWrapper pid=…, ip=<spark2>) … torch.OutOfMemoryError") is the root
    # cause; the head's re-raise of it (RayTaskError(OutOfMemoryError)) does not take its place.
    assert failure.node == STORY.node_ip("spark2")


def test_a_feed_that_names_addresses_names_the_node() -> None:
    feed = TimelineFeed(node_names={ip: name for name, ip in zip(STORY.nodes, STORY.ips, strict=True)})
    feed.feed(start_log(fail="oom").splitlines(), now=0.0)
    failure = feed.snapshot().failure
    assert failure is not None and failure.node == "spark2"


def test_a_failure_on_the_head_has_no_ray_address() -> None:
    timeline = Timeline()
    timeline.feed_text(SINGLE_NODE_FAILURE.read_text(errors="replace"))
    failure = timeline.snapshot().failure
    assert failure is not None and failure.kind == "kernel_unsupported" and failure.node is None


def test_a_node_is_named_as_configured_and_no_address_is_the_head() -> None:
    names = {"10.0.0.2": "spark2"}
    assert node_label("10.0.0.2", names, "spark1") == "spark2"
    assert node_label("10.9.9.9", names, "spark1") == "10.9.9.9"   # not configured: as the log says
    assert node_label("spark2", names, "spark1") == "spark2"       # named already (the demo's feed)
    assert node_label(None, names, "spark1") == "spark1"
    assert node_label(None, {}, None) is None


def test_the_hint_and_the_node_come_before_the_raw_message() -> None:
    parts = diagnosis("oom", "KV cache", "spark2", "Lower --gpu-memory-utilization.",
                      "torch.OutOfMemoryError: …")
    assert [(p.role, p.text) for p in parts] == [
        ("kind", "oom"), ("where", "on spark2 · in KV cache"), ("hint", "Lower --gpu-memory-utilization."),
        ("message", "torch.OutOfMemoryError: …")]
    assert [p.role for p in diagnosis("unknown", None, None, "", "boom")] == ["kind", "message"]


def test_the_timeline_report_tells_it_in_the_same_order() -> None:
    text = render_human(_oom_timeline().snapshot())
    failed = text[text.index("FAILED:"):]
    head = f"FAILED: oom on {STORY.node_ip('spark2')} · in KV cache\n  hint: Out of GPU memory"
    assert failed.startswith(head)
    assert failed.index("hint:") < failed.index("torch.OutOfMemoryError: CUDA out of memory")


def test_a_crash_after_ready_names_the_node_of_the_error_it_blames() -> None:
    timeline = Timeline()
    timeline.feed_text(start_log())
    ip = STORY.node_ip("spark2")
    timeline.feed_text(
        f"(EngineCore_DP0 pid=9) (RayWorkerWrapper pid=7, ip={ip}) ERROR 10-23 15:20:00 [ray_utils.py:82] "
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
        "(EngineCore_DP0 pid=9) ERROR 10-23 15:20:01 [core.py:700] EngineCore encountered a fatal error.\n")
    failure = timeline.snapshot().failure
    assert failure is not None and (failure.kind, failure.stage, failure.node) == ("oom", "serving", ip)
