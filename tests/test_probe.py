"""The node-side probe against the two-Spark fixture trees, run through LocalTransport like on a node."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from sparktui import probe as node_probe
from sparktui.config import NodeConfig
from sparktui.domain.telemetry import NodeTelemetry, Sample, compute_rates
from sparktui.remote.probe_runner import probe_argv, probe_source, sample_once, stream_samples
from sparktui.remote.transport import LocalTransport
from tests.fixtures.telemetry import sparks

REPO = Path(__file__).resolve().parents[1]
PROBE = REPO / "sparktui" / "probe.py"
H200_STREAM = sparks.HERE / "h200-nvml-stream.jsonl"
GB10_ENV = {"PYTHONPATH": str(sparks.NVML_DIR), "SPARKTUI_PROBE_NVML_MODULE": sparks.NVML_MODULE}
GIB = 1024**3


def node_for(root: Path, name: str = "spark-a") -> NodeConfig:
    return NodeConfig(name=name, host="localhost", local=True, python=sys.executable,
                      proc_root=str(root / "proc"), sys_root=str(root / "sys"),
                      rdma_devices=sparks.CABLE)


def run_probe(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> list[dict[str, Any]]:
    proc = subprocess.run([sys.executable, str(PROBE), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout, check=True)
    return [json.loads(line) for line in proc.stdout.splitlines()]


def fixture_args(root: Path) -> list[str]:
    return ["--proc-root", str(root / "proc"), "--sys-root", str(root / "sys")]


@pytest.fixture
def spark_a(tmp_path: Path) -> Path:
    return sparks.copy_spark("spark-a", tmp_path)


async def _first(gen: AsyncIterator[Sample], n: int, timeout: float = 20) -> list[Sample]:
    out: list[Sample] = []

    async def take() -> None:
        async for s in gen:
            out.append(s)
            if len(out) >= n:
                return

    await asyncio.wait_for(take(), timeout)
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.02)
    return False


# ---- pure parsing ---------------------------------------------------------------------------------------
def test_meminfo_gb10_is_unified_memory() -> None:
    info = node_probe.parse_meminfo(sparks.MEMINFO.encode())
    mem = node_probe.memory_section(info, None)
    assert mem["label"] == "unified memory"
    assert mem["total"] == 127600748 * 1024
    assert mem["used"] == (127600748 - 78912345) * 1024
    assert mem["available"] == 78912345 * 1024 and mem["basis"] == "memavailable"
    assert mem["swap_total"] == 16777212 * 1024 and mem["swap_used"] == 0


def test_meminfo_hugepages_basis() -> None:
    text = sparks.MEMINFO.replace("HugePages_Total:       0", "HugePages_Total:   40000") \
                         .replace("HugePages_Free:        0", "HugePages_Free:    10000")
    mem = node_probe.memory_section(node_probe.parse_meminfo(text.encode()), None)
    assert mem["basis"] == "hugepages"
    assert mem["available"] == 10000 * 2048 * 1024
    assert mem["used"] == 127600748 * 1024 - 10000 * 2048 * 1024
    assert mem["swap_total"] == 0 and mem["swap_used"] == 0


def test_psi_and_sysfs_text_parsing() -> None:
    psi = node_probe.parse_psi(sparks.PSI.encode())
    assert psi["some_avg10"] == 1.25 and psi["full_total_us"] == 23456789
    assert node_probe._id_name("4: ACTIVE") == (4, "ACTIVE")
    assert node_probe._id_name("5: LinkUp") == (5, "LinkUp")
    assert node_probe._rate_gbps("200 Gb/sec (4X HDR)") == 200.0
    assert node_probe.parse_cpu_times(b"cpu  10 0 10 70 10 0 0 0 0 0\n") == (20, 100)


@pytest.mark.parametrize(("argv", "comm", "kind"), [
    (["/usr/local/bin/vllm", "serve", "m"], "vllm", "vllm"),
    (["/usr/bin/python3", "/usr/local/bin/vllm", "serve"], "python3", "vllm"),
    (["python", "-m", "vllm.entrypoints.openai.api_server"], "python", "vllm"),
    (["VLLM::EngineCore"], "VLLM::EngineCor", "vllm"),
    (["ray::RayWorkerWrapper.execute_method"], "ray::RayWorkerW", "ray-worker"),
    (["/x/ray/core/src/ray/raylet/raylet", "--a"], "raylet", "raylet"),
    (["/x/gcs_server", "--a"], "gcs_server", "gcs_server"),
    (["tail", "-F", "/root/.local/state/sparktui/vllm.log"], "tail", None),
    (["sshd: root@notty"], "sshd", None),
    (["grep", "vllm"], "grep", None),
])
def test_classify_our_processes(argv: list[str], comm: str, kind: str | None) -> None:
    assert node_probe.classify(argv, comm) == kind


# ---- the probe as a program -------------------------------------------------------------------------
def test_probe_reads_fixture_tree_with_gb10_nvml(spark_a: Path) -> None:
    lines = run_probe("--count", "2", "--interval", "0.05", *fixture_args(spark_a), env=GB10_ENV)
    assert [d["seq"] for d in lines] == [1, 2]
    first, second = (Sample.from_json(d) for d in lines)
    assert second.mono > first.mono and second.wall >= first.wall
    # Unified memory from /proc/meminfo.
    assert first.memory.total == 127600748 * 1024 and first.memory.label == "unified memory"
    assert first.memory.pressure is not None and first.memory.pressure.some_avg10 == 1.25
    # GB10 NVML: memory unknown (never 0), the rest read.
    gpu = first.gpu.devices[0]
    assert first.gpu.source == "nvml" and gpu.name == "NVIDIA GB10"
    assert gpu.memory_total is None and gpu.memory_used is None and gpu.memory_free is None
    assert gpu.memory_unified
    assert gpu.util_percent == 36.0 and second.gpu.devices[0].util_percent == 96.0
    assert gpu.temperature_c == 45.0 and gpu.power_w == pytest.approx(11.17) and gpu.sm_clock_mhz == 2418.0
    assert gpu.processes[0].pid == 4242 and gpu.processes[0].name == "ray::RayWorkerW"
    assert gpu.process_memory == int(37.65 * GIB)
    # The reason is said once, not every sample.
    assert first.problems["gpu[0].memory_total"].startswith("NVML: Not Supported")
    assert "gpu[0].memory_total" not in second.problems
    # RoCE: the four real devices, exact counter file names, netdev mapping, raw data counters.
    ports = {p.device: p for p in first.rdma}
    assert set(ports) == set(sparks.DEVICES)
    twin = ports["roceP2p1s0f1"]
    assert twin.active and twin.phys_state == "LinkUp" and twin.rate_gbps == 200.0
    assert twin.link_layer == "Ethernet" and twin.netdev == "enP2p1s0f1np1"
    assert twin.counters["port_rcv_data"] == 250_000_000_003
    assert {"symbol_error", "link_downed", "port_rcv_errors"} <= set(twin.counters)
    hw = {"out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "np_cnp_sent"}
    assert hw <= set(twin.hw_counters)
    down = ports["rocep1s0f0"]
    assert down.state == "DOWN" and down.phys_state == "Disabled" and not down.active
    # Our processes; the log follower and sshd are not ours.
    kinds = {p.pid: p.kind for p in first.processes}
    assert kinds == {1100: "gcs_server", 1200: "raylet", 4100: "vllm", 4242: "ray-worker"}
    assert first.probe_pid is not None and first.probe_cpu_s is not None


def test_no_gpu_is_said(spark_a: Path, tmp_path: Path) -> None:
    env = {"SPARKTUI_PROBE_NVML_MODULE": "no_such_nvml_module", "PATH": str(tmp_path)}
    (d,) = run_probe("--count", "1", *fixture_args(spark_a), env=env)
    gpu = Sample.from_json(d).gpu
    assert gpu.source == "none" and gpu.devices == ()
    assert gpu.reason is not None and gpu.reason.startswith("no GPU")


def test_unreadable_counter_is_null_with_reason_once(spark_a: Path) -> None:
    sparks.set_counter(spark_a, "rocep1s0f1", "symbol_error", "N/A (no PMA)")
    lines = run_probe("--count", "2", "--interval", "0.05", *fixture_args(spark_a), env=GB10_ENV)
    key = "rdma.rocep1s0f1/1.counters.symbol_error"
    assert lines[0]["problems"][key] == "N/A (no PMA)"
    assert key not in lines[1]["problems"]
    for d in lines:
        port = Sample.from_json(d).port("rocep1s0f1")
        assert port is not None and port.counters["symbol_error"] is None


def test_a_value_that_reads_again_is_said_resolved(spark_a: Path) -> None:
    sparks.set_counter(spark_a, "rocep1s0f1", "symbol_error", "N/A (no PMA)")
    proc = subprocess.Popen([sys.executable, str(PROBE), "--interval", "0.2", "--count", "6",
                             "--errors-every", "0", *fixture_args(spark_a)],
                            stdout=subprocess.PIPE, text=True, env={**os.environ, **GB10_ENV})
    assert proc.stdout is not None
    first = Sample.from_json(json.loads(proc.stdout.readline()))
    sparks.set_counter(spark_a, "rocep1s0f1", "symbol_error", 7)
    rest = [Sample.from_json(json.loads(line)) for line in proc.stdout]
    proc.wait(10)
    key = "rdma.rocep1s0f1/1.counters.symbol_error"
    telemetry = NodeTelemetry("spark-a")
    telemetry.update(first)
    assert key in telemetry.problems
    for s in rest:
        telemetry.update(s)
    assert key not in telemetry.problems
    assert sum(key in s.resolved for s in rest) == 1


def test_nvidia_smi_fallback_is_started_once(spark_a: Path, tmp_path: Path) -> None:
    """Without NVML, one long-running ``nvidia-smi -lms`` feeds every sample (no spawn per sample)."""
    starts = tmp_path / "starts"
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(f"""#!{sys.executable}
import sys, time
open({str(starts)!r}, "a").write(" ".join(sys.argv[1:]) + "\\n")
while True:
    print("0, NVIDIA GB10, GPU-1234, 42, [N/A], 51, 12.50, 2405, [N/A], [N/A], [N/A]", flush=True)
    time.sleep(0.05)
