"""Node telemetry on the controller side: the probe's JSON lines as typed samples, and the math on them.

The node-side probe (``sparktui/probe.py``) prints one JSON object per interval. This module turns each
into a frozen :class:`Sample`, and :class:`NodeTelemetry` turns successive samples into what the
dashboard shows: RoCE rates per cable (the two RDMA devices of one Spark cable summed), error counters
that rose since the previous sample, fixed-length history rings for sparklines, and stale detection.

Units: memory and traffic in bytes (and bytes/s); link speeds and traffic rates also in Gb/s
(10^9 bit/s). ``port_xmit_data``/``port_rcv_data`` arrive raw (octets / 4, as the kernel exposes them);
the ×4 happens here, once.

Pure code: standard library only.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Version of the probe's JSON object (``"v"``); a mismatch is refused rather than misread.
SCHEMA_VERSION = 1

#: ``port_xmit_data``/``port_rcv_data`` count octets divided by 4 (kernel ABI; mlx5 ``>> 2``).
DATA_UNIT_BYTES = 4

#: Samples kept for sparklines (two minutes at 1 Hz).
DEFAULT_HISTORY = 120

#: A sample older than this many intervals (plus a small allowance for the link) is stale.
STALE_INTERVALS = 3.0
STALE_SLACK_S = 1.0

#: ``counters/`` files that count traffic, not trouble.
TRAFFIC_COUNTERS = frozenset({
    "port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets",
    "unicast_xmit_packets", "unicast_rcv_packets", "multicast_xmit_packets", "multicast_rcv_packets",
    "port_xmit_wait",
})
#: ``hw_counters/`` files that are activity or settings rather than faults.
HW_INFORMATIONAL = frozenset({
    "lifespan", "rx_read_requests", "rx_write_requests", "rx_atomic_requests", "rx_dct_connect",
})
#: ``hw_counters/`` that signal congestion control at work (highlighted, but not as errors).
HW_CONGESTION = frozenset({
    "np_cnp_sent", "np_ecn_marked_roce_packets", "rp_cnp_handled", "rp_cnp_ignored",
    "roce_slow_restart_cnps",
})


# ---- sample types ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class MemoryPressure:
    """``/proc/pressure/memory``: share of time (%) some / all tasks stalled on memory."""

    some_avg10: float | None = None
    some_avg60: float | None = None
    some_avg300: float | None = None
    some_total_us: int | None = None
    full_avg10: float | None = None
    full_avg60: float | None = None
    full_avg300: float | None = None
    full_total_us: int | None = None


@dataclass(frozen=True)
class MemorySample:
    """Unified memory (CPU and GPU share it on GB10), in bytes, from ``/proc/meminfo``.

    ``used`` is MemTotal − MemAvailable; when HugePages are configured (``basis == "hugepages"``)
    available is HugePages_Free × Hugepagesize and swap is reported as 0, as NVIDIA advises for Spark.
    """

    label: str = "unified memory"
    total: int | None = None
    used: int | None = None
    available: int | None = None
    free: int | None = None
    cached: int | None = None
    buffers: int | None = None
    swap_total: int | None = None
    swap_used: int | None = None
    basis: str = "memavailable"
    hugepages_total: int | None = None
    hugepages_free: int | None = None
    hugepage_size: int | None = None
    pressure: MemoryPressure | None = None

    @property
    def used_fraction(self) -> float | None:
        if not self.total or self.used is None:
            return None
        return self.used / self.total


@dataclass(frozen=True)
class CpuSample:
    percent: float | None = None
    count: int | None = None
    load1: float | None = None


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    name: str = ""
    used_memory: int | None = None


#: NVML clock-event ("throttle") reason bits (``nvmlClocksEventReason*`` in nvml.h / pynvml) → what the
#: node panel says. GpuIdle is not a slowdown worth showing: a resting GPU clocks down.
CLOCK_EVENT_BITS: tuple[tuple[int, str], ...] = (
    (0x0001, "idle"),
    (0x0002, "applications clocks"),
    (0x0004, "SW power cap"),
    (0x0008, "HW slowdown"),
    (0x0010, "sync boost"),
    (0x0020, "SW thermal"),
    (0x0040, "HW thermal"),
    (0x0080, "HW power brake"),
    (0x0100, "display clock"),
)
CLOCK_EVENT_IDLE = 0x0001


def clock_event_names(mask: int | None, *, include_idle: bool = False) -> tuple[str, ...]:
    """Names of the bits set in an NVML clock-event reason mask (unknown bits as hex)."""
    if not mask:
        return ()
    names = [name for bit, name in CLOCK_EVENT_BITS
             if mask & bit and (include_idle or bit != CLOCK_EVENT_IDLE)]
    known = sum(bit for bit, _ in CLOCK_EVENT_BITS)
    if mask & ~known:
        names.append(f"0x{mask & ~known:x}")
    return tuple(names)


@dataclass(frozen=True)
class XidError:
    """An Xid critical error NVML reported (``nvmlEventTypeXidCriticalError``): number and node wall time."""

    xid: int
    wall: float | None = None


@dataclass(frozen=True)
class GpuDevice:
    """One GPU. ``None`` means unknown (NVML said Not Supported or failed; the reason is in
    ``Sample.problems`` once) — never a made-up 0."""

    index: int
    name: str | None = None
    uuid: str | None = None
    util_percent: float | None = None
    memory_util_percent: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_mhz: float | None = None
    mem_clock_max_mhz: float | None = None
    #: NVML clock-event reason bitmask (``None``: not read); see :func:`clock_event_names`.
    clock_event_reasons: int | None = None
    #: Xid errors reported since the probe started; ``None`` when NVML offers no Xid events.
    xid_errors: tuple[XidError, ...] | None = None
    memory_total: int | None = None
    memory_used: int | None = None
    memory_free: int | None = None
    #: The GPU uses the host's memory (GB10): its memory is the unified memory panel.
    memory_unified: bool = False
    processes: tuple[GpuProcess, ...] = ()

    @property
    def clock_events(self) -> tuple[str, ...]:
        """Active slowdown reasons (idle left out), e.g. ``("SW power cap",)``."""
        return clock_event_names(self.clock_event_reasons)

    @property
    def process_memory(self) -> int | None:
        """GPU-held memory: the sum of per-process ``usedGpuMemory`` (works on GB10)."""
        known = [p.used_memory for p in self.processes if p.used_memory is not None]
        return sum(known) if known else None


@dataclass(frozen=True)
class GpuSample:
    #: ``"nvml"``, ``"nvidia-smi"`` (fallback when NVML is missing) or ``"none"`` (no GPU).
    source: str = "none"
    devices: tuple[GpuDevice, ...] = ()
    #: Why there is no GPU data (``source == "none"``), e.g. "no NVIDIA driver (NVML not found)".
    reason: str | None = None
    driver_version: str | None = None


@dataclass(frozen=True)
class RdmaPort:
    """One port of one RDMA device (``/sys/class/infiniband/<device>/ports/<port>/``)."""

    device: str
    port: int
    state: str | None = None           # "ACTIVE"
    state_id: int | None = None        # 4
    phys_state: str | None = None      # "LinkUp"
    phys_state_id: int | None = None   # 5
    rate: str | None = None            # "200 Gb/sec (4X HDR)"
    rate_gbps: float | None = None     # 200.0
    link_layer: str | None = None      # "Ethernet" for RoCE
    netdev: str | None = None          # "enp1s0f1np1"
    #: ``counters/<name>`` raw values by exact file name (``None`` = unreadable, e.g. "N/A (no PMA)").
    counters: Mapping[str, int | None] = field(default_factory=dict)
    #: ``hw_counters/<name>`` raw values.
    hw_counters: Mapping[str, int | None] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.device}/{self.port}"

    @property
    def active(self) -> bool:
        return self.state_id == 4 or (self.state or "").upper() == "ACTIVE"

    @property
    def rx_bytes_total(self) -> int | None:
        raw = self.counters.get("port_rcv_data")
        return None if raw is None else raw * DATA_UNIT_BYTES

    @property
    def tx_bytes_total(self) -> int | None:
        raw = self.counters.get("port_xmit_data")
        return None if raw is None else raw * DATA_UNIT_BYTES


@dataclass(frozen=True)
class NodeProcess:
    """A Ray/vLLM process of ours seen on the node."""

    pid: int
    name: str
    kind: str                 # "vllm" | "ray-worker" | "raylet" | "gcs_server" | "ray"
    cmdline: str = ""
    rss: int | None = None
    #: utime + stime so far (seconds) and when the probe read them (the node's monotonic clock): CPU % is
    #: the delta between two readings (``NodeTelemetry.process_cpu``).
    cpu_seconds: float | None = None
    read_at: float | None = None


@dataclass(frozen=True)
class ContainerSample:
    name: str
    id: str = ""
    image: str = ""
    status: str = ""


@dataclass(frozen=True)
class EngineApiReading:
    """The engine's ``/health`` and ``/metrics`` as the head's probe read them beside it
    (``sparktui.probe.EngineApiReader``): the serving watch's evidence, without a request of its own."""

    #: Grows by one a reading within one probe process (a reading seen again: the API is slow to answer).
    id: int
    #: The node's monotonic clock when the reading began.
    mono: float
    #: HTTP status of ``/health``; ``None`` when nothing answered.
    health_status: int | None
    health_seconds: float
    #: "connection refused (…)", "timed out after 5s (…)", "HTTP 503" …; empty when healthy.
    health_error: str = ""
    #: The wanted families of ``/metrics`` (read only after a healthy ``/health``).
    metrics: str | None = None
    #: Whether the whole scrape held vLLM's own stats (``metrics`` alone cannot say when it is empty).
    stats_enabled: bool = True
    metrics_error: str = ""

    @property
    def healthy(self) -> bool:
        return self.health_status == 200


