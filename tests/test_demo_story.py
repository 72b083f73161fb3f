"""The demo tells one story: its log, parsed by the real parser, states every fact the story says (and
nothing of another cluster), its node panels agree (memory, link rate), its preflight agrees, the story
agrees with the shipped example config, the template's recorded lines are real, and each failure
scenario ends in the state and diagnosis a newcomer should see."""

from __future__ import annotations

import itertools
import re
import time
import tomllib
from pathlib import Path

import pytest

from sparktui.domain.events import EngineChanged, EngineState, LogRecords, NodeSampled, Notice
from sparktui.domain.logs import LogRecord, parse_line, timeline_from_bytes
from sparktui.domain.telemetry import NodeTelemetry
from sparktui.sim import demo
from sparktui.sim.demo import SCENARIOS, DemoSimulation, engine_memory_gib
from sparktui.sim.demo_story import STORY, start_log, template, timed_log
from sparktui.sim.log_stamps import stamp_seconds
from sparktui.sim.recording import recording_text

ROOT = Path(__file__).resolve().parents[1]
GIB = 1024**3
#: Names and figures of the clusters the recorded lines came from: none may reach the demo's log.
FOREIGN = ("llama", "Llama", "A100", "H200", "10.244.", "Qwen3-Next", "/data/", "1804347", "1805889",
           "LegalAI", "nranks 4", "nRanks 4", "mlx5_", "eth0", "262144", "262,144")


def _records(text: str) -> list:
    return [parse_line(line) for line in text.splitlines()]


def test_the_log_states_every_fact_of_the_story() -> None:
    text = start_log()
    snap = timeline_from_bytes(text.encode(), expected_nodes=2)
    facts = snap.facts
    assert snap.outcome == "ready"
    assert snap.vllm_version == STORY.vllm_version
    assert snap.model == STORY.model
    assert facts["architecture"] == STORY.architecture
    assert facts["tensor_parallel_size"] == STORY.tensor_parallel_size
    assert facts["pipeline_parallel_size"] == STORY.pipeline_parallel_size
    assert facts["world_size"] == STORY.tensor_parallel_size
    assert facts["distributed_executor_backend"] == "ray"
    assert facts["quantization"] == "fp8"
    assert facts["weights_gib"] == pytest.approx(STORY.weights_gib)
    assert 58 <= facts["weights_gib"] <= 60                         # ≈ 59 GiB per node: 122 B FP8 over TP 2
    assert facts["kv_cache_gib"] == pytest.approx(STORY.kv_cache_gib)
    assert facts["kv_cache_tokens"] == STORY.kv_cache_tokens
    assert facts["max_concurrency"] == pytest.approx(STORY.kv_cache_tokens / STORY.max_model_len, abs=0.01)
    assert facts["max_model_len"] == facts["max_seq_len"] == STORY.max_model_len
    assert facts["cuda_graphs_gib"] == pytest.approx(STORY.graphs_gib)
    assert facts["ray_address"] == f"{STORY.ips[0]}:{STORY.ray_port}"
    assert facts["api_url"].endswith(f":{STORY.api_port}")
    # Ray names the worker node by its IP; the head's lines carry none.
    assert set(snap.nodes) == {"head", STORY.ips[1]}
    assert all(s.status == "done" for s in snap.stages)
    assert next(s for s in snap.stages if s.name == "weights").progress.total == STORY.shards


def test_the_log_has_the_v1_ray_shape_and_the_story_s_processes() -> None:
    records = [r for r in _records(start_log()) if r.raw.strip()]
    text = start_log()
    # V1 engine, the EngineCore_DP0 prefix of 0.10.2–0.17, Ray worker actors nested under it.
    assert f"Initializing a V1 LLM engine (v{STORY.vllm_version})" in text
    roles = {r.role for r in records}
    assert roles == {"APIServer", "EngineCore_DP0", "RayWorkerWrapper"}
    for r in records:
        if r.role == "RayWorkerWrapper":
            assert r.raw.startswith(f"(EngineCore_DP0 pid={STORY.engine_pid}) (RayWorkerWrapper pid=")
            expected = ((None, STORY.worker_pids[0]), (STORY.ips[1], STORY.worker_pids[1]))
            assert (r.node, r.pid) in expected, r.raw
        elif r.role == "EngineCore_DP0":
            assert r.pid == STORY.engine_pid
        else:
            assert r.pid == STORY.api_pid
    for bad in FOREIGN:
        assert bad not in text, bad
    assert "${" not in text