""")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    env = {"SPARKTUI_PROBE_NVML_MODULE": "no_such_nvml_module", "PATH": f"{smi.parent}:/usr/bin:/bin"}
    lines = run_probe("--count", "6", "--interval", "0.1", *fixture_args(spark_a), env=env)
    assert len(starts.read_text().splitlines()) == 1
    last = Sample.from_json(lines[-1]).gpu
    assert last.source == "nvidia-smi"
    dev = last.devices[0]
    assert dev.util_percent == 42.0 and dev.power_w == 12.5 and dev.temperature_c == 51.0
    assert dev.memory_total is None and dev.memory_unified     # "[N/A]" is unknown, not 0


def test_standalone_command_line_runs() -> None:
    """``python3 sparktui/probe.py --count N --interval S`` works on any Linux box, GPU or not."""
    lines = run_probe("--count", "2", "--interval", "0.05")
    assert len(lines) == 2 and lines[0]["memory"]["total"] > 0


# ---- through the transport ------------------------------------------------------------------------
async def _until(
    gen: AsyncIterator[Sample], done: Callable[[Sample], bool], timeout: float = 20
) -> list[Sample]:
    """Samples up to and including the first for which ``done`` holds (the counters are written while the
    probe runs, so a sample may land between two writes: wait for the one that shows them all)."""
    out: list[Sample] = []

    async def take() -> None:
        async for s in gen:
            out.append(s)
            if done(s):
                return

    await asyncio.wait_for(take(), timeout)
    return out


def counter(s: Sample, device: str, name: str) -> int | None:
    port = s.port(device)
    assert port is not None
    return port.counters.get(name, port.hw_counters.get(name))


async def test_stream_samples_rates_from_advancing_counters(spark_a: Path) -> None:
    transport = LocalTransport("spark-a")
    await transport.connect()
    node = node_for(spark_a)
    telemetry = NodeTelemetry(node.name, rdma_devices=node.rdma_devices)
    gen = stream_samples(transport, node, 0.25, env=GB10_ENV, extra_args=["--errors-every", "0"])
    try:
        (s1,) = await _first(gen, 1)
        telemetry.update(s1)
        # 1.25 GB in on one twin, 0.75 GB on the other; 0.5 GB out; 3 symbol errors appear.
        sparks.advance(spark_a, "rocep1s0f1", rx_bytes=1_250_000_000, tx_bytes=500_000_000, symbol_error=3)
        sparks.advance(spark_a, "roceP2p1s0f1", rx_bytes=750_000_000, out_of_sequence=2)
        later = await _until(gen, lambda s: counter(s, "roceP2p1s0f1", "out_of_sequence") == 2)
        for s in later:
            telemetry.update(s)
    finally:
        await gen.aclose()
    s2 = later[-1]
    rates = compute_rates(s1, s2, configured=sparks.CABLE)
    assert rates is not None
    cable = rates.cable("rocep1s0f1+roceP2p1s0f1")
    assert cable is not None and cable.active and cable.link_gbps == 200.0   # twins share the port's 200 G
    seconds = s2.mono - s1.mono
    assert cable.rx_bytes_per_s == pytest.approx(2_000_000_000 / seconds)
    assert cable.tx_bytes_per_s == pytest.approx(500_000_000 / seconds)
    assert cable.rx_gbps == pytest.approx(16 / seconds)
    assert cable.error_increases == {"symbol_error": 3, "out_of_sequence": 2}
    idle = rates.cable("rocep1s0f0+roceP2p1s0f0")
    assert idle is not None and idle.rx_bytes_per_s == 0.0 and not idle.active
    # The running tracker saw the same traffic, spread over however many samples it took.
    assert len(telemetry.history.cable_rx(cable.name)) == len(later)
    assert telemetry.latest is s2


def test_pma_error_counters_are_read_every_errors_every_seconds(spark_a: Path) -> None:
    """Each PMA counter read is a firmware command on mlx5: error counters are re-read every
    ``--errors-every`` s, traffic counters and hw_counters every sample."""
    proc = subprocess.Popen([sys.executable, str(PROBE), "--interval", "0.3", "--count", "8",
                             "--errors-every", "1.5", *fixture_args(spark_a)],
                            stdout=subprocess.PIPE, text=True, env={**os.environ, **GB10_ENV})
    assert proc.stdout is not None
    lines = [json.loads(proc.stdout.readline())]
    sparks.advance(spark_a, "rocep1s0f1", rx_bytes=4000, symbol_error=1, out_of_sequence=1)
    lines += [json.loads(line) for line in proc.stdout]
    proc.wait(10)
    samples = [Sample.from_json(d) for d in lines]
    seen = [s for s in samples if counter(s, "rocep1s0f1", "out_of_sequence") == 1]
    assert seen and counter(seen[0], "rocep1s0f1", "port_rcv_data") == 250_000_000_001 + 1000
    assert seen[0].mono - samples[0].mono < 1.5
    assert counter(seen[0], "rocep1s0f1", "symbol_error") == 0         # not re-read yet
    assert counter(samples[-1], "rocep1s0f1", "symbol_error") == 1


async def test_a_port_coming_up_is_read_in_full(spark_a: Path) -> None:
    """A down port's counters and link details are re-read as soon as its state changes."""
    transport = LocalTransport("spark-a")
    await transport.connect()
    gen = stream_samples(transport, node_for(spark_a), 0.2, env=GB10_ENV)
    port = sparks.port_dir(spark_a, "rocep1s0f0")
    try:
        (first,) = await _first(gen, 1)
        assert first.port("rocep1s0f0").rate_gbps == 40.0  # type: ignore[union-attr]
        sparks.set_counter(spark_a, "rocep1s0f0", "port_rcv_data", 777)
        sparks.set_counter(spark_a, "rocep1s0f0", "symbol_error", 5)
        (port / "phys_state").write_text("5: LinkUp\n")
        (port / "rate").write_text("200 Gb/sec (4X HDR)\n")
        (port / "state").write_text("4: ACTIVE\n")
        later = await _until(gen, lambda s: s.port("rocep1s0f0").active)  # type: ignore[union-attr]
    finally:
        await gen.aclose()
    up = later[-1].port("rocep1s0f0")
    assert up is not None and up.phys_state == "LinkUp" and up.rate_gbps == 200.0
    assert up.counters["port_rcv_data"] == 777 and up.counters["symbol_error"] == 5


