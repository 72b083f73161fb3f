"""Controller-side telemetry math: parsing, ×4, rates per cable (twins summed), resets, rings, stale."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.domain.telemetry import (
    DATA_UNIT_BYTES,
    NodeTelemetry,
    RateTracker,
    Sample,
    compute_rates,
    group_cables,
    is_error_counter,
)

CABLE = ("rocep1s0f1", "roceP2p1s0f1")
ALL = ("rocep1s0f0", "rocep1s0f1", "roceP2p1s0f0", "roceP2p1s0f1")


def port(dev: str, rcv: int = 0, xmit: int = 0, active: bool = True, **extra: int) -> dict[str, Any]:
    counters: dict[str, int | None] = {"port_rcv_data": rcv, "port_xmit_data": xmit,
                                       "port_rcv_packets": rcv // 1000, "port_xmit_packets": xmit // 1000,
                                       "symbol_error": 0, "link_downed": 0, "port_rcv_errors": 0}
    hw: dict[str, int | None] = {"out_of_sequence": 0, "packet_seq_err": 0, "local_ack_timeout_err": 0,
                                 "np_cnp_sent": 0, "lifespan": 10, "rx_write_requests": 0}
    for k, v in extra.items():
        (counters if k in counters else hw)[k] = v
    return {"device": dev, "port": 1, "state": "ACTIVE" if active else "DOWN", "state_id": 4 if active else 1,
            "phys_state": "LinkUp", "phys_state_id": 5, "rate": "200 Gb/sec (4X HDR)", "rate_gbps": 200.0,
            "link_layer": "Ethernet", "netdev": None, "counters": counters, "hw_counters": hw}


def sample(seq: int, mono: float, ports: list[dict[str, Any]], **over: Any) -> Sample:
    d: dict[str, Any] = {
        "v": 1, "seq": seq, "mono": mono, "wall": 1.8e9 + mono, "host": "spark-a", "interval": 1.0,
        "memory": {"label": "unified memory", "total": 127600748 * 1024, "used": 50 * 2**30,
                   "available": 77 * 2**30},
        "cpu": {"percent": 12.5, "count": 20, "load1": 1.5},
        "gpu": {"source": "nvml", "devices": [{"index": 0, "name": "NVIDIA GB10", "util_percent": 96,
                                               "memory_total": None, "memory_unified": True,
                                               "processes": [{"pid": 1, "used_memory": 5}]}]},
        "rdma": ports, "processes": [], "containers": None, "problems": {},
        "probe": {"pid": 77, "cpu_s": 0.5},
    }
    d.update(over)
    return Sample.from_json(d, received=mono)


def test_from_json_keeps_unknown_as_none() -> None:
    s = sample(1, 10.0, [port("rocep1s0f1", 5, 7)])
    gpu = s.gpu.devices[0]
    assert gpu.memory_total is None and gpu.memory_unified
    assert gpu.util_percent == 96.0 and gpu.process_memory == 5
    assert s.memory.label == "unified memory" and s.memory.total == 127600748 * 1024
    assert s.port("rocep1s0f1") is not None
    assert s.port("rocep1s0f1").tx_bytes_total == 7 * DATA_UNIT_BYTES  # type: ignore[union-attr]
    assert s.probe_cpu_s == 0.5 and s.containers is None


def test_from_json_refuses_other_versions() -> None:
    with pytest.raises(ValueError):
        Sample.from_json({"v": 99, "seq": 1, "mono": 0, "wall": 0})
    with pytest.raises(ValueError):
        Sample.from_json({"v": 1})


def test_group_cables_pairs_spark_twins() -> None:
    cables = group_cables(ALL)
    assert [c.devices for c in cables] == [("rocep1s0f0", "roceP2p1s0f0"), ("rocep1s0f1", "roceP2p1s0f1")]
    configured = group_cables(ALL, CABLE)
    assert configured[0].devices == CABLE and configured[0].name == "rocep1s0f1+roceP2p1s0f1"
    assert group_cables(["mlx5_0", "mlx5_1"])[1].devices == ("mlx5_1",)


def test_rates_multiply_by_four_and_sum_twins() -> None:
    a = sample(1, 100.0, [port(d, 1000, 2000, active=d in CABLE) for d in ALL])
    # 2 s later: twin 1 received 10 GB and twin 2 5 GB (raw counters are octets / 4).
    b = sample(2, 102.0, [
        port("rocep1s0f0", 1000, 2000, active=False),
        port("rocep1s0f1", 1000 + 10_000_000_000 // 4, 2000 + 4_000_000_000 // 4),
        port("roceP2p1s0f0", 1000, 2000, active=False),
        port("roceP2p1s0f1", 1000 + 5_000_000_000 // 4, 2000 + 2_000_000_000 // 4),
    ])
    rates = compute_rates(a, b, configured=CABLE)
    assert rates is not None and rates.seconds == 2.0
    cable = rates.cable("rocep1s0f1+roceP2p1s0f1")
    assert cable is not None
    assert cable.rx_bytes_per_s == pytest.approx(7.5e9)
    assert cable.tx_bytes_per_s == pytest.approx(3e9)
    assert cable.rx_gbps == pytest.approx(60.0)
    assert cable.tx_gbps == pytest.approx(24.0)
    assert cable.active and cable.link_gbps == 200.0   # twins share the port's 200 G
    idle = rates.cable("rocep1s0f0+roceP2p1s0f0")
    assert idle is not None and idle.rx_bytes_per_s == 0 and not idle.active and idle.link_gbps is None


def test_decrease_is_a_reset_and_skips_the_interval() -> None:
    t = NodeTelemetry("spark-a", rdma_devices=CABLE)
    t.update(sample(1, 0.0, [port(d, 10_000, 10_000) for d in CABLE]))
    rates = t.update(sample(2, 1.0, [port("rocep1s0f1", 20_000, 20_000), port("roceP2p1s0f1", 5, 5)]))
    assert rates is not None
    pr = {p.device: p for p in rates.ports}
    assert pr["roceP2p1s0f1"].reset and pr["roceP2p1s0f1"].rx_bytes_per_s is None
    assert not pr["rocep1s0f1"].reset and pr["rocep1s0f1"].rx_bytes_per_s == 40_000
    cable = rates.cables[0]
    assert cable.rx_bytes_per_s is None           # one twin reset: the cable's interval is skipped
    assert len(t.history.cable_rx(cable.name)) == 0
    # The next interval counts again from the new (lower) base.
    rates = t.update(sample(3, 2.0, [port("rocep1s0f1", 30_000, 30_000), port("roceP2p1s0f1", 1005, 5)]))
    assert rates is not None and rates.cables[0].rx_bytes_per_s == (10_000 + 1000) * 4
    assert t.history.cable_rx(cable.name).values() == [pytest.approx(44_000 * 8 / 1e9)]


def test_error_counters_rising_are_reported() -> None:
    t = NodeTelemetry("spark-a", rdma_devices=CABLE)
    t.update(sample(1, 0.0, [port(d) for d in CABLE]))
    rates = t.update(sample(2, 1.0, [port("rocep1s0f1", symbol_error=2, out_of_sequence=5, np_cnp_sent=9,
                                          rx_write_requests=100),
                                     port("roceP2p1s0f1", out_of_sequence=1)]), now=50.0)
    assert rates is not None
    cable = rates.cables[0]
    assert cable.increases == {"symbol_error": 2, "out_of_sequence": 6, "np_cnp_sent": 9}
    assert cable.error_increases == {"symbol_error": 2, "out_of_sequence": 6}
    assert is_error_counter("local_ack_timeout_err") and not is_error_counter("np_cnp_sent")
    assert not is_error_counter("port_xmit_data")
    assert set(t.rising_counters(now=55.0)) == {
        ("rocep1s0f1", "symbol_error"), ("rocep1s0f1", "out_of_sequence"),
        ("rocep1s0f1", "np_cnp_sent"), ("roceP2p1s0f1", "out_of_sequence"),
    }
    assert t.rising_counters(now=100.0) == {}


def test_history_rings_have_fixed_length() -> None:
    t = NodeTelemetry("spark-a", history=5, rdma_devices=CABLE)
    for i in range(12):
        t.update(sample(i + 1, float(i), [port(d, i * 1_000_000, 0) for d in CABLE]))
    assert len(t.history.memory_used) == 5 and t.history.memory_used.maxlen == 5
    assert t.history.gpu_util.values() == [96.0] * 5
    rx = t.history.cable_rx("rocep1s0f1+roceP2p1s0f1").values()
    assert rx == [pytest.approx(2 * 4_000_000 * 8 / 1e9)] * 5


def test_stale_detection() -> None:
    t = NodeTelemetry("spark-a")
    assert t.is_stale(now=0.0, interval=1.0)          # nothing yet
    t.update(sample(1, 10.0, []))                      # received at 10.0
    assert not t.is_stale(now=11.5, interval=1.0)
    assert not t.is_stale(now=14.0, interval=1.0)
    assert t.is_stale(now=14.5, interval=1.0)
    assert not t.is_stale(now=14.5, interval=2.0)


def test_probe_restart_resets_rates_and_problems() -> None:
    t = NodeTelemetry("spark-a")
    t.update(sample(1, 0.0, [port("rocep1s0f1")], problems={"gpu[0].memory_total": "NVML: Not Supported"}))
    assert t.update(sample(2, 1.0, [port("rocep1s0f1", 4, 4)])) is not None
    assert t.problems == {"gpu[0].memory_total": "NVML: Not Supported"}
    # A restarted probe starts at seq 1 again: no rate across the gap, problems said afresh.
    assert t.update(sample(1, 30.0, [port("rocep1s0f1", 8, 8)])) is None
    assert t.problems == {}
    assert t.update(sample(2, 31.0, [port("rocep1s0f1", 12, 12)])) is not None


def test_rate_tracker_first_sample_has_no_rate() -> None:
    tr = RateTracker()
    assert tr.update(sample(1, 0.0, [port("mlx5_0")])) is None
    r = tr.update(sample(2, 0.5, [port("mlx5_0", 100, 0)]))
    assert r is not None and r.cables[0].rx_bytes_per_s == 800.0


def test_to_json_round_trip() -> None:
    t = NodeTelemetry("spark-a", rdma_devices=CABLE)
    t.update(sample(1, 0.0, [port(d) for d in CABLE]))
    t.update(sample(2, 1.0, [port(d, 250, 250) for d in CABLE]))
    out = t.to_json()
    assert out["sample"]["seq"] == 2
    assert out["rates"]["cables"][0]["rx_bytes_per_s"] == 2000.0
    import json
    json.dumps(out)


# ---- properties -----------------------------------------------------------------------------------------

steps = st.lists(
    st.tuples(st.floats(min_value=0.05, max_value=5.0), st.integers(min_value=0, max_value=10**12),
              st.integers(min_value=0, max_value=10**12), st.booleans()),
    min_size=1, max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(steps)
def test_rates_integrate_back_to_the_bytes_sent(seq: list[tuple[float, int, int, bool]]) -> None:
    """Over any run of samples, Σ rate × Δt equals the bytes added (×4 of the raw counter) in the
    intervals that were not resets; a reset interval gives no rate (never a negative one)."""
    t = NodeTelemetry("spark-a", history=1000, rdma_devices=CABLE)
    mono, a, b = 0.0, 10**6, 10**6
    t.update(sample(1, mono, [port(CABLE[0], a), port(CABLE[1], b)]))
    expected = got = 0.0
    for i, (dt, add_a, add_b, reset) in enumerate(seq, start=2):
        mono += dt
        reset = reset and a > 0
        a = a // 2 if reset else a + add_a       # a reset: twin a's counter starts again lower
        b += add_b                               # twin b keeps counting
        rates = t.update(sample(i, mono, [port(CABLE[0], a), port(CABLE[1], b)]))
        assert rates is not None
        cable = rates.cables[0]
        if reset:
            assert cable.rx_bytes_per_s is None
        else:
            assert cable.rx_bytes_per_s is not None and cable.rx_bytes_per_s >= 0
            got += cable.rx_bytes_per_s * rates.seconds
            expected += (add_a + add_b) * DATA_UNIT_BYTES
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-3)