def test_facts_the_parser_does_not_read_agree_too() -> None:
    """nRanks, hostnames, addresses, RDMA devices (NCCL INFO lines) and gpu-memory-utilization (the args
    dict and the memory report): the parser keeps no fact of these yet, so the lines are read here."""
    text = start_log()
    nranks = re.findall(r"\bn[Rr]anks (\d+)", text)
    assert nranks and set(nranks) == {str(STORY.tensor_parallel_size)}
    assert set(re.findall(r"nNodes (\d+)", text)) == {"2"}
    hosts = set(re.findall(r"\) (\S+):\d+:\d+ \[\d\] NCCL INFO", text))
    assert hosts == set(STORY.hostnames)
    assert set(re.findall(r"ip=([\d.]+)", text)) == {STORY.ips[1]}
    bootstrap = set(re.findall(r"Bootstrap : Using (\S+)<0>", text))
    assert bootstrap == {f"{STORY.interface}:{ip}" for ip in STORY.ips}
    assert set(re.findall(r"\[\d\](\w+):1/RoCE", text)) == set(STORY.rdma_devices)
    assert "Using network IB" in text and "NET/Socket" not in text
    # The parser's NCCL verdict (domain/logs/nccl.py) reads the same lines: RoCE on both HCAs of both hosts.
    facts = timeline_from_bytes(text.encode(), expected_nodes=2).facts
    assert facts["nccl_verdict_level"] == "ok" and "RoCE" in facts["nccl_verdict"]
    assert facts["nccl_nets"] == {host: "IB" for host in STORY.hostnames}
    assert facts["nccl_ib_devices"] == {host: {"0": [STORY.rdma_devices[0]], "1": [STORY.rdma_devices[1]]}
                                        for host in STORY.hostnames}
    assert f"'gpu_memory_utilization': {STORY.gpu_memory_utilization}" in text
    assert f"'max_model_len': {STORY.max_model_len}" in text
    gmu = STORY.gpu_memory_utilization
    desired = f"Desired GPU memory utilization is ({gmu}, {STORY.desired_gib:.2f} GiB)"
    assert desired in text
    assert f"'served_model_name': ['{STORY.served_model_name}']" in text


def test_the_story_is_the_shipped_example_config() -> None:
    config = tomllib.loads((ROOT / "config.toml").read_text())
    nodes = config["nodes"]
    assert tuple(n["name"] for n in nodes) == STORY.nodes
    assert tuple(n["ip"] for n in nodes) == STORY.ips
    assert all(n["interface"] == STORY.interface for n in nodes)
    assert all(tuple(n["rdma_devices"]) == STORY.rdma_devices for n in nodes)
    engine = config["engine"]
    assert engine["image"] == STORY.image                          # the image whose vLLM the log states
    assert engine["model"] == STORY.model and engine["served_model_name"] == STORY.served_model_name
    assert engine["tensor_parallel_size"] == STORY.tensor_parallel_size
    assert engine["pipeline_parallel_size"] == STORY.pipeline_parallel_size
    assert engine["executor"] == "ray" and engine["api_port"] == STORY.api_port
    assert engine["ray_port"] == STORY.ray_port
    args = engine["extra_args"]
    assert args[args.index("--max-model-len") + 1] == str(STORY.max_model_len)
    assert args[args.index("--gpu-memory-utilization") + 1] == str(STORY.gpu_memory_utilization)


def _bar_shape(line: str) -> str:
    """A progress line with its figures, bar cells and padding taken out."""
    line = re.sub(r"\|[ ▏▎▍▌▋▊▉█]+\|", "|BAR|", line)
    line = re.sub(r"\d+(?:\.\d+)?(?:s/it|it/s)", "RATE", line)
    return re.sub(r"\s+", " ", re.sub(r"\d+(?:\.\d+)?", "N", line))