async def test_counter_reset_skips_the_interval(spark_a: Path) -> None:
    transport = LocalTransport("spark-a")
    await transport.connect()
    node = node_for(spark_a)
    telemetry = NodeTelemetry(node.name, rdma_devices=node.rdma_devices)
    cable = "rocep1s0f1+roceP2p1s0f1"
    gen = stream_samples(transport, node, 0.2, env=GB10_ENV)
    try:
        telemetry.update((await _first(gen, 1))[0])
        sparks.set_counter(spark_a, "roceP2p1s0f1", "port_rcv_data", 10)     # driver reload: back to ~0
        for s in await _until(gen, lambda s: counter(s, "roceP2p1s0f1", "port_rcv_data") == 10):
            rates = telemetry.update(s)
        assert rates is not None and rates.cable(cable).rx_bytes_per_s is None  # type: ignore[union-attr]
        sparks.advance(spark_a, "roceP2p1s0f1", rx_bytes=4000)
        for s in await _until(gen, lambda s: counter(s, "roceP2p1s0f1", "port_rcv_data") == 1010):
            rates = telemetry.update(s)
    finally:
        await gen.aclose()
    assert rates is not None
    assert rates.cable(cable).rx_bytes_per_s == pytest.approx(4000 / rates.seconds)  # type: ignore[union-attr]


