"""``sparktui linktest``: what the cable really carries, against NVIDIA's pass mark — parsing and verdicts.

Two tools, in the order tried: NCCL's ``all_reduce_perf`` (nccl-tests, across the nodes with ``mpirun``),
whose table gives bus bandwidth (busbw, GB/s) per message size; else perftest's ``ib_write_bw`` on each
RDMA device of the cable (Gb/s per device, summed). NVIDIA's two-Spark setup script passes a cable at
``MIN_NCCL_TEST_BW = 21.875`` GB/s (175 Gb/s); measured: ~23.7 with MTU 9000 and both HCAs, 18.9–21 at
MTU 1500, ~12 on one HCA, ~3 over sockets. Results are kept in ``linktest.jsonl`` beside the run history.

Pure code: parsers never raise on garbage (they return None).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sparktui.domain.history import state_dir

#: NVIDIA's pass mark for NCCL busbw between two Sparks (GB/s; dgx-spark-playbooks spark_cluster_setup.py).
PASS_BUSBW_GBS = 21.875
LINKTEST_FILE = "linktest.jsonl"

# nccl-tests' data rows: size count type [redop root] time algbw busbw #wrong time algbw busbw #wrong
_ROW = re.compile(r"^\s*(?P<size>\d+)\s+(?P<count>\d+)\s+\w+\s+(?:\w+\s+-?\d+\s+)?"
                  r"(?P<t1>[\d.]+)\s+(?P<alg1>[\d.]+)\s+(?P<bus1>[\d.]+)\s+(?P<w1>\S+)\s+"
                  r"(?P<t2>[\d.]+)\s+(?P<alg2>[\d.]+)\s+(?P<bus2>[\d.]+)\s+(?P<w2>\S+)", re.M)
_AVG = re.compile(r"^# Avg bus bandwidth\s*:\s*(?P<v>[\d.]+)", re.M)
_RANK = re.compile(r"^#\s+Rank\s+\d+\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(?P<host>\S+)\s+device", re.M)
# perftest: " 65536      5000             96.94              96.92              0.184860"
_IB_ROW = re.compile(r"^\s*(?P<bytes>\d+)\s+(?P<iters>\d+)\s+(?P<peak>[\d.]+)\s+(?P<avg>[\d.]+)\s+"
                     r"(?P<rate>[\d.]+)\s*$", re.M)
_IB_UNIT = re.compile(r"BW average\[(?P<unit>Gb/sec|MB/sec)\]")


@dataclass(frozen=True)
class NcclTestRun:
    """One ``all_reduce_perf`` (or ``all_gather_perf``) output."""

    #: (bytes, out-of-place busbw GB/s, in-place busbw GB/s) per row.
    rows: tuple[tuple[int, float, float], ...]
    avg_busbw: float | None
    wrong: int
    hosts: tuple[str, ...] = ()
    #: (bytes, out-of-place time µs) per row: a small message's time is the all-reduce latency
    times_us: tuple[tuple[int, float], ...] = ()

    @property
    def latency_us(self) -> float | None:
        """The out-of-place time of the smallest message (the decode ceiling's per-all-reduce cost)."""
        return min(self.times_us)[1] if self.times_us else None

    @property
    def peak_busbw(self) -> float | None:
        """The best busbw of the largest messages (the figure NVIDIA's pass mark is for)."""
        if not self.rows:
            return None
        largest = max(r[0] for r in self.rows)
        return max(max(b1, b2) for size, b1, b2 in self.rows if size == largest)


def parse_nccl_tests(text: str) -> NcclTestRun | None:
    rows = []
    times = []
    wrong = 0
    for m in _ROW.finditer(text):
        try:
            rows.append((int(m["size"]), float(m["bus1"]), float(m["bus2"])))
            times.append((int(m["size"]), float(m["t1"])))
        except ValueError:
            continue
        for w in (m["w1"], m["w2"]):
            if w.isdigit():
                wrong += int(w)
    avg = _AVG.search(text)
    if not rows and avg is None:
        return None
    hosts = tuple(dict.fromkeys(m["host"] for m in _RANK.finditer(text)))
    return NcclTestRun(tuple(rows), float(avg["v"]) if avg else None, wrong, hosts, tuple(times))


def parse_ib_write_bw(text: str) -> float | None:
    """``ib_write_bw``'s average bandwidth in Gb/s (``--report_gbits``, or MB/sec converted)."""
    rows = list(_IB_ROW.finditer(text))
    if not rows:
        return None
    value = float(rows[-1]["avg"])
    unit = _IB_UNIT.search(text)
    if unit is not None and unit["unit"] == "MB/sec":
        value = value * 8 * 1.048576 / 1000    # perftest's MB is 2^20 bytes
    return value


@dataclass(frozen=True)
class LinkTestResult:
    """One linktest: which tool, the busbw-equivalent in GB/s, and the verdict."""

    tool: str                       # "all_reduce_perf" | "ib_write_bw" | "none"
    ok: bool
    message: str
    busbw_gbs: float | None = None
    at: float = field(default_factory=time.time)
    nodes: tuple[str, ...] = ()
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["nodes"] = list(self.nodes)
        data["detail"] = dict(self.detail)
        return data


def hint(busbw: float) -> str:
    if busbw < 6:
        return "NCCL is on sockets, not RoCE (~3 GB/s): check NCCL_IB_HCA, /dev/infiniband in the container"
    if busbw < 15:
        return "about one HCA's worth (~12 GB/s): both RDMA devices of the cable must be up and used"
    return "a little short: MTU 9000 on both nodes (1500 gives 18.9–21 GB/s) and a current NCCL"


def judge(tool: str, busbw: float, nodes: tuple[str, ...] = (), **detail: Any) -> LinkTestResult:
    passed = busbw >= PASS_BUSBW_GBS
    head = f"{tool}: busbw {busbw:.2f} GB/s"
    if passed:
        message = f"{head} ≥ {PASS_BUSBW_GBS} GB/s (NVIDIA's pass mark): pass"
    else:
        message = f"{head} < {PASS_BUSBW_GBS} GB/s (NVIDIA's pass mark): FAIL — {hint(busbw)}"
    if isinstance(detail.get("latency_us"), (int, float)):
        message += f"; all-reduce latency {detail['latency_us']:g} µs ({LATENCY_SIZE}-byte message)"
    return LinkTestResult(tool, passed, message, round(busbw, 3), nodes=nodes, detail=detail)


def not_in_image(where: str, looked_for: tuple[str, ...]) -> LinkTestResult:
    return LinkTestResult("none", False, f"not in the image: none of {', '.join(looked_for)} found {where} "
                          "(nccl-tests with mpirun, or perftest's ib_write_bw)")


class LinkTestStore:
    """``linktest.jsonl`` beside the run history: one line per linktest, appended with one write."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else state_dir() / LINKTEST_FILE

    def append(self, result: LinkTestResult) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(result.to_json(), sort_keys=True) + "\n").encode())
        finally:
            os.close(fd)

    def load(self) -> list[dict[str, Any]]:
        try:
            lines = self.path.read_text(encoding="utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict):
                out.append(data)
        return out


# ---- argv ------------------------------------------------------------------------------------------
#: Tools looked for, in order (all_reduce_perf needs mpirun beside it).
TOOLS = ("all_reduce_perf", "mpirun", "ib_write_bw")
#: The message of the latency run: small enough that its time is all latency, no bandwidth.
LATENCY_SIZE = "8"
#: ib_write_bw's first TCP port (one per RDMA device pair).
IB_PORT = 18515


def in_image_argv(image: str, argv: list[str]) -> list[str]:
    """One command in a throw-away container of the engine's image, with what RDMA and NCCL need."""
    return ["docker", "run", "--rm", "--network", "host", "--ipc", "host", "--gpus", "all",
            "--device", "/dev/infiniband", "--cap-add", "IPC_LOCK", "--ulimit", "memlock=-1",
            "--entrypoint", argv[0], image, *argv[1:]]


def which_argv(tool: str) -> list[str]:
    return ["sh", "-c", 'command -v "$1"', "sh", tool]


def all_reduce_argv(hosts: list[str], size: str, env_names: list[str]) -> list[str]:
    """``mpirun`` on the head, one rank per node (NVIDIA's two-Spark NCCL test), 1 GPU each."""
    argv = ["mpirun", "--allow-run-as-root", "-np", str(len(hosts)),
            "-H", ",".join(f"{h}:1" for h in hosts)]
    for name in env_names:
        argv += ["-x", name]
    return [*argv, "all_reduce_perf", "-b", size, "-e", size, "-f", "2", "-g", "1"]


def ib_write_bw_argv(device: str, port: int, server: str | None = None, seconds: int = 5) -> list[str]:
    """perftest's RDMA write bandwidth on one device: the server (no address) or the client."""
    argv = ["ib_write_bw", "-d", device, "-p", str(port), "--report_gbits", "-F", "-D", str(seconds)]
    return [*argv, server] if server else argv