def test_the_recorded_lines_are_real() -> None:
    """The log's bars have the shipped v0.10.2 recording's bars' shape (their figures come from the story's
    pace) and its routes are that recording's lines, byte for byte (after the Ray prefix the template
    adds); the KV sizing is V1's arithmetic on the story's numbers."""
    real = set(recording_text("single-node-tp2-h200-qwen3-next-80b-a3b-ready_v0.10.2").splitlines())
    real_shapes = {_bar_shape(line) for line in real if "checkpoint shards:" in line or "CUDA graphs" in line}
    start = template("start")
    bars = [line.split(") ", 2)[-1] for line in start_log().splitlines() if "checkpoint shards:" in line
            or "Capturing CUDA graphs" in line]
    finished = [bar for bar in bars if " 0/" not in bar]
    assert len(finished) == STORY.shards + 1 + 2 and all(_bar_shape(bar) in real_shapes for bar in finished)
    # tqdm's first state of each bar (the recording kept only the shard bar's).
    assert all(bar.endswith(("| 0/67 [00:00<?, ?it/s]", "| 0/41 [00:00<?, ?it/s]")) for bar in bars
               if " 0/" in bar)
    routes = [line.split(") ", 1)[1] for line in start.splitlines() if "[launcher.py:44] Route:" in line]
    real_routes = {line.split(") ", 1)[1] for line in real if "[launcher.py:44] Route:" in line}
    assert routes and set(routes) == real_routes
    assert STORY.kv_cache_gib == pytest.approx(
        STORY.mem_total_gib * STORY.gpu_memory_utilization - STORY.weights_gib - STORY.activation_gib
        - STORY.non_torch_gib, abs=0.01)
    sources = (ROOT / "sparktui/assets/recorded/SOURCES.md").read_text()
    for name in ("start.tmpl", "nccl-ib.tmpl", "nccl-socket.tmpl", "oom-kv-cache.tmpl"):
        assert name in sources


def _run(scenario: str, until: float, seed: int = 7) -> tuple[DemoSimulation, list]:
    sim = DemoSimulation(seed=seed, scenario=scenario)
    sim.request("start")
    events: list = []
    t = 0.0
    while t < until:
        t += 0.5
        events += sim.advance(t)
    return sim, events


def _memory(events: list, node: str) -> list[float]:
    return [e.sample.memory.used / GIB for e in events if isinstance(e, NodeSampled) and e.node == node]


def test_memory_follows_the_stages_and_never_drops_at_ready() -> None:
    sim, events = _run("start", 95)
    assert sim.state is EngineState.READY
    for node, idle in zip(STORY.nodes, STORY.idle_used_gib, strict=True):
        series = _memory(events, node)
        assert all(b >= a - 1e-6 for a, b in itertools.pairwise(series)), node
        # Weights (≈ 59 GiB) + KV cache + graphs on every node, and it stays while serving.
        assert series[-1] == pytest.approx(idle + STORY.engine_gib, abs=0.5)
        assert series[-1] - series[0] > STORY.weights_gib + STORY.kv_cache_gib
    # The stage-to-memory rule itself: all done = the engine's whole footprint.
    assert sim.feed is not None
    assert engine_memory_gib(sim.feed.snapshot()) == pytest.approx(STORY.engine_gib)
    # The ready edge: memory just before VERIFYING and just after READY.
    ready_i = next(i for i, e in enumerate(events) if isinstance(e, EngineChanged)
                   and e.state is EngineState.READY)
    before = _memory(events[:ready_i], STORY.nodes[0])[-1]
    after = _memory(events[ready_i:], STORY.nodes[0])[:5]
    assert min(after) >= before


def test_link_rate_is_200g_in_the_panels_and_in_preflight() -> None:
    _, events = _run("start", 20)
    telemetry = NodeTelemetry(STORY.nodes[0])
    rates = None
    for e in events:
        if isinstance(e, NodeSampled) and e.node == STORY.nodes[0]:
            rates = telemetry.update(e.sample) or rates
    assert rates is not None and rates.cables
    assert {c.link_gbps for c in rates.cables} == {STORY.link_gbps}
    preflight = dict((name, msg) for name, _, msg in demo.PREFLIGHT_STEPS)
    assert preflight["RDMA link up"].endswith(f"ACTIVE {STORY.link_gbps:.0f}G")
    assert STORY.vllm_version in preflight["vLLM version in image"]
    assert STORY.image in preflight["image present, same ID"]


def test_oom_scenario_fails_with_the_diagnosis() -> None:
    sim, events = _run("oom", 80)
    assert sim.state is EngineState.FAILED
    assert sim.feed is not None
    failure = sim.feed.snapshot().failure
    assert failure is not None and failure.kind == "oom" and failure.stage == "kv_cache"
    assert "CUDA out of memory" in failure.message
    failed = [e for e in events if isinstance(e, EngineChanged) and e.state is EngineState.FAILED]
    assert failed and failed[-1].detail.startswith("oom during kv_cache: torch.OutOfMemoryError")
    # The traceback's figures are the panels': the engine's share on spark2 (in use) + its page cache +
    # what CUDA calls free add up to the node's memory.
    assert f"this process has {STORY.oom_in_use_gib:.2f} GiB memory in use" in failure.message
    spark2 = [e.sample for e in events if isinstance(e, NodeSampled) and e.node == STORY.nodes[1]]
    peak = max(s.memory.used for s in spark2) / GIB
    assert peak == pytest.approx(STORY.idle_used_gib[1] + STORY.oom_in_use_gib, abs=1.0)
    assert (spark2[-1].memory.cached or 0) / GIB + peak + STORY.oom_free_gib == pytest.approx(
        STORY.mem_total_gib, abs=1.0)
    # The engine died: its memory is released (a drop at failure, not at ready).
    assert _memory(events, STORY.nodes[1])[-1] < STORY.idle_used_gib[1] + 2


