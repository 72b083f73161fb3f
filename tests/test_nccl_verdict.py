"""The NCCL verdict from NCCL_DEBUG=INFO lines: real recorded logs (IB; NET/IB "No device found" → sockets),
Spark-shaped lines in NCCL's own formats (src/transport/net_ib.cc, net_socket.cc, transport/net.cc), the
stage machine's facts, the RoCE-counter cross-check, and the engine panel."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparktui.domain.logs import Timeline, parse_line
from sparktui.domain.logs.nccl import SOCKET_WARNING, NcclVerdict, cross_check, observe, verdict

DATA = Path(__file__).parent / "data" / "vllm-logs"
W = "\x1b[36m(RayWorkerWrapper pid=5237, ip=10.0.0.2)\x1b[0m spark2:5237:5237 [0] NCCL INFO "
H = "(EngineCore_DP0 pid=4388) spark1:4388:4388 [0] NCCL INFO "


def facts_of(text: str) -> dict[str, object]:
    t = Timeline(expected_nodes=2)
    t.feed_text(text)
    return dict(t.snapshot().facts)


def spark_lines(ib_devs: str, channels: list[str]) -> str:
    lines = []
    for prefix, ip in ((H, "10.0.0.1"), (W, "10.0.0.2")):
        lines.append(f"{prefix}NET/IB : Using{ib_devs} [RO]; OOB enp1s0f1np1:{ip}<0>")
        lines.append(f"{prefix}Using network IB")
        lines += [prefix + c for c in channels]
    return "\n".join(lines) + "\n"


def test_recorded_socket_fallback_gives_the_warning() -> None:
    facts = facts_of((DATA / "01_multinode-ray-tp8pp2-deepseek-v2.5-k8s-lws-ready_v0.8.3.txt").read_text())
    assert facts["nccl_verdict_level"] == "warning"
    assert str(facts["nccl_verdict"]).startswith(SOCKET_WARNING)
    assert "expect ~3 GB/s busbw" in str(facts["nccl_verdict"])


def test_recorded_ib_run_reads_as_rdma() -> None:
    facts = facts_of((DATA / "02_multinode-ray-tp4pp2-llama3.3-70b-cudagraphs-ready_v0.8.3.txt").read_text())
    assert facts["nccl_channels"] and "Socket" not in facts["nccl_channels"]   # type: ignore[operator]
    assert "IB" in facts["nccl_channels"]   # type: ignore[operator]
    assert "fell back" not in str(facts.get("nccl_verdict"))


def test_both_hcas_one_hca_and_merged() -> None:
    both = spark_lines(" [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE",
                       ["Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA",
                        "Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDRDMA",
                        "Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
                        "Channel 01/0 : 1[0] -> 0[0] [receive] via NET/IB/1(1)/GDRDMA/Shared"])
    facts = facts_of(both)
    assert facts["nccl_verdict"] == "NCCL over RoCE, both HCAs", facts
    one = spark_lines(" [0]rocep1s0f1:1/RoCE",
                      ["Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0", "Channel 01/0 : 0[0] -> 1[0] "
                       "[send] via NET/IB/0"])
    facts = facts_of(one)
    assert facts["nccl_verdict_level"] == "warning" and "one HCA only on spark1 (rocep1s0f1)" in str(
        facts["nccl_verdict"])
    merged = spark_lines(" [0]={[0] rocep1s0f1:1/RoCE, [1] roceP2p1s0f1:1/RoCE}",
                         ["Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0"])
    assert facts_of(merged)["nccl_verdict"] == "NCCL over RoCE, both HCAs"


def test_recorded_channel_lines_after_ready_are_read() -> None:
    """Logs 01 and 02 hold 16 and 18 "via NET/" channel lines; the API server's own ranks' lines come after
    "Application startup complete" (NCCL writes through block-buffered C stdio into the pod's log) and
    still count: every one is read, once, on the bulk path and the live one alike."""
    for name, net, lines in (("01_multinode-ray-tp8pp2-deepseek-v2.5-k8s-lws-ready_v0.8.3.txt", "Socket", 16),
                             ("02_multinode-ray-tp4pp2-llama3.3-70b-cudagraphs-ready_v0.8.3.txt", "IB", 18)):
        text = (DATA / name).read_text()
        assert text.count("via NET/") == lines
        assert facts_of(text)["nccl_channels"] == {net: lines}
        live = Timeline(expected_nodes=2)
        for line in text.splitlines():
            live.feed(parse_line(line))
        assert live.snapshot().facts["nccl_channels"] == {net: lines}


def test_head_channels_printed_after_ready_complete_the_hca_verdict() -> None:
    """A Spark whose head's second-HCA channel line is flushed after ready: both HCAs, not "one HCA only"."""
    devs = " [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE"
    start = spark_lines(devs, ["Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA",
                               "Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDRDMA"])
    start = "\n".join(ln for ln in start.splitlines() if not (ln.startswith(H) and "NET/IB/1" in ln)) + "\n"
    ready = "(APIServer pid=4200) INFO 04-01 10:00:00 [launcher.py:37] Application startup complete.\n"
    t = Timeline(expected_nodes=2)
    t.feed_text(start + ready)
    assert t.snapshot().outcome == "ready"
    assert "one HCA only on spark1" in str(t.snapshot().facts["nccl_verdict"])
    t.feed_text(H + "Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDRDMA\n")
    assert t.snapshot().facts["nccl_verdict"] == "NCCL over RoCE, both HCAs"


def test_the_same_nccl_line_twice_counts_once_on_both_paths() -> None:
    """A line read again (a copy relayed twice, a log captured twice) adds no channel; another rank's does."""
    line = W + "Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0/GDRDMA"
    other = W.replace("5237:5237", "5238:5238") + "Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0/GDRDMA"
    text = "\n".join([line, line, other]) + "\n"
    assert facts_of(text)["nccl_channels"] == {"IB": 2}
    live = Timeline(expected_nodes=2)
    for ln in text.splitlines():
        live.feed(parse_line(ln))
    assert live.snapshot().facts["nccl_channels"] == {"IB": 2}


def test_spark_socket_lines_name_the_node() -> None:
    text = (f"{W}NET/IB : No device found.\n{W}NET/Socket : Using [0]enp1s0f1np1:10.0.0.2<0>\n"
            f"{W}Using network Socket\n{W}Channel 00/0 : 1[0] -> 0[0] [send] via NET/Socket/0\n")
    v = facts_of(text)["nccl_verdict"]
    assert v == SOCKET_WARNING + " on spark2"


@pytest.mark.parametrize("junk", ["NCCL INFO NET/IB : Using", "NCCL INFO via NET/", "NET/Socket : Using",
                                  "x:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/zz",
                                  "\x00\xff NCCL INFO NET/IB : Using [9]:/RoCE; OOB"])
def test_garbage_never_raises(junk: str) -> None:
    facts: dict[str, object] = {}
    observe(junk, None, facts)
    facts_of(junk + "\n")


def test_cross_check_with_roce_counters() -> None:
    ok = NcclVerdict("ok", "NCCL over RoCE, both HCAs")
    assert cross_check(ok, {"rocep1s0f1": True, "roceP2p1s0f1": True}).text.startswith(  # type: ignore[union-attr]
        "NCCL over RoCE, both HCAs (RoCE counters moved")
    half = cross_check(ok, {"rocep1s0f1": True, "roceP2p1s0f1": False})
    assert half is not None and half.level == "warning" and "roceP2p1s0f1 carried no traffic" in half.text
    none = cross_check(ok, {"rocep1s0f1": False, "roceP2p1s0f1": False})
    assert none is not None and "did not move" in none.text
    assert verdict({}) is None and cross_check(None, {"a": True}) is None


async def test_socket_warning_in_the_engine_panel() -> None:
    from sparktui.domain.engine_view import timeline_view
    from sparktui.domain.events import EngineChanged, EngineState
    from tests.ui_fakes import make_app, settle

    t = Timeline(expected_nodes=2)
    t.feed_text(f"{W}NET/Socket : Using [0]enp1s0f1np1:10.0.0.2<0>\n{W}Using network Socket\n")
    app, backend = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot, app)
        backend.post(EngineChanged(EngineState.STARTING, "weights", timeline_view(t.snapshot())))
        await settle(pilot, app)
        text = str(app.query_one("#engine-facts").render())
        assert "NCCL fell back to sockets (expect ~3 GB/s busbw)" in text, text


def test_roce_activity_during_the_start_feeds_the_cross_check() -> None:
    from sparktui.domain.logs.nccl import RoceActivity

    act = RoceActivity()
    act.observe("spark1", {"rocep1s0f1": 0, "roceP2p1s0f1": 0}, "config")          # not yet watched
    act.observe("spark1", {"rocep1s0f1": 10, "roceP2p1s0f1": 10}, "weights")
    act.observe("spark1", {"rocep1s0f1": 10 + 2 * 1024**3, "roceP2p1s0f1": 11}, "kv_cache")
    moved = act.moved()
    assert moved == {"spark1/rocep1s0f1": True, "spark1/roceP2p1s0f1": False}
    checked = cross_check(NcclVerdict("ok", "NCCL over RoCE, both HCAs"), moved)
    assert checked is not None and "spark1/roceP2p1s0f1 carried no traffic" in checked.text
