"""The demo's one story: what the simulated cluster runs, and the vLLM log that start prints.

Every figure a newcomer can read on the demo screen — vLLM version, model, TP, node names and addresses,
weights and KV cache per node, NCCL ranks, the cable's rate, gpu-memory-utilization, max-model-len — is
a field of ``DemoStory``; the log is built from templates whose lines are real recorded vLLM/Ray/NCCL
lines (``sparktui/assets/recorded/demo/``, sources in ``sparktui/assets/recorded/SOURCES.md``) with the
run's values put in by ``string.Template``. So the log, the node panels and the preflight steps cannot
disagree: they all read this one object (``tests/test_demo_story.py`` parses the log with the real parser
and checks every fact against it). Time is one of its facts: ``DemoPace`` says when each step happens, and
the log's stated durations, its progress bars and every line's time come from it.

Values follow the shipped example ``config.toml`` (two Sparks, 192.168.100.10/.11, TP 2 over Ray,
``--max-model-len 32768 --gpu-memory-utilization 0.85``). vLLM 0.17.1 is what NGC's
``nvcr.io/nvidia/vllm:26.03-py3`` carries, the last release with the ``EngineCore_DP0`` prefix and the
legacy Ray executor's ``RayWorkerWrapper`` actors nested under it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from string import Template

from sparktui.sim import tqdm_format
from sparktui.sim.log_stamps import restamp, stamp_seconds

GIB = 1024**3
#: The demo's wall clock: its simulation starts at 2026-04-08 14:10:00 UTC (an afternoon shortly after NGC
#: 26.03 shipped vLLM 0.17.1), so the log's stamps read as a time of day, not as a timer from midnight.
ORIGIN = 1_775_657_400.0
SHARDS_DESC = "Loading safetensors checkpoint shards"
PIECEWISE_DESC = "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)"
FULL_DESC = "Capturing CUDA graphs (decode, FULL)"
#: Cells of each CUDA-graph bar, as in the recording (tqdm fits the bar to the terminal's width).
GRAPH_BAR_CELLS = {PIECEWISE_DESC: 58, FULL_DESC: 77}
_BAR_COUNT = re.compile(r"(?P<desc>[^|:]+): +\d+%.*?\| ?(?P<n>\d+)/(?P<total>\d+) \[")


@dataclass(frozen=True)
class DemoPace:
    """When each step of the start happens, in seconds after ``vllm serve`` was launched, on the demo's own
    clock: the log's stated durations, its progress bars, its timestamps and so the stage bars and ETAs all
    come from these figures. The demo plays in real time (no speed-up factor): every duration on its
    screen is one a person can time with a watch. Stage boundaries are whole seconds because vLLM stamps
    whole seconds: then the stamps measure each stage exactly as long as it is said to take."""

    placement_at: int = 8            # config ends: the engine core connects to Ray
    distributed_at: int = 13         # the workers' torch.distributed / NCCL init
    weights_at: int = 16             # "Starting to load model"
    shards_at: float = 16.5          # the shard bar's first line
    shard_seconds: float = 0.52      # each node reads its own copy of its shard
    compile_at: int = 38             # weights loaded on both nodes; torch.compile starts
    dynamo_seconds: float = 2.46
    graph_compile_seconds: float = 6.25
    compiled_at: int = 47            # "torch.compile takes … in total"
    kv_cache_at: int = 48            # "Available KV cache memory", after the profiling run
    graphs_at: int = 49              # CUDA graph capture starts
    piecewise_seconds: int = 3
    full_seconds: int = 5
    ready_at: int = 58               # uvicorn's "Application startup complete"

    @property
    def graphs_done_at(self) -> int:
        return self.graphs_at + self.piecewise_seconds + self.full_seconds

    def bars(self, shards: int) -> dict[str, tuple[float, float, int]]:
        """Each progress bar: when it starts, how long it runs, how many items."""
        return {SHARDS_DESC: (self.shards_at, shards * self.shard_seconds, shards),
                PIECEWISE_DESC: (self.graphs_at, self.piecewise_seconds, 67),
                FULL_DESC: (self.graphs_at + self.piecewise_seconds, self.full_seconds, 67)}

    def anchors(self, shards: int) -> tuple[tuple[str, float], ...]:
        """The lines whose time the pace fixes (the first line holding each marker); lines between two
        anchors keep the recording's rhythm."""
        loaded = self.shards_at + shards * self.shard_seconds
        return (("Connecting to existing Ray cluster", self.placement_at),
                ("distributed_init_method=", self.distributed_at),
                ("Starting to load model", self.weights_at),
                ("Loading weights took", loaded),
                ("Model loading took", self.compile_at),
                ("for vLLM's torch.compile", self.compile_at),
                ("Dynamo bytecode transform time", self.compile_at + self.dynamo_seconds),
                ("Compiling a graph for compile range",
                 self.compile_at + self.dynamo_seconds + self.graph_compile_seconds),
                ("torch.compile takes", self.compiled_at),
                ("Available KV cache memory", self.kv_cache_at),
                ("Graph capturing finished", self.graphs_done_at),
                ("Application startup complete", self.ready_at))


