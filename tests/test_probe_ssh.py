"""The probe over real SSH on both test hosts, its /proc and /sys pointed at the two-Spark fixture trees.

Each test copies the trees into the hosts' own /tmp (each test host has a private /tmp; the test reaches it
through ``testbed.host_tmp``), advances the counters there and checks what the controller computes.
"""

from __future__ import annotations

import asyncio
import shutil
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparktui.config import NodeConfig
from sparktui.domain.telemetry import NodeTelemetry, Sample, compute_rates
from sparktui.remote.probe_runner import sample_once, stream_samples
from sparktui.remote.ssh import SSHTransport
from tests.fixtures.telemetry import sparks
from tests.testbed import Testbed
from tests.testbed.bed import _cmdline

pytestmark = pytest.mark.testbed

GB10_ENV = {"PYTHONPATH": str(sparks.NVML_DIR), "SPARKTUI_PROBE_NVML_MODULE": sparks.NVML_MODULE}
HOSTS = {"spark1": "spark-a", "spark2": "spark-b"}


@dataclass
class ProbeHost:
    name: str
    node: NodeConfig
    tree: Path          # the fixture copy, as the test (root namespace) sees it


@pytest.fixture
def hosts(testbed: Testbed) -> Iterator[dict[str, ProbeHost]]:
    run = f"telemetry-{uuid.uuid4().hex[:8]}"
    config = testbed.spark_config()
    out: dict[str, ProbeHost] = {}
    for name, spark in HOSTS.items():
        local_dir = testbed.host_tmp(name) / run
        local_dir.mkdir(parents=True)
        tree = sparks.copy_spark(spark, local_dir)
        remote = f"/tmp/{run}/{spark}"          # the same directory as the host sees it
        node = config.node(name).model_copy(update={
            "proc_root": f"{remote}/proc", "sys_root": f"{remote}/sys", "rdma_devices": sparks.CABLE,
        })
        out[name] = ProbeHost(name, node, tree)
    yield out
    for name in HOSTS:
        shutil.rmtree(testbed.host_tmp(name) / run, ignore_errors=True)


def probe_pids(testbed: Testbed, name: str) -> list[int]:
    """Probe processes on a test host (root-namespace PIDs), found by the bootstrap's marker."""
    return [pid for pid in testbed.pids(name)
            if any("sparktui-probe" in word for word in _cmdline(pid))]