async def test_closing_stdin_ends_the_probe(spark_a: Path) -> None:
    """The channel closing (EOF on stdin) ends the probe by itself, without any signal."""
    transport = LocalTransport("spark-a")
    await transport.connect()
    source = probe_source()
    proc = await transport.start(probe_argv(node_for(spark_a), 0.2, source=source), env=GB10_ENV)
    await proc.write(source)
    chunks = proc.chunks()
    first = json.loads((await asyncio.wait_for(chunks.__anext__(), 20)).split(b"\n")[0])
    pid = first["probe"]["pid"]
    assert _alive(pid)
    await proc.close_stdin()
    rc = await asyncio.wait_for(proc.wait(), 5)
    assert rc == 0 and not _alive(pid)


async def test_closing_the_stream_leaves_no_orphan(spark_a: Path) -> None:
    transport = LocalTransport("spark-a")
    await transport.connect()
    gen = stream_samples(transport, node_for(spark_a), 0.2, env=GB10_ENV)
    (s,) = await _first(gen, 1)
    assert s.probe_pid is not None and _alive(s.probe_pid)
    await gen.aclose()
    assert await asyncio.to_thread(_wait_gone, s.probe_pid)


async def test_stream_restarts_a_probe_that_died(spark_a: Path) -> None:
    transport = LocalTransport("spark-a")
    await transport.connect()
    gen = stream_samples(transport, node_for(spark_a), 0.2, env=GB10_ENV, restart_delay=0.1)
    try:
        (s1,) = await _first(gen, 1)
        assert s1.probe_pid is not None
        os.kill(s1.probe_pid, 9)
        pids = {s.probe_pid for s in await _first(gen, 3)}
    finally:
        await gen.aclose()
    assert len(pids - {s1.probe_pid}) >= 1