@dataclass(frozen=True)
class DemoStory:
    vllm_version: str = "0.17.1"
    image: str = "nvcr.io/nvidia/vllm:26.03-py3"
    model: str = "/models/Qwen3.5-122B-A10B-FP8"
    served_model_name: str = "qwen3.5-122b"
    architecture: str = "Qwen3_5MoeForConditionalGeneration"
    tensor_parallel_size: int = 2
    pipeline_parallel_size: int = 1
    nodes: tuple[str, str] = ("spark1", "spark2")
    hostnames: tuple[str, str] = ("spark1", "spark2")     # what gethostname() says (NCCL prints it)
    ips: tuple[str, str] = ("192.168.100.10", "192.168.100.11")
    interface: str = "enp1s0f1np1"
    rdma_devices: tuple[str, str] = ("rocep1s0f1", "roceP2p1s0f1")   # the two PCIe "twins" of one cable
    link_rate: str = "200 Gb/sec (4X HDR)"               # sysfs rate of each twin; the cable is 200G
    link_gbps: float = 200.0
    gpu_memory_utilization: float = 0.85
    max_model_len: int = 32768
    api_port: int = 8000
    ray_port: int = 6379
    dist_port: int = 43523
    # GB10 unified memory: MemTotal 127600748 kB. Per node (TP 2 shards evenly):
    mem_total_bytes: int = 127_600_748 * 1024
    idle_used_gib: tuple[float, float] = (7.5, 6.9)      # OS, docker, Ray; the head also runs the API server
    weights_gib: float = 59.18
    activation_gib: float = 4.71                         # peak activation of the profiling run
    non_torch_gib: float = 0.90
    graphs_gib: float = 0.74
    kv_cache_tokens: int = 844_288
    shards: int = 41                                     # as in the recorded bars the template keeps
    oom_free_gib: float = 1.46                           # what CUDA reports free when the OOM scenario fails
    api_pid: int = 5941
    engine_pid: int = 6102
    worker_pids: tuple[int, int] = (6377, 1312)          # the RayWorkerWrapper actor on each node
    node_ids: tuple[str, str] = ("9b520231c0e8f0aa3a5d0d0d6c2f4c7f9e2b1a3b7d1c8e0f5a6b4c21",
                                 "204c52dca7fc5cab2f8b131f91e178b2d793ac07ce21e46c190de25b")
    pace: DemoPace = field(default_factory=DemoPace)

    @property
    def mem_total_gib(self) -> float:
        return self.mem_total_bytes / GIB

    @property
    def desired_gib(self) -> float:
        """What vLLM may use per node: total × gpu-memory-utilization."""
        return round(self.mem_total_gib * self.gpu_memory_utilization, 2)

    @property
    def kv_cache_gib(self) -> float:
        """V1's sizing: the budget less weights, peak activation and non-torch memory."""
        return round(self.desired_gib - self.weights_gib - self.activation_gib - self.non_torch_gib, 2)

    @property
    def max_concurrency(self) -> float:
        return round(self.kv_cache_tokens / self.max_model_len, 2)

    @property
    def engine_gib(self) -> float:
        """What the engine holds per node once ready (and keeps while it serves)."""
        return self.weights_gib + self.non_torch_gib + self.kv_cache_gib + self.graphs_gib

    @property
    def model_files(self) -> int:
        return self.shards + 8            # config, tokenizer, generation config, index, licence, …

    @property
    def model_dir_gib(self) -> float:
        return round(self.weights_gib * self.tensor_parallel_size + 0.6, 1)

    def node_ip(self, node: str) -> str:
        return self.ips[self.nodes.index(node)]

    def values(self) -> dict[str, str]:
        """The template placeholders."""
        kv_bytes = int(self.kv_cache_gib * GIB)
        free = self.mem_total_gib - self.idle_used_gib[0]
        return {
            "VERSION": self.vllm_version, "MODEL": self.model, "SERVED": self.served_model_name,
            "ARCH": self.architecture, "TP": str(self.tensor_parallel_size),
            "MAX_MODEL_LEN": str(self.max_model_len), "MAX_MODEL_LEN_COMMA": f"{self.max_model_len:,}",
            "GMU": f"{self.gpu_memory_utilization}", "API_PID": str(self.api_pid),
            "EC_PID": str(self.engine_pid), "W1_PID": str(self.worker_pids[0]),
            "W2_PID": str(self.worker_pids[1]), "IP1": self.ips[0], "IP2": self.ips[1],
            "HOST1": self.hostnames[0], "HOST2": self.hostnames[1], "IFACE": self.interface,
            "DEV1": self.rdma_devices[0], "DEV2": self.rdma_devices[1],
            "NODE_ID1": self.node_ids[0], "NODE_ID2": self.node_ids[1],
            "RAY_PORT": str(self.ray_port), "API_PORT": str(self.api_port), "DIST_PORT": str(self.dist_port),
            "WEIGHTS_GIB": f"{self.weights_gib:.2f}", "KV_GIB": f"{self.kv_cache_gib:.2f}",
            "KV_TOKENS": f"{self.kv_cache_tokens:,}", "CONCURRENCY": f"{self.max_concurrency:.2f}",
            "GRAPHS_GIB": f"{self.graphs_gib:.2f}", "ACTIVATION_GIB": f"{self.activation_gib:.2f}",
            "NON_TORCH_GIB": f"{self.non_torch_gib:.2f}", "TOTAL_GIB": f"{self.mem_total_gib:.2f}",
            "FREE_GIB": f"{free:.2f}", "DESIRED_GIB": f"{self.desired_gib:.2f}",
            "KV_BYTES": str(kv_bytes), "KV_FIT_BYTES": str(kv_bytes - int(self.graphs_gib * GIB)),
            "KV_FULL_BYTES": str(int((free - self.weights_gib - self.activation_gib - self.non_torch_gib
                                      - self.graphs_gib) * GIB)),
            # The OOM scenario: spark2's page cache (the model directory was just copied there) is not
            # free memory to CUDA on unified memory, so the profiling run's next 2 GiB do not fit.
            "OOM_ALLOC_GIB": "2.00", "OOM_FREE_GIB": f"{self.oom_free_gib:.2f}",
            "OOM_INUSE_GIB": f"{self.oom_in_use_gib:.2f}",
            "OOM_ALLOCATED_GIB": f"{self.weights_gib + self.activation_gib - 2.1:.2f}",
        }

    def durations(self) -> dict[str, str]:
        """The durations the log states and its progress bars, all from the pace (placeholders)."""
        p = self.pace
        loading = self.shards * p.shard_seconds + 0.04          # the loader: the bar, and a little
        model_loading = p.compile_at - p.weights_at - 0.17      # "Starting to load model" to loaded
        return {
            "LOAD_S1": f"{loading:.2f}", "LOAD_S2": f"{loading + 0.01:.2f}",
            "MODEL_LOAD_S1": f"{model_loading:.2f}", "MODEL_LOAD_S2": f"{model_loading + 0.08:.2f}",
            "DYNAMO_S": f"{p.dynamo_seconds:.2f}", "GRAPH_COMPILE_S1": f"{p.graph_compile_seconds:.2f}",
            "GRAPH_COMPILE_S2": f"{p.graph_compile_seconds - 0.04:.2f}",
            "COMPILE_S": f"{p.dynamo_seconds + p.graph_compile_seconds:.2f}",
            "CAPTURE_S": str(p.piecewise_seconds + p.full_seconds),
            "INIT_ENGINE_S": f"{p.graphs_done_at - p.compile_at - 0.14:.2f}",
            **self._bar_lines(),
        }

    def _bar_lines(self) -> dict[str, str]:
        """The shard bar (vLLM's format, every shard) and the two CUDA-graph bars (tqdm's default, first
        and last state), as the head's worker actor prints them."""
        prefix = f"(EngineCore_DP0 pid={self.engine_pid}) (RayWorkerWrapper pid={self.worker_pids[0]}) "
        bars = self.pace.bars(self.shards)
        _, seconds, total = bars[SHARDS_DESC]
        shards = [tqdm_format.vllm_bar(SHARDS_DESC, n, total, seconds * n / total) for n in range(total + 1)]
        shards.append(shards[-1])                  # tqdm prints its last state once more as it closes
        graphs = []
        for desc in (PIECEWISE_DESC, FULL_DESC):
            _, seconds, count = bars[desc]
            graphs += [tqdm_format.bar(desc, n, count, seconds * n / count, GRAPH_BAR_CELLS[desc])
                       for n in (0, count)]
        return {"SHARD_BARS": "\n".join(prefix + line for line in shards),
                "GRAPH_BARS": "\n".join(prefix + line for line in graphs)}

    @property
    def oom_in_use_gib(self) -> float:
        """What the engine holds on spark2 when the profiling run fails: weights, non-torch, activation."""
        return self.weights_gib + self.non_torch_gib + self.activation_gib

    @property
    def oom_page_cache_gib(self) -> float:
        """spark2's page cache in the OOM scenario: all of its memory that neither the OS nor the engine
        holds, less what CUDA still reports free."""
        return round(self.mem_total_gib - self.idle_used_gib[1] - self.oom_in_use_gib - self.oom_free_gib, 2)


