"""The demo's one story: what the simulated cluster runs, and the vLLM log that start prints.

Every figure a newcomer can read on the demo screen — vLLM version, model, TP, node names and addresses,
weights and KV cache per node, NCCL ranks, the cable's rate, gpu-memory-utilization, max-model-len — is
a field of ``DemoStory``; the log is built from templates whose lines are real recorded vLLM/Ray/NCCL
lines (``sparktui/assets/recorded/demo/``, sources in ``sparktui/assets/recorded/SOURCES.md``) with the
run's values put in by ``string.Template``. So the log, the node panels and the preflight steps cannot
disagree: they all read this one object (``tests/test_demo_story.py`` parses the log with the real parser
and checks every fact against it).

Values follow the shipped example ``config.toml`` (two Sparks, 192.168.100.10/.11, TP 2 over Ray,
``--max-model-len 32768 --gpu-memory-utilization 0.85``). vLLM 0.17.1 is what NGC's
``nvcr.io/nvidia/vllm:26.03-py3`` carries, the last release with the ``EngineCore_DP0`` prefix and the
legacy Ray executor's ``RayWorkerWrapper`` actors nested under it.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from string import Template

GIB = 1024**3


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
    return Template(template(name)).substitute(story.values(), **extra)


def start_log(story: DemoStory = STORY, *, nccl: str = "ib", fail: str | None = None) -> str:
    """The head's vLLM log of one start: ``nccl`` picks the NCCL transport block (``ib`` = RoCE over the
    cable, ``socket`` = NCCL fell back to TCP); ``fail="oom"`` cuts the start at memory profiling and
    appends the CUDA out-of-memory traceback."""
    text = fill("start", story, NCCL=fill(f"nccl-{nccl}", story).rstrip("\n"))
    if fail is None:
        return text
    lines = text.splitlines(keepends=True)
    if fail == "oom":
        cut = next(i for i, line in enumerate(lines) if "Available KV cache memory" in line)
        return "".join(lines[:cut]) + fill("oom-kv-cache", story)
    raise ValueError(f"unknown failure {fail!r}")
