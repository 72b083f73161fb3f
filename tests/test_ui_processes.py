"""The process view (issue 15): our processes per node with pid, name, CPU %, RSS and GPU memory, sortable.
CPU % comes from the probe's CPU seconds of two process scans (the probe repeats a scan between rescans),
GPU memory from what NVML attributes to the pid."""

from __future__ import annotations

import os
import time
from typing import Any

from sparktui.domain.events import NodeReading, NodeSampled
from sparktui.domain.telemetry import NodeTelemetry, Sample, process_rows
from sparktui.probe import cpu_seconds
from sparktui.ui.screens.processes import ProcessScreen
from tests.ui_fakes import make_app, settle

GIB = 1024**3


def _sample(seq: int, procs: list[dict[str, Any]], gpu: list[dict[str, Any]] | None = None) -> Sample:
    return Sample.from_json({
        "v": 1, "seq": seq, "mono": float(seq), "wall": 1.8e9 + seq, "host": "spark1", "interval": 1.0,
        "memory": {}, "cpu": {}, "rdma": [], "containers": None, "problems": {},
        "gpu": {"source": "nvml", "devices": [{"index": 0, "name": "NVIDIA GB10", "processes": gpu or []}]},
        "processes": procs}, received=float(seq))


def test_cpu_percent_from_two_scans_not_from_a_repeated_one() -> None:
    t = NodeTelemetry("spark1")
    vllm = {"pid": 10, "name": "vllm", "kind": "vllm", "rss": 9 * GIB}
    t.update(_sample(1, [{**vllm, "cpu_s": 100.0, "at": 50.0}]))
    assert t.process_cpu == {}
    t.update(_sample(2, [{**vllm, "cpu_s": 100.0, "at": 50.0}]))   # the same scan, repeated
    assert t.process_cpu == {}
    t.update(_sample(3, [{**vllm, "cpu_s": 107.5, "at": 55.0}]))   # 7.5 s of CPU in 5 s: 150 %
    assert t.process_cpu == {10: 150.0}
    rows = process_rows(_sample(3, [{**vllm, "cpu_s": 107.5, "at": 55.0}],
                                [{"pid": 10, "used_memory": 3 * GIB}]), t.process_cpu)
    assert [(r.pid, r.cpu_percent, r.rss, r.gpu_memory) for r in rows] == [(10, 150.0, 9 * GIB, 3 * GIB)]
    t.update(_sample(4, []))   # gone: forgotten
    assert t.process_cpu == {}


def test_cpu_seconds_reads_past_a_command_with_spaces_and_parens() -> None:
    import os

    tick = os.sysconf("SC_CLK_TCK")
    stat = b"4242 (ray::Dash (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 " + \
        f"{3 * tick} {tick} 0 0 20 0 1 0".encode()
    assert cpu_seconds(stat) == 4.0
    assert cpu_seconds(b"garbage") is None and cpu_seconds(None) is None


def _reading(rows: list[tuple[int, str, float, int, int | None]]) -> NodeReading:
    from sparktui.domain.telemetry import ProcessRow

    return NodeReading(process_rows=tuple(ProcessRow(pid, name, name, f"/usr/bin/{name}", cpu, rss, gpu)
                                          for pid, name, cpu, rss, gpu in rows))


async def test_the_process_view_lists_and_sorts() -> None:
    app, backend = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        backend.post(NodeSampled("spark1", _reading([(10, "vllm", 150.0, 9 * GIB, 3 * GIB),
                                                     (11, "raylet", 2.0, 1 * GIB, None)])),
                     NodeSampled("spark2", _reading([(20, "ray-worker", 80.0, 12 * GIB, 5 * GIB)])))
        await settle(pilot, app)
        await pilot.press("P")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ProcessScreen)
        table = screen.query_one("DataTable")

        def column(key: str) -> list[str]:
            return [str(table.get_row_at(i)[list(("node", "pid", "name", "kind", "cpu", "rss", "gpu",
                                                  "command")).index(key)]) for i in range(table.row_count)]

        assert column("pid") == ["10", "20", "11"]          # by CPU, busiest first
        assert column("gpu") == ["3.0 GiB", "5.0 GiB", "–"]
        await pilot.press("m")
        await pilot.pause()
        assert column("pid") == ["20", "10", "11"]          # by RSS
        await pilot.press("n")
        await pilot.pause()
        assert column("name") == ["ray-worker", "raylet", "vllm"]
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ProcessScreen)