STORY = DemoStory()


def template(name: str) -> str:
    """A template's text (``sparktui/assets/recorded/demo/<name>.tmpl``)."""
    entry = resources.files("sparktui").joinpath("assets", "recorded", "demo", f"{name}.tmpl")
    return entry.read_text(encoding="utf-8")


def fill(name: str, story: DemoStory = STORY, **extra: str) -> str:
    """A template with the story's values in (a missing value raises: no placeholder reaches a screen)."""
    return Template(template(name)).substitute(story.values(), **story.durations(), **extra)


def _log_text(story: DemoStory, nccl: str, fail: str | None) -> str:
    text = fill("start", story, NCCL=fill(f"nccl-{nccl}", story).rstrip("\n"))
    if fail is None:
        return text
    lines = text.splitlines(keepends=True)
    if fail == "oom":
        cut = next(i for i, line in enumerate(lines) if "Available KV cache memory" in line)
        return "".join(lines[:cut]) + fill("oom-kv-cache", story)
    raise ValueError(f"unknown failure {fail!r}")


def schedule(lines: Sequence[str], story: DemoStory = STORY) -> list[float]:
    """Seconds after launch of each line: the pace's anchors and progress bars fix some, and every other
    line takes the recording's rhythm between the fixed ones around it (its stamps' share of the gap);
    after the last fixed line, the recording's own spacing. (Untimed lines — bars, NCCL's — inherit the
    stamp before them, in the recording as in the parser.)"""
    fixed: dict[int, float] = {0: 0.0}
    anchors = dict(story.pace.anchors(story.shards))
    bars = story.pace.bars(story.shards)
    for i, line in enumerate(lines):
        marker = next((m for m in anchors if m in line), None)
        if marker is not None:
            fixed[i] = anchors.pop(marker)
            continue
        desc = next((d for d in bars if f"{d}:" in line), None)
        count = _BAR_COUNT.search(line) if desc is not None else None
        if desc is not None and count is not None:
            start, seconds, _ = bars[desc]
            fixed[i] = start + seconds * int(count.group("n")) / int(count.group("total"))
    recorded: list[int] = []
    for line in lines:
        recorded.append(stamp_seconds(line) or (recorded[-1] if recorded else 0))
    marks = sorted(fixed)
    times = []
    for i in range(len(lines)):
        before = max(m for m in marks if m <= i)
        after = next((m for m in marks if m > i), None)
        t0, r0 = fixed[before], recorded[before]
        if i == before:
            times.append(t0)
        elif after is None:
            times.append(t0 + max(0, recorded[i] - r0))
        else:
            t1, r1 = fixed[after], recorded[after]
            # Two fixed lines in one recorded second: what lies between comes as a burst with the later one
            # (so the lines before a stamp-less progress bar carry its second, and its stage starts there).
            share = (recorded[i] - r0) / (r1 - r0) if r1 > r0 else 1.0
            times.append(t0 + (t1 - t0) * min(1.0, max(0.0, share)))
    return times


def timed_log(story: DemoStory = STORY, *, nccl: str = "ib",
              fail: str | None = None) -> list[tuple[float, str]]:
    """The head's vLLM log of one start, each line with its time (seconds after launch): ``nccl`` picks
    the NCCL transport block (``ib`` = RoCE over the cable, ``socket`` = NCCL fell back to TCP);
    ``fail="oom"`` cuts the start at memory profiling and appends the CUDA out-of-memory traceback. The
    lines keep the template's stamps; ``start_log`` puts a clock in."""
    lines = _log_text(story, nccl, fail).splitlines()
    return list(zip(schedule(lines, story), lines, strict=True))


def start_log(story: DemoStory = STORY, *, nccl: str = "ib", fail: str | None = None,
              origin: float = ORIGIN) -> str:
    """``timed_log``'s lines stamped with one clock: ``origin`` is the wall time of the launch."""
    return "".join(restamp(line, origin + at) + "\n" for at, line in timed_log(story, nccl=nccl, fail=fail))
