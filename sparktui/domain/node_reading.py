"""What a node panel shows, read from a telemetry ``Sample`` (``sparktui.domain.telemetry``) on the
producer side.

A backend (SSH or demo) keeps one ``NodeReader`` per node (``NodeFeed``) and posts each sample as
``NodeSampled`` with its ``NodeReading`` (the seam's value type, in ``sparktui.domain.events``): values in
display units, rates (Gb/s per cable, CPU % per process, rising error counters) and the charts' series
from ``NodeTelemetry``'s history. The dashboard renders the reading and computes nothing. ``NodeReader``
is the one place that knows the telemetry module's shapes and its rate tracker, so a change there touches
this file and nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from sparktui.domain.events import CableReading, EventSink, NodeReading, NodeSampled
from sparktui.domain.telemetry import NodeTelemetry, Sample, is_error_counter, process_rows

GIB = 1024**3
#: An error counter stays highlighted this long after it last rose, so a one-off is not missed.
RISING_HOLD_S = 10.0


class NodeReader:
    """Per node: feeds ``NodeTelemetry`` (rates need the previous sample) and reads what the panel shows."""

    def __init__(self, node: str = "", rdma_devices: Sequence[str] = ()) -> None:
        self.telemetry = NodeTelemetry(node, rdma_devices=rdma_devices)

    def read(self, sample: Sample, now: float | None = None) -> NodeReading:
        mono = time.monotonic() if now is None else now
        t = self.telemetry
        t.update(sample, now=mono)
        return reading_from(sample, t, mono)


def reading_from(sample: Sample, telemetry: NodeTelemetry, now: float) -> NodeReading:
    mem = sample.memory
    gpus = sample.gpu.devices
    gpu = gpus[0] if gpus else None
    rates = telemetry.rates
    rising = telemetry.rising_counters(now, RISING_HOLD_S)
    cables: list[CableReading] = []
    if rates is not None:
        for c in rates.cables:
            ports = [p for p in sample.rdma if p.device in c.devices]
            state = "ACTIVE" if c.active else (ports[0].state if ports and ports[0].state else "DOWN")
            errors = sorted(
                (name, c.increases.get(name, 0))
                for (device, name) in rising
                if device in c.devices and is_error_counter(name)
            )
            cables.append(CableReading(
                name=c.name, state=state, rate=f"{c.link_gbps:.0f} Gb/sec" if c.link_gbps else None,
                rx_gbps=c.rx_gbps, tx_gbps=c.tx_gbps, errors_rising=tuple(dict(errors).items()),
            ))
    elif sample.rdma:
        for p in sample.rdma:
            cables.append(CableReading(name=p.device, state=p.state, rate=p.rate))
    gpu_mem_used = gpu_mem_total = None
    if gpu is not None and not gpu.memory_unified:
        gpu_mem_used = None if gpu.memory_used is None else gpu.memory_used / GIB
        gpu_mem_total = None if gpu.memory_total is None else gpu.memory_total / GIB
    kinds = sorted({p.kind for p in sample.processes if p.kind})
    return NodeReading(
        mem_total_gib=None if mem.total is None else mem.total / GIB,
        mem_used_gib=None if mem.used is None else mem.used / GIB,
        mem_available_gib=None if mem.available is None else mem.available / GIB,
        cpu_percent=sample.cpu.percent,
        gpu_name=gpu.name if gpu else None,
        gpu_util=max((g.util_percent for g in gpus if g.util_percent is not None), default=None),
        gpu_temp_c=gpu.temperature_c if gpu else None,
        gpu_power_w=gpu.power_w if gpu else None,
        gpu_clock_mhz=gpu.sm_clock_mhz if gpu else None,
        gpu_clock_max_mhz=gpu.sm_clock_max_mhz if gpu else None,
        gpu_clock_events=tuple(dict.fromkeys(name for g in gpus for name in g.clock_events)),
        gpu_xids=tuple(x.xid for g in gpus for x in (g.xid_errors or ())),
        gpu_mem_used_gib=gpu_mem_used,
        gpu_mem_total_gib=gpu_mem_total,
        gpu_missing=None if gpu else (sample.gpu.reason or "no GPU"),
        cables=tuple(cables),
        processes=tuple(kinds),
        process_rows=process_rows(sample, telemetry.process_cpu),
        mem_history=tuple(telemetry.history.mem_percent.values()),
        gpu_history=tuple(telemetry.history.gpu_busy.values()),
        roce_history=tuple(telemetry.history.traffic_gbps.values()),
        mem_history_end=telemetry.history.mem_percent.end,
        gpu_history_end=telemetry.history.gpu_busy.end,
        roce_history_end=telemetry.history.traffic_gbps.end,
    )


class NodeFeed:
    """The producer side of ``NodeSampled``: a ``NodeReader`` per node; each sample goes with its reading,
    posted to ``post`` when one is given (the probe runner feeds it, so a sample reaches its panel without
    passing through the backend), and returned."""

    def __init__(self, post: EventSink | None = None) -> None:
        self._readers: dict[str, NodeReader] = {}
        self._post = post

    def sampled(self, node: str, sample: Sample, now: float | None = None) -> NodeSampled:
        reader = self._readers.get(node)
        if reader is None:
            reader = self._readers[node] = NodeReader(node)
        event = NodeSampled(node, reader.read(sample, now), sample, reader.telemetry.rates)
        if self._post is not None:
            self._post(event)
        return event