def test_nccl_socket_fallback_is_ready_with_a_warning() -> None:
    text = start_log(nccl="socket")
    assert "NET/Socket : Using [0]" in text and "via NET/Socket/0" in text and "Using network IB" not in text
    facts = timeline_from_bytes(text.encode(), expected_nodes=2).facts
    assert facts["nccl_verdict_level"] == "warning" and "sockets" in facts["nccl_verdict"]
    sim, events = _run("nccl-socket-fallback", 80)
    assert sim.state is EngineState.READY
    warnings = [e for e in events if isinstance(e, Notice) and e.severity == "warning"]
    assert len(warnings) == 1 and "fell back to sockets" in warnings[0].message
    ready = [e for e in events if isinstance(e, EngineChanged) and e.state is EngineState.READY]
    assert ready and ready[-1].detail.startswith("NCCL over TCP sockets (NET/Socket)")   # stays on screen


def test_wedge_scenario() -> None:
    sim, events = _run("wedge", 110)
    assert sim.state is EngineState.WEDGED
    wedged = next(e for e in events if isinstance(e, EngineChanged) and e.state is EngineState.WEDGED)
    assert "no token for" in wedged.detail
    last = sim.serving.last
    assert last is not None and last.requests_running and last.generation_tokens_per_s == 0.0
    util, power = sim.nodes[STORY.nodes[0]].last_gpu
    assert 90 <= util <= 100 and 15 <= power <= 25


def test_worker_lost_scenario_names_the_node_and_its_address() -> None:
    sim, events = _run("worker-lost", 100)
    assert sim.state is EngineState.DEGRADED
    degraded = next(e for e in events if isinstance(e, EngineChanged) and e.state is EngineState.DEGRADED)
    assert STORY.nodes[1] in degraded.detail and STORY.ips[1] in degraded.detail
    last = [e for e in events if isinstance(e, NodeSampled) and e.node == STORY.nodes[1]][-1]
    assert not any(p.name == "raylet" for p in last.sample.processes)


def test_upgrade_scenario_shows_another_sparktuis_dry_run_stage_by_stage_then_its_outcome() -> None:
    from sparktui.domain.events import OperationChanged, StepStatus, UpgradeSeen
    from sparktui.sim.demo_upgrade import IMAGE, SECONDS

    sim, events = _run("upgrade", 100)
    assert sim.ready_at is not None and sim.state is EngineState.READY
    views = [e.operation for e in events if isinstance(e, OperationChanged) and e.operation.kind == "upgrade"]
    assert views and all(v.running for v in views)   # still at its stages
    last = views[-1]
    assert last.message == f"upgrading to {IMAGE} (3c9d5e7f0a1b) from {STORY.image} (--dry-run)"
    assert [s.status for s in last.steps[:3]] == [StepStatus.OK] * 3
    sim, events = _run("upgrade", sim.ready_at + 10 + SECONDS + 1)
    lines = [e for e in events if isinstance(e, UpgradeSeen)]
    assert lines == [UpgradeSeen(f"upgrade to {IMAGE}: checked: every check passed; nothing was changed "
                                 "(--dry-run)", "ok")]
    assert sim.state is EngineState.READY   # a dry run changes nothing


def test_every_scenario_is_listed_and_unknown_ones_are_refused() -> None:
    assert set(SCENARIOS) == {"start", "oom", "nccl-socket-fallback", "wedge", "worker-lost", "upgrade"}
    with pytest.raises(ValueError, match="unknown demo scenario"):
        DemoSimulation(scenario="nope")


# ---- one story in time (issue 31): the log's durations, the bars and the clock agree --------------------
def _start_to_ready(scenario: str = "start") -> tuple[DemoSimulation, list[LogRecord], list[EngineChanged]]:
    """The demo's start, run headlessly to ready: its log records and its engine events, in order."""
    sim = DemoSimulation(seed=7, scenario=scenario)
    sim.request("start")
    records: list[LogRecord] = []
    engine: list[EngineChanged] = []
    t = 0.0
    while sim.state not in (EngineState.READY, EngineState.FAILED):
        t += 0.25
        assert t < 120, sim.state
        for event in sim.advance(t):
            if isinstance(event, LogRecords) and event.source == "vllm":
                records += event.records
            elif isinstance(event, EngineChanged):
                engine.append(event)
    return sim, records, engine