@dataclass(frozen=True)
class Sample:
    """One probe reading of one node."""

    seq: int
    #: The node's monotonic clock (seconds); rates use differences of it.
    mono: float
    #: The node's wall clock (Unix seconds).
    wall: float
    host: str = ""
    interval: float = 1.0
    memory: MemorySample = field(default_factory=MemorySample)
    cpu: CpuSample = field(default_factory=CpuSample)
    gpu: GpuSample = field(default_factory=GpuSample)
    rdma: tuple[RdmaPort, ...] = ()
    processes: tuple[NodeProcess, ...] = ()
    #: ``None`` when containers are not known (no docker on the node, or not checked yet).
    containers: tuple[ContainerSample, ...] | None = None
    #: Values that could not be read: path → reason. The probe says each once (when it first fails
    #: or its reason changes); :class:`NodeTelemetry` keeps the collected set.
    problems: Mapping[str, str] = field(default_factory=dict)
    #: Paths of earlier problems whose values read again.
    resolved: tuple[str, ...] = ()
    #: CPU seconds the probe itself has used (user + system), to keep its cost visible.
    probe_cpu_s: float | None = None
    probe_pid: int | None = None
    #: The head's probe only (``--engine-port``): its last reading of the engine's API; ``None`` before
    #: the first one finished.
    engine_api: EngineApiReading | None = None
    #: Controller's ``time.monotonic()`` when the line arrived (set by the probe runner).
    received: float | None = None
    #: The JSON object as received (for ``status --json``).
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], received: float | None = None) -> Sample:
        """Parse one probe line (already ``json.loads``-ed). Raises ``ValueError`` on a foreign shape."""
        if not isinstance(data, Mapping):
            raise ValueError("probe sample is not a JSON object")
        version = data.get("v")
        if version != SCHEMA_VERSION:
            raise ValueError(f"probe sample version {version!r}, expected {SCHEMA_VERSION}")
        try:
            return cls(
                seq=int(data["seq"]),
                mono=float(data["mono"]),
                wall=float(data["wall"]),
                host=str(data.get("host") or ""),
                interval=float(data.get("interval") or 1.0),
                memory=_memory(data.get("memory") or {}),
                cpu=_cpu(data.get("cpu") or {}),
                gpu=_gpu(data.get("gpu") or {}),
                rdma=tuple(_port(p) for p in data.get("rdma") or ()),
                processes=tuple(_process(p) for p in data.get("processes") or ()),
                containers=(None if data.get("containers") is None
                            else tuple(_container(c) for c in data["containers"])),
                problems={str(k): str(v) for k, v in (data.get("problems") or {}).items()},
                resolved=tuple(str(p) for p in data.get("resolved") or ()),
                probe_cpu_s=_float((data.get("probe") or {}).get("cpu_s")),
                probe_pid=_int((data.get("probe") or {}).get("pid")),
                engine_api=_engine_api(data.get("engine_api")),
                received=received,
                raw=data,
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed probe sample: {exc!r}") from None

    def is_stale(self, now: float, interval: float | None = None) -> bool:
        """True when no newer sample should have been expected by ``now`` (controller monotonic time)."""
        if self.received is None:
            return False
        return is_stale(self.received, now, interval if interval is not None else self.interval)

    def port(self, device: str, port: int = 1) -> RdmaPort | None:
        for p in self.rdma:
            if p.device == device and p.port == port:
                return p
        return None


def stale_seconds(received: float | None, now: float, interval: float) -> float | None:
    """How long no sample has come, once that is longer than a few intervals (the one staleness rule;
    evaluated when drawn, never on arrival); None while fresh or before the first sample."""
    if received is None:
        return None
    age = now - received
    return age if age > STALE_INTERVALS * interval + STALE_SLACK_S else None


def is_stale(received: float, now: float, interval: float) -> bool:
    return stale_seconds(received, now, interval) is not None


# ---- parsing helpers (tolerant: a missing or odd field is None, not an exception) ---------------------
def _engine_api(data: Any) -> EngineApiReading | None:
    """A reading of a foreign shape is no reading (the node's own readings in the sample still count)."""
    reading_id = _int(data.get("id")) if isinstance(data, Mapping) else None
    if reading_id is None:
        return None
    health = data.get("health")
    health = health if isinstance(health, Mapping) else {}
    metrics = data.get("metrics")
    return EngineApiReading(
        id=reading_id, mono=_float(data.get("mono")) or 0.0,
        health_status=_int(health.get("status")), health_seconds=_float(health.get("seconds")) or 0.0,
        health_error=str(health.get("error") or ""),
        metrics=metrics if isinstance(metrics, str) else None,
        stats_enabled=data.get("stats") is not False,
        metrics_error=str(data.get("metrics_error") or ""))


def _int(v: Any) -> int | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _float(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


def _memory(d: Mapping[str, Any]) -> MemorySample:
    psi = d.get("pressure")
    pressure = None
    if isinstance(psi, Mapping):
        pressure = MemoryPressure(
            some_avg10=_float(psi.get("some_avg10")), some_avg60=_float(psi.get("some_avg60")),
            some_avg300=_float(psi.get("some_avg300")), some_total_us=_int(psi.get("some_total_us")),
            full_avg10=_float(psi.get("full_avg10")), full_avg60=_float(psi.get("full_avg60")),
            full_avg300=_float(psi.get("full_avg300")), full_total_us=_int(psi.get("full_total_us")),
        )
    return MemorySample(
        label=str(d.get("label") or "unified memory"),
        total=_int(d.get("total")), used=_int(d.get("used")), available=_int(d.get("available")),
        free=_int(d.get("free")), cached=_int(d.get("cached")), buffers=_int(d.get("buffers")),
        swap_total=_int(d.get("swap_total")), swap_used=_int(d.get("swap_used")),
        basis=str(d.get("basis") or "memavailable"),
        hugepages_total=_int(d.get("hugepages_total")), hugepages_free=_int(d.get("hugepages_free")),
        hugepage_size=_int(d.get("hugepage_size")), pressure=pressure,
    )


def _cpu(d: Mapping[str, Any]) -> CpuSample:
    return CpuSample(percent=_float(d.get("percent")), count=_int(d.get("count")),
                     load1=_float(d.get("load1")))


def _gpu(d: Mapping[str, Any]) -> GpuSample:
    devices = []
    for g in d.get("devices") or ():
        procs = tuple(
            GpuProcess(pid=int(p["pid"]), name=str(p.get("name") or ""),
                       used_memory=_int(p.get("used_memory")))
            for p in g.get("processes") or ()
        )
        devices.append(GpuDevice(
            index=int(g.get("index") or 0), name=_str(g.get("name")), uuid=_str(g.get("uuid")),
            util_percent=_float(g.get("util_percent")),
            memory_util_percent=_float(g.get("memory_util_percent")),
            temperature_c=_float(g.get("temperature_c")), power_w=_float(g.get("power_w")),
            sm_clock_mhz=_float(g.get("sm_clock_mhz")),
            sm_clock_max_mhz=_float(g.get("sm_clock_max_mhz")),
            mem_clock_mhz=_float(g.get("mem_clock_mhz")),
            mem_clock_max_mhz=_float(g.get("mem_clock_max_mhz")),
            clock_event_reasons=_int(g.get("clock_event_reasons")),
            xid_errors=_xids(g.get("xid_errors")),
            memory_total=_int(g.get("memory_total")), memory_used=_int(g.get("memory_used")),
            memory_free=_int(g.get("memory_free")), memory_unified=bool(g.get("memory_unified")),
            processes=procs,
        ))
    return GpuSample(source=str(d.get("source") or "none"), devices=tuple(devices),
                     reason=_str(d.get("reason")), driver_version=_str(d.get("driver_version")))


def _xids(v: Any) -> tuple[XidError, ...] | None:
    if not isinstance(v, list):
        return None
    return tuple(XidError(xid=x, wall=_float(e.get("wall")))
                 for e in v if isinstance(e, Mapping) and (x := _int(e.get("xid"))) is not None)


def _counter_map(d: Any) -> dict[str, int | None]:
    if not isinstance(d, Mapping):
        return {}
    return {str(k): _int(v) for k, v in d.items()}


def _port(d: Mapping[str, Any]) -> RdmaPort:
    return RdmaPort(
        device=str(d["device"]), port=int(d.get("port") or 1),
        state=_str(d.get("state")), state_id=_int(d.get("state_id")),
        phys_state=_str(d.get("phys_state")), phys_state_id=_int(d.get("phys_state_id")),
        rate=_str(d.get("rate")), rate_gbps=_float(d.get("rate_gbps")),
        link_layer=_str(d.get("link_layer")), netdev=_str(d.get("netdev")),
        counters=_counter_map(d.get("counters")), hw_counters=_counter_map(d.get("hw_counters")),
    )


def _process(d: Mapping[str, Any]) -> NodeProcess:
    return NodeProcess(pid=int(d["pid"]), name=str(d.get("name") or ""), kind=str(d.get("kind") or ""),
                       cmdline=str(d.get("cmdline") or ""), rss=_int(d.get("rss")),
                       cpu_seconds=_float(d.get("cpu_s")), read_at=_float(d.get("at")))


def _container(d: Mapping[str, Any]) -> ContainerSample:
    return ContainerSample(name=str(d.get("name") or ""), id=str(d.get("id") or ""),
                     image=str(d.get("image") or ""), status=str(d.get("status") or ""))


# ---- cables ---------------------------------------------------------------------------------------
# Spark RDMA names: roce + optional "P<domain>" + p<bus>s<slot>f<function>. The two devices of one QSFP
# cage share the function number (rocep1s0f1 and roceP2p1s0f1 are the two halves of cable 1).
_SPARK_RDMA = re.compile(r"^roce(?:P\d+)?p\d+s\d+f(?P<func>\d+)$")


@dataclass(frozen=True)
class Cable:
    """The RDMA devices whose traffic adds up to one physical link."""

    name: str
    devices: tuple[str, ...]


def group_cables(devices: Iterable[str], configured: Sequence[str] = ()) -> tuple[Cable, ...]:
    """Group RDMA devices into cables.

    ``configured`` (the node's ``rdma_devices``) forms one cable when given. The rest pair up by the Spark
    naming rule (same PCI function on both PCI domains); any other name is a cable of its own.
    """
    seen = list(dict.fromkeys(devices))
    cables: list[Cable] = []
    rest = seen
    if configured:
        cables.append(Cable("+".join(configured), tuple(configured)))
        rest = [d for d in seen if d not in configured]
    groups: dict[str, list[str]] = {}
    for dev in rest:
        m = _SPARK_RDMA.match(dev)
        key = f"f{m['func']}" if m else dev
        groups.setdefault(key, []).append(dev)
    # Stable names whatever order sysfs lists them in: the PCI-domain-0 device first (rocep1s0f1 before
    # roceP2p1s0f1), cables by function number.
    for key in sorted(groups):
        members = sorted(groups[key], key=lambda d: (bool(re.match(r"^roceP\d", d)), d))
        cables.append(Cable("+".join(members), tuple(members)))
    return tuple(cables)


# ---- rates ----------------------------------------------------------------------------------------
def gbps(bytes_per_s: float | None) -> float | None:
    return None if bytes_per_s is None else bytes_per_s * 8 / 1e9


@dataclass(frozen=True)
class PortRate:
    device: str
    port: int
    rx_bytes_per_s: float | None
    tx_bytes_per_s: float | None
    rx_packets_per_s: float | None
    tx_packets_per_s: float | None
    #: Error/congestion counters that rose this interval: exact file name → increase.
    increases: Mapping[str, int] = field(default_factory=dict)
    #: A counter went down (driver reload, link flap): this interval is skipped for this port.
    reset: bool = False

    @property
    def rx_gbps(self) -> float | None:
        return gbps(self.rx_bytes_per_s)

    @property
    def tx_gbps(self) -> float | None:
        return gbps(self.tx_bytes_per_s)


@dataclass(frozen=True)
class CableRate:
    name: str
    devices: tuple[str, ...]
    #: Summed over the cable's devices; ``None`` when a device reset or has no readable counter.
    rx_bytes_per_s: float | None
    tx_bytes_per_s: float | None
    #: Counter name → increase summed over the cable's devices.
    increases: Mapping[str, int] = field(default_factory=dict)
    #: The cable's link speed (Gb/s): the fastest active device's. A GB10 cable's two PCIe "twins" each
    #: report the port's 200 Gb/sec in sysfs, but they share it (each carries ≤ 100 G; both together make
    #: the 200 G), so a sum would claim 400 G. ``None`` when none is active.
    link_gbps: float | None = None
    active: bool = False

    @property
    def rx_gbps(self) -> float | None:
        return gbps(self.rx_bytes_per_s)

    @property
    def tx_gbps(self) -> float | None:
        return gbps(self.tx_bytes_per_s)

    @property
    def error_increases(self) -> dict[str, int]:
        return {k: v for k, v in self.increases.items() if is_error_counter(k)}


def is_error_counter(name: str) -> bool:
    """An error counter (highlight in red when rising), as opposed to traffic, settings or congestion."""
    return name not in TRAFFIC_COUNTERS and name not in HW_INFORMATIONAL and name not in HW_CONGESTION


@dataclass(frozen=True)
class Rates:
    """What changed between two samples of one node."""

    seconds: float
    ports: tuple[PortRate, ...]
    cables: tuple[CableRate, ...]
    cpu_percent: float | None = None

    def cable(self, name: str) -> CableRate | None:
        return next((c for c in self.cables if c.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "cables": [
                {"name": c.name, "devices": list(c.devices), "active": c.active, "link_gbps": c.link_gbps,
                 "rx_bytes_per_s": c.rx_bytes_per_s, "tx_bytes_per_s": c.tx_bytes_per_s,
                 "rx_gbps": c.rx_gbps, "tx_gbps": c.tx_gbps, "increases": dict(c.increases)}
                for c in self.cables
            ],
            "ports": [
                {"device": p.device, "port": p.port, "reset": p.reset,
                 "rx_bytes_per_s": p.rx_bytes_per_s, "tx_bytes_per_s": p.tx_bytes_per_s,
                 "rx_packets_per_s": p.rx_packets_per_s, "tx_packets_per_s": p.tx_packets_per_s,
                 "increases": dict(p.increases)}
                for p in self.ports
            ],
        }


def _delta(prev: Mapping[str, int | None], cur: Mapping[str, int | None], name: str) -> int | None:
    a, b = prev.get(name), cur.get(name)
    if a is None or b is None:
        return None
    return b - a


def port_rate(prev: RdmaPort, cur: RdmaPort, seconds: float) -> PortRate:
    """Rates of one port over ``seconds``; any counter going down marks the interval as a reset."""
    reset = False
    increases: dict[str, int] = {}
    for group_prev, group_cur in ((prev.counters, cur.counters), (prev.hw_counters, cur.hw_counters)):
        for name in group_cur:
            d = _delta(group_prev, group_cur, name)
            if d is None:
                continue
            if d < 0:
                reset = True
            elif d > 0 and name not in TRAFFIC_COUNTERS and name not in HW_INFORMATIONAL:
                increases[name] = d

    def per_s(name: str, scale: int = 1) -> float | None:
        d = _delta(prev.counters, cur.counters, name)
        if reset or d is None or seconds <= 0:
            return None
        return d * scale / seconds

    return PortRate(
        device=cur.device, port=cur.port,
        rx_bytes_per_s=per_s("port_rcv_data", DATA_UNIT_BYTES),
        tx_bytes_per_s=per_s("port_xmit_data", DATA_UNIT_BYTES),
        rx_packets_per_s=per_s("port_rcv_packets"), tx_packets_per_s=per_s("port_xmit_packets"),
        increases={} if reset else increases, reset=reset,
    )


def _sum(values: Iterable[float | None]) -> float | None:
    vals = list(values)
    if not vals or any(v is None for v in vals):
        return None
    return float(sum(v for v in vals if v is not None))


def compute_rates(prev: Sample, cur: Sample, cables: Sequence[Cable] | None = None,
                  configured: Sequence[str] = ()) -> Rates | None:
    """Rates between two samples of one node; ``None`` if they are not in order (probe restarted)."""
    seconds = cur.mono - prev.mono
    if seconds <= 0:
        return None
    prev_ports = {p.key: p for p in prev.rdma}
    ports = tuple(port_rate(prev_ports[p.key], p, seconds) for p in cur.rdma if p.key in prev_ports)
    if cables is None:
        cables = group_cables((p.device for p in cur.rdma), configured)
    by_device: dict[str, list[PortRate]] = {}
    for pr in ports:
        by_device.setdefault(pr.device, []).append(pr)
    cur_by_device: dict[str, list[RdmaPort]] = {}
    for p in cur.rdma:
        cur_by_device.setdefault(p.device, []).append(p)
    cable_rates = []
    for cable in cables:
        members = [pr for d in cable.devices for pr in by_device.get(d, [])]
        live = [p for d in cable.devices for p in cur_by_device.get(d, [])]
        increases: dict[str, int] = {}
        for pr in members:
            for k, v in pr.increases.items():
                increases[k] = increases.get(k, 0) + v
        active_speeds = [p.rate_gbps for p in live if p.active and p.rate_gbps is not None]
        cable_rates.append(CableRate(
            name=cable.name, devices=cable.devices,
            rx_bytes_per_s=_sum(pr.rx_bytes_per_s for pr in members) if members else None,
            tx_bytes_per_s=_sum(pr.tx_bytes_per_s for pr in members) if members else None,
            increases=increases,
            link_gbps=max(active_speeds) if active_speeds else None,
            active=any(p.active for p in live),
        ))
    return Rates(seconds=seconds, ports=ports, cables=tuple(cable_rates), cpu_percent=cur.cpu.percent)


# ---- history and per-node state -------------------------------------------------------------------
class Ring:
    """A fixed-length series for a sparkline (oldest first), and how many values it has taken in all
    (``end``: the place after the newest, so a chart can cut its columns at fixed places in time)."""

    def __init__(self, maxlen: int = DEFAULT_HISTORY) -> None:
        self._values: deque[float] = deque(maxlen=maxlen)
        self.end = 0

    def append(self, value: float | None) -> None:
        if value is not None:
            self._values.append(float(value))
            self.end += 1

    @property
    def maxlen(self) -> int:
        return self._values.maxlen or 0

    def values(self) -> list[float]:
        return list(self._values)

    @property
    def last(self) -> float | None:
        return self._values[-1] if self._values else None

    def __len__(self) -> int:
        return len(self._values)


@dataclass
class History:
    """Sparkline series of one node. Memory in bytes, GPU in %, traffic in Gb/s per cable."""

    maxlen: int = DEFAULT_HISTORY
    memory_used: Ring = field(init=False)
    gpu_util: Ring = field(init=False)
    cpu_percent: Ring = field(init=False)
    rx_gbps: dict[str, Ring] = field(init=False, default_factory=dict)
    tx_gbps: dict[str, Ring] = field(init=False, default_factory=dict)
    #: The node panel's charts, one point per sample: memory used % (when the total is known), GPU busy %
    #: (0 when unknown, so the chart keeps time), all cables' rx+tx in Gb/s (0 before the first rate).
    mem_percent: Ring = field(init=False)
    gpu_busy: Ring = field(init=False)
    traffic_gbps: Ring = field(init=False)

    def __post_init__(self) -> None:
        self.memory_used = Ring(self.maxlen)
        self.gpu_util = Ring(self.maxlen)
        self.cpu_percent = Ring(self.maxlen)
        self.mem_percent = Ring(self.maxlen)
        self.gpu_busy = Ring(self.maxlen)
        self.traffic_gbps = Ring(self.maxlen)

    def cable_rx(self, cable: str) -> Ring:
        return self.rx_gbps.setdefault(cable, Ring(self.maxlen))

    def cable_tx(self, cable: str) -> Ring:
        return self.tx_gbps.setdefault(cable, Ring(self.maxlen))


class RateTracker:
    """Turns successive samples of one node into :class:`Rates` (``None`` for the first sample)."""

    def __init__(self, configured_cable: Sequence[str] = ()) -> None:
        self.configured_cable = tuple(configured_cable)
        self._prev: Sample | None = None

    def update(self, sample: Sample) -> Rates | None:
        prev, self._prev = self._prev, sample
        if prev is None:
            return None
        return compute_rates(prev, sample, configured=self.configured_cable)

    def reset(self) -> None:
        self._prev = None


@dataclass(frozen=True)
class ProcessRow:
    """One of our processes as the process view lists it."""

    pid: int
    name: str
    kind: str
    cmdline: str
    cpu_percent: float | None     # over the time between the last two samples that listed it
    rss: int | None
    gpu_memory: int | None        # what NVML reports for the pid (None where it reports nothing)


def process_rows(sample: Sample, cpu_percent: Mapping[int, float]) -> tuple[ProcessRow, ...]:
    """Our processes in ``sample``, with their CPU % (``NodeTelemetry.process_cpu``) and the GPU memory NVML
    attributes to each pid."""
    gpu_mem: dict[int, int] = {}
    for g in sample.gpu.devices:
        for gp in g.processes:
            if gp.used_memory is not None:
                gpu_mem[gp.pid] = gpu_mem.get(gp.pid, 0) + gp.used_memory
    return tuple(ProcessRow(p.pid, p.name, p.kind, p.cmdline, cpu_percent.get(p.pid), p.rss,
                            gpu_mem.get(p.pid)) for p in sample.processes)


class NodeTelemetry:
    """Everything the dashboard shows about one node's telemetry, updated one sample at a time."""

    def __init__(
        self, node: str, *, history: int = DEFAULT_HISTORY, rdma_devices: Sequence[str] = ()
    ) -> None:
        self.node = node
        self.latest: Sample | None = None
        self.rates: Rates | None = None
        self.history = History(history)
        #: Every unreadable value reported so far: path → reason (the probe says each only once).
        self.problems: dict[str, str] = {}
        #: (device, counter) → controller time of its last increase, for "rising" highlights.
        self.rising: dict[tuple[str, str], float] = {}
        self._tracker = RateTracker(rdma_devices)
        #: pid → CPU % between its last two readings; pid → (cpu seconds, read at) of the last one.
        self.process_cpu: dict[int, float] = {}
        self._cpu_read: dict[int, tuple[float, float]] = {}

    def update(self, sample: Sample, now: float | None = None) -> Rates | None:
        if self.latest is not None and sample.seq <= self.latest.seq:
            # A new probe process (restart after a reconnect): counters continue but seq restarts.
            self._tracker.reset()
            self.problems.clear()
        for path in sample.resolved:
            self.problems.pop(path, None)
        self.problems.update(sample.problems)
        rates = self._tracker.update(sample)
        self._update_process_cpu(sample)
        self.latest = sample
        self.rates = rates
        when = now if now is not None else sample.received
        h = self.history
        h.memory_used.append(sample.memory.used)
        utils = [g.util_percent for g in sample.gpu.devices if g.util_percent is not None]
        h.gpu_util.append(max(utils) if utils else None)
        h.cpu_percent.append(sample.cpu.percent)
        mem = sample.memory
        # In GiB, as the panel's text line divides (the same float to the last bit).
        h.mem_percent.append(100.0 * (mem.used / 1024**3) / (mem.total / 1024**3)
                             if mem.total and mem.used is not None else None)
        h.gpu_busy.append(max(utils) if utils else 0.0)
        h.traffic_gbps.append(sum((c.rx_gbps or 0.0) + (c.tx_gbps or 0.0) for c in rates.cables)
                              if rates is not None else 0.0)
        if rates is not None:
            for c in rates.cables:
                h.cable_rx(c.name).append(c.rx_gbps)
                h.cable_tx(c.name).append(c.tx_gbps)
            if when is not None:
                for pr in rates.ports:
                    for name in pr.increases:
                        self.rising[(pr.device, name)] = when
        return rates

    def _update_process_cpu(self, sample: Sample) -> None:
        """The probe re-reads processes every few seconds and repeats the list in between: a new reading
        is one with a new ``read_at``."""
        seen = set()
        for p in sample.processes:
            seen.add(p.pid)
            if p.cpu_seconds is None or p.read_at is None:
                continue
            last = self._cpu_read.get(p.pid)
            if last is not None and p.read_at > last[1] and p.cpu_seconds >= last[0]:
                self.process_cpu[p.pid] = 100.0 * (p.cpu_seconds - last[0]) / (p.read_at - last[1])
            if last is None or p.read_at != last[1]:
                self._cpu_read[p.pid] = (p.cpu_seconds, p.read_at)
        for gone in set(self._cpu_read) - seen:
            self._cpu_read.pop(gone, None)
            self.process_cpu.pop(gone, None)

    def is_stale(self, now: float, interval: float | None = None) -> bool:
        """No sample yet, or the last one arrived too long ago (controller monotonic ``now``)."""
        if self.latest is None:
            return True
        return self.latest.is_stale(now, interval)

    def rising_counters(self, now: float, within: float = 10.0) -> dict[tuple[str, str], float]:
        """Counters that increased in the last ``within`` seconds: (device, name) → when."""
        return {k: t for k, t in self.rising.items() if now - t <= within}

    def to_json(self) -> dict[str, Any]:
        """The latest sample, rates (when two samples were seen) and collected problems, JSON-ready."""
        return {
            "node": self.node,
            "sample": dict(self.latest.raw) if self.latest is not None else None,
            "rates": self.rates.to_json() if self.rates is not None else None,
            "problems": dict(self.problems),
        }
