"""The demo's scenarios (``sparktui --demo SCENARIO``): names and what each shows. Its own small module so
``sparktui --help`` can list them without loading the simulation."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scenario:
    """What ``sparktui --demo SCENARIO`` plays. The start's log is always the story's (``demo_story``);
    a scenario picks the NCCL transport, a failure that cuts the start, or an event after ready."""

    name: str
    summary: str
    nccl: str = "ib"                 # "ib" (RoCE over the cable) or "socket" (NCCL fell back to TCP)
    fail: str | None = None          # "oom": CUDA out of memory while profiling memory for the KV cache
    after_ready: str | None = None   # "wedge" | "worker-lost" | "upgrade"
    at: float = 15.0                 # seconds after ready that the after-ready event happens


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("start", "a clean start to ready, then serving (the default)"),
    Scenario("oom", "CUDA out of memory on spark2 while vLLM profiles memory for the KV cache (its page "
                    "cache holds the model just copied there): failed, with the diagnosis", fail="oom"),
    Scenario("nccl-socket-fallback", "NCCL finds no RDMA device and falls back to TCP sockets "
                                     "(NET/Socket): ready, with a warning", nccl="socket"),
    Scenario("wedge", "ready, then requests run but no token comes out (GPUs ~95 % busy at ~20 W): "
                      "wedged", after_ready="wedge"),
    Scenario("worker-lost", "ready, then spark2 drops out of the Ray cluster: degraded",
             after_ready="worker-lost"),
    Scenario("upgrade", "ready, then another sparktui runs `sparktui upgrade IMAGE --dry-run`: its stages "
                        "as they run, then its outcome", after_ready="upgrade", at=10.0),
)}
DEFAULT_SCENARIO = "start"