COLUMN_KEYS = ("node", "pid", "name", "kind", "cpu", "rss", "gpu", "command")


async def test_the_demo_lists_its_processes_with_cpu_and_memory() -> None:
    """Issue 31: the demo's process view said "–" for CPU % and RSS; its processes now carry what a probe
    reads (resident memory, CPU seconds), and CPU % is the delta of two readings, as on a real node."""
    from sparktui.sim.demo import DemoBackend
    from sparktui.ui.app import SparkApp

    backend = DemoBackend(seed=7, frozen_at=75.0)   # serving: raylet, the API server, a worker per node
    app = SparkApp(backend, roles=backend.node_roles, cluster_name="demo")
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("P")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ProcessScreen)
        table = screen.query_one("DataTable")
        rows = [dict(zip(COLUMN_KEYS, map(str, table.get_row_at(i)), strict=True))
                for i in range(table.row_count)]
        assert sorted((r["node"], r["kind"]) for r in rows) == [
            ("spark1", "ray-worker"), ("spark1", "raylet"), ("spark1", "vllm"),
            ("spark2", "ray-worker"), ("spark2", "raylet")]
        for row in rows:
            assert row["cpu"] != "–" and float(row["cpu"]) > 0, row
            assert row["rss"] != "–", row
        by_kind = {(r["node"], r["kind"]): float(r["cpu"]) for r in rows}
        # A Ray worker drives its GPU: the busiest; raylet only schedules.
        assert by_kind[("spark1", "ray-worker")] > by_kind[("spark1", "vllm")] > by_kind[("spark1", "raylet")]
        assert rows[0]["kind"] == "ray-worker"   # sorted by CPU, busiest first


async def test_a_real_process_on_the_local_node_shows_its_cpu_and_memory() -> None:
    """The real path, on this machine: a busy process that calls itself ``vllm``, the probe reading the real
    /proc (as on a node), its samples through the node feed, and the process view showing its figures."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    import sparktui.probe
    from sparktui.domain.node_reading import NodeFeed

    busy = subprocess.Popen(["vllm", "-c", "while True: pass"], executable=sys.executable)
    born = time.monotonic()
    probe = subprocess.Popen([sys.executable, str(Path(sparktui.probe.__file__)), "--interval", "0.2",
                              "--proc-every", "0.2", "--count", "50", "--no-containers"],
                             stdout=subprocess.PIPE, text=True)
    feed = NodeFeed()
    try:
        assert probe.stdout is not None
        event = None
        for line in probe.stdout:   # until a sample lists it with a CPU % (two scans apart), at most 10 s
            event = feed.sampled("spark1", Sample.from_json(json.loads(line)))
            rows = [r for r in event.reading.process_rows if r.pid == busy.pid]
            if rows and rows[0].cpu_percent is not None:
                break
        else:
            raise AssertionError("the probe never gave the busy process a CPU %")
        # What the spinning loop got over its life, from the kernel directly (a busy machine gives it less
        # than a core; the probe's reading must agree with the kernel's, not with an idle machine's).
        fields = Path(f"/proc/{busy.pid}/stat").read_text().rsplit(")", 1)[1].split()
        lifetime = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - born)
    finally:
        probe.kill()
        busy.kill()
        probe.wait()
        busy.wait()
    (row,) = rows
    assert row.kind == "vllm"
    assert row.cpu_percent is not None and row.cpu_percent > 0
    assert row.cpu_percent >= 100 * lifetime / 5, (row.cpu_percent, 100 * lifetime)   # its own share
    assert row.rss is not None and row.rss > 1024**2
    app, backend = make_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot, app)
        backend.post(event)
        await settle(pilot, app)
        await pilot.press("P")
        await pilot.pause()
        table = app.screen.query_one("DataTable")
        shown = dict(zip(COLUMN_KEYS, map(str, table.get_row(f"spark1:{busy.pid}")), strict=True))
        assert shown["cpu"] == f"{row.cpu_percent:.1f}" and shown["rss"].endswith("MiB")