async def wait_no_probe(testbed: Testbed, name: str, timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    left = probe_pids(testbed, name)
    while left and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        left = probe_pids(testbed, name)
    return left


async def take(gen: AsyncGenerator[Sample, None], n: int = 1, timeout: float = 30) -> list[Sample]:
    out: list[Sample] = []

    async def run() -> None:
        async for s in gen:
            out.append(s)
            if len(out) >= n:
                return

    await asyncio.wait_for(run(), timeout)
    return out


async def take_until(
    gen: AsyncGenerator[Sample, None], done: Callable[[Sample], bool], timeout: float = 30
) -> list[Sample]:
    out: list[Sample] = []

    async def run() -> None:
        async for s in gen:
            out.append(s)
            if done(s):
                return

    await asyncio.wait_for(run(), timeout)
    return out


def _value(s: Sample, device: str, name: str) -> int | None:
    port = s.port(device)
    return None if port is None else port.counters.get(name, port.hw_counters.get(name))


def _shows(device: str, name: str, value: int) -> Callable[[Sample], bool]:
    return lambda s: _value(s, device, name) == value


async def connected(node: NodeConfig) -> SSHTransport:
    transport = SSHTransport(node, keepalive_interval=1.0, keepalive_count_max=2)
    await transport.connect()
    await transport.wait_connected(20)
    return transport


async def test_rates_over_ssh_on_both_hosts(testbed: Testbed, hosts: dict[str, ProbeHost]) -> None:
    transports = {n: await connected(h.node) for n, h in hosts.items()}
    gens = {n: stream_samples(transports[n], h.node, 0.3, env=GB10_ENV) for n, h in hosts.items()}
    telemetry = {n: NodeTelemetry(n, rdma_devices=sparks.CABLE) for n in hosts}
    firsts: dict[str, Sample] = {}
    try:
        for n in hosts:
            (first,) = await take(gens[n])
            assert first.host == n and first.memory.total == 127600748 * 1024
            assert first.gpu.devices[0].memory_total is None          # GB10: unknown, not 0
            telemetry[n].update(first)
            firsts[n] = first
        # spark1 sends 3 GB to spark2 over both twins of the cable; spark2 sees a packet_seq_err.
        for dev, share in zip(sparks.CABLE, (2_000_000_000, 1_000_000_000), strict=True):
            sparks.advance(hosts["spark1"].tree, dev, tx_bytes=share)
            sparks.advance(hosts["spark2"].tree, dev, rx_bytes=share)
        sparks.advance(hosts["spark2"].tree, "roceP2p1s0f1", packet_seq_err=1)
        # Wait for the sample that shows every write (one may land between two of them), then check what
        # the controller computes between the first sample and that one.
        last_write = {"spark1": ("roceP2p1s0f1", "port_xmit_data"),
                      "spark2": ("roceP2p1s0f1", "packet_seq_err")}
        rates = {}
        for n in hosts:
            dev, name = last_write[n]
            want = sparks.read_counter(hosts[n].tree, dev, name,
                                       "hw_counters" if name == "packet_seq_err" else "counters")
            later = await take_until(gens[n], _shows(dev, name, want))
            for s in later:
                telemetry[n].update(s)
            rates[n] = compute_rates(firsts[n], later[-1], configured=sparks.CABLE)
    finally:
        for gen in gens.values():
            await gen.aclose()
    cable = "rocep1s0f1+roceP2p1s0f1"
    tx = rates["spark1"].cable(cable)  # type: ignore[union-attr]
    rx = rates["spark2"].cable(cable)  # type: ignore[union-attr]
    assert tx is not None and rx is not None
    assert tx.tx_bytes_per_s == pytest.approx(3e9 / rates["spark1"].seconds)  # type: ignore[union-attr]
    assert tx.rx_bytes_per_s == 0.0
    assert rx.rx_bytes_per_s == pytest.approx(3e9 / rates["spark2"].seconds)  # type: ignore[union-attr]
    assert rx.rx_gbps == pytest.approx(24 / rates["spark2"].seconds)  # type: ignore[union-attr]
    assert rx.error_increases == {"packet_seq_err": 1} and tx.error_increases == {}
    # Closing the streams closed the channels: no probe is left on either host.
    for n in hosts:
        assert await wait_no_probe(testbed, n) == []
    for t in transports.values():
        await t.close()


async def test_dropped_connection_kills_probe_and_stream_restarts(
    testbed: Testbed, hosts: dict[str, ProbeHost]
) -> None:
    h = hosts["spark2"]
    transport = await connected(h.node)
    gen = stream_samples(transport, h.node, 0.3, env=GB10_ENV, restart_delay=0.2)
    try:
        (before,) = await take(gen)
        old = probe_pids(testbed, h.name)
        assert len(old) == 1
        # Every SSH session of the host dies at once (sshd keeps listening): the probe's channel is gone.
        testbed.kill_ssh_sessions(h.name)
        deadline = time.monotonic() + 10
        while any(p in testbed.pids(h.name) for p in old) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert not any(p in testbed.pids(h.name) for p in old), "probe outlived its SSH channel"
        # The transport reconnects and the stream starts a fresh probe by itself.
        after = await take(gen, 2, timeout=60)
        assert after[-1].seq >= 1 and after[-1].probe_pid is not None
        assert probe_pids(testbed, h.name) != old
        assert before.host == after[-1].host == h.name
    finally:
        await gen.aclose()
        await transport.close()
    assert await wait_no_probe(testbed, h.name) == []


async def test_sample_once_over_ssh(testbed: Testbed, hosts: dict[str, ProbeHost]) -> None:
    h = hosts["spark1"]
    transport = await connected(h.node)
    try:
        out = await sample_once(transport, h.node, env=GB10_ENV, gap=0.2)
    finally:
        await transport.close()
    assert "error" not in out, out.get("error")
    assert out["sample"]["host"] == "spark1" and out["rates"] is not None
    assert {p["kind"] for p in out["sample"]["processes"]} == {"gcs_server", "raylet", "vllm", "ray-worker"}