def _stated(records: list[LogRecord], pattern: str) -> list[float]:
    return [float(m.group(1)) for r in records if (m := re.search(pattern, r.raw))]


def _tqdm_seconds(records: list[LogRecord], desc: str) -> float:
    """A bar's final ``[mm:ss<…`` elapsed, as tqdm printed it."""
    last = [m for r in records if desc in r.raw and (m := re.search(r"\[(\d\d):(\d\d)<", r.raw))][-1]
    return int(last.group(1)) * 60 + int(last.group(2))


def test_the_log_and_the_bars_agree_on_each_stage_s_duration() -> None:
    """Each stage's duration as the stage bars show it, and every duration the log's own lines state for it
    (vLLM's figures and tqdm's elapsed), within 10 %."""
    _sim, records, engine = _start_to_ready()
    bars = {v.name: v.seconds for v in next(e for e in reversed(engine) if e.timeline).timeline.stages}
    stated = {
        "weights": [*_stated(records, r"Loading weights took ([\d.]+) seconds"),
                    *_stated(records, r"Model loading took [\d.]+ GiB memory and ([\d.]+) seconds"),
                    _tqdm_seconds(records, "Loading safetensors checkpoint shards")],
        "compile": _stated(records, r"torch\.compile takes ([\d.]+) s in total"),
        "cuda_graphs": [*_stated(records, r"Graph capturing finished in (\d+) secs"),
                        _tqdm_seconds(records, "(mixed prefill-decode, PIECEWISE)")
                        + _tqdm_seconds(records, "(decode, FULL)")],
    }
    for stage, figures in stated.items():
        shown = bars[stage]
        assert figures and shown, stage
        for figure in figures:
            assert figure == pytest.approx(shown, rel=0.10), (stage, figure, shown)
    # The engine core's own total of what follows the weights (profiling, KV cache, graphs, warm-up).
    init = _stated(records, r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) seconds")
    after_weights = sum(bars[s] or 0.0 for s in ("compile", "kv_cache", "cuda_graphs", "engine"))
    assert init and init[0] == pytest.approx(after_weights, rel=0.10)


@pytest.mark.parametrize("scenario", ["start", "oom", "nccl-socket-fallback"])
def test_the_log_s_stamps_are_the_demo_s_clock(scenario: str) -> None:
    """Every stamped line (vLLM, Ray and PyTorch's glog stamps alike) carries the demo's wall clock at the
    moment it was printed: in order, none from the recording's hours among them."""
    sim, records, _ = _start_to_ready(scenario)
    assert sim.launched_at is not None
    launched = demo.EPOCH + sim.launched_at
    midnight = launched - launched % 86_400
    stamps = [s for r in records if (s := stamp_seconds(r.raw)) is not None]   # whole seconds, as vLLM's
    assert len(stamps) > 50
    assert stamps == sorted(stamps)
    assert launched - 1 <= midnight + stamps[0] and midnight + stamps[-1] <= demo.EPOCH + sim.t
    dated = [m.group(1) for r in records if (m := re.search(r"(?:INFO|WARNING|ERROR) (\d\d-\d\d) ", r.raw))]
    assert set(dated) == {time.strftime("%m-%d", time.gmtime(launched))}


def test_the_pace_is_stated_once_and_the_text_log_keeps_it() -> None:
    """``start_log`` (what the parser tests read) is the replay's log: parsed alone, its stage durations are
    the pace's, and its progress bars reach their totals at the pace's times."""
    pace = STORY.pace
    snap = timeline_from_bytes(start_log().encode(), expected_nodes=2)
    seconds = {s.name: s.seconds for s in snap.stages}
    assert seconds["weights"] == pace.compile_at - pace.weights_at
    assert seconds["compile"] == pace.compiled_at - pace.compile_at
    assert seconds["cuda_graphs"] == pace.graphs_done_at - pace.graphs_at
    assert sum(s or 0.0 for s in seconds.values()) == pace.ready_at
    timed = timed_log()
    assert [at for at, _ in timed] == sorted(at for at, _ in timed)
    shards = [at for at, line in timed if f"{STORY.shards}/{STORY.shards} [" in line]
    assert shards[0] == pytest.approx(pace.shards_at + STORY.shards * pace.shard_seconds)