async def test_sample_once_gives_sample_and_rates(spark_a: Path) -> None:
    transport = LocalTransport("spark-a")
    await transport.connect()
    out = await sample_once(transport, node_for(spark_a), env=GB10_ENV, gap=0.1)
    assert "error" not in out
    assert out["sample"]["seq"] == 2 and out["sample"]["memory"]["total"] == 127600748 * 1024
    assert out["rates"]["cables"][0]["devices"] == list(sparks.CABLE)
    assert out["problems"]["gpu[0].memory_total"].startswith("NVML: Not Supported")
    json.dumps(out)


async def test_sample_once_reports_a_missing_python(spark_a: Path) -> None:
    transport = LocalTransport("spark-a")
    await transport.connect()
    node = node_for(spark_a).model_copy(update={"python": "/nonexistent/python3"})
    out = await sample_once(transport, node)
    assert out["sample"] is None and "error" in out


# ---- the recorded NVML stream from a data-centre GPU ----------------------------------------------------
@pytest.mark.skipif(not H200_STREAM.exists(), reason=f"{H200_STREAM.name} not recorded yet")
def test_recorded_h200_stream_shape() -> None:
    samples = [Sample.from_json(json.loads(line)) for line in H200_STREAM.read_text().splitlines() if line]
    assert len(samples) >= 10
    assert [s.seq for s in samples] == list(range(samples[0].seq, samples[0].seq + len(samples)))
    assert all(b.mono > a.mono for a, b in itertools.pairwise(samples))
    for s in samples:
        assert s.gpu.source == "nvml" and s.gpu.devices
        for gpu in s.gpu.devices:
            assert gpu.name and "H200" in gpu.name
            # A discrete GPU: NVML knows its memory (≈141 GB HBM3e), unlike GB10.
            assert gpu.memory_total is not None and 100 * GIB < gpu.memory_total < 200 * GIB
            assert not gpu.memory_unified
            assert gpu.memory_used is not None and 0 <= gpu.memory_used <= gpu.memory_total
            assert gpu.util_percent is not None and 0 <= gpu.util_percent <= 100
            assert gpu.temperature_c is not None and 10 <= gpu.temperature_c <= 100
            assert gpu.power_w is not None and 10 <= gpu.power_w <= 1000
            assert gpu.sm_clock_mhz is not None and 100 <= gpu.sm_clock_mhz <= 3000
        assert s.memory.total is not None and s.memory.total > 0


def test_a_stream_samples_on_the_wall_clocks_marks() -> None:
    # Every node's stream samples at the same moments (whole multiples of the interval), never sooner than
    # half an interval after the last sample.
    from sparktui.probe import next_aligned
    assert next_aligned(100.0, 1_000.2, 1.0) == pytest.approx(100.8)
    assert next_aligned(100.0, 1_000.7, 1.0) == pytest.approx(101.3)   # 0.3 s to the mark: the one after
    assert next_aligned(5.0, 1_000.0, 2.0) == pytest.approx(7.0)
    assert next_aligned(0.0, 12.3, 0.5) == pytest.approx(0.7)
