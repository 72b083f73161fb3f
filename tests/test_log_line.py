# ruff: noqa: E501  (verbatim vLLM log lines as test data)
"""Line layer: every shape of physical line the issue lists, plus the seed line."""

from __future__ import annotations

import random
from pathlib import Path

from sparktui.domain.logs import LogReader, parse_line, parse_log_text, parse_physical_line, strip_ansi
from sparktui.domain.logs.line import _PROGRESS, Progress, _parse, _parse_common, parse_progress, split_glued

SEED = Path(__file__).parent / "data" / "seed-first-sign-of-life.txt"


def test_plain_vllm_header() -> None:
    r = parse_line("INFO 04-08 03:47:57 [core.py:61] Initializing a V1 LLM engine (v0.8.3) with config: x")
    assert (r.level, r.time, r.source_file) == ("INFO", "04-08 03:47:57", "core.py:61")
    assert r.message.startswith("Initializing a V1 LLM engine")
    assert r.role is None and r.node is None and r.pid is None and r.repeat == 0


def test_pre_bracket_header_v06() -> None:
    r = parse_line("INFO 10-28 11:14:51 model_runner.py:1067] Loading model weights took 24.4023 GB")
    assert r.level == "INFO" and r.source_file == "model_runner.py:1067"
    assert r.message == "Loading model weights took 24.4023 GB"


def test_nested_prefixes_keep_innermost_role_and_ray_ip() -> None:
    r = parse_line(
        "(EngineCore_DP0 pid=1769) (RayWorkerWrapper pid=274, ip=10.2.1.15) INFO 11-13 06:17:46 "
        "[parallel_state.py:1325] rank 1 in world size 2 is assigned as DP rank 0, PP rank 1, TP rank 0"
    )
    assert (r.role, r.node, r.pid) == ("RayWorkerWrapper", "10.2.1.15", 274)
    assert r.message.startswith("rank 1 in world size 2")


def test_four_level_nesting_and_names_with_spaces() -> None:
    r = parse_line(
        "(ServeReplica:default:LLMServer:qwen-0_5b pid=62683) (EngineCore pid=64296) (RayWorkerProc pid=65043) "
        "(Worker pid=65043) INFO 08-14 11:58:42 [default_loader.py:430] Loading weights took 1.35 seconds"
    )
    assert r.role == "Worker" and r.node is None and r.pid == 65043
    r2 = parse_line("(VllmWorker rank=0 pid=77) INFO 01-02 03:04:05 [x.py:1] hello")
    assert r2.role == "VllmWorker rank=0" and r2.message == "hello"


def test_ray_v2_prefix_with_ip_on_the_outer_group() -> None:
    r = parse_line(
        "(RayWorkerProc pid=2784025, ip=192.168.10.220) (Worker_DP1_TP0_EP2 pid=2784025) INFO 06-10 11:03:33 "
        "[flash_attn.py:636] Using FlashAttention version 2"
    )
    assert (r.role, r.node) == ("Worker_DP1_TP0_EP2", "192.168.10.220")


def test_ansi_coloured_prefix_and_dedup_suffix() -> None:
    r = parse_line(
        "\x1b[36m(RayWorkerWrapper pid=330, ip=10.244.1.228)\x1b[0m INFO 04-20 18:29:43 [pynccl.py:69] "
        "vLLM is using nccl==2.21.5\x1b[32m [repeated 14x across cluster]\x1b[0m"
    )
    assert r.repeat == 14 and r.message == "vLLM is using nccl==2.21.5"
    assert "\x1b" not in r.raw
    r2 = parse_line(
        "(pid=327, ip=10.244.1.228) INFO 04-20 18:29:34 [__init__.py:239] Automatically detected platform cuda. "
        "[repeated 8x across cluster] (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log "
        "deduplication, or see https://docs.ray.io/en/master/ray-observability/user-guides/configure-logging.html"
        "#log-deduplication for more options.)"
    )
    assert r2.repeat == 8 and r2.message == "Automatically detected platform cuda."
    assert r2.role is None and r2.pid == 327


def test_vllm_tty_colours_are_stripped() -> None:
    r = parse_line("\x1b[1;36m(APIServer pid=1)\x1b[0;0m \x1b[32mINFO\x1b[0m 01-01 00:00:01 [api_server.py:1] hi")
    assert (r.role, r.level, r.message) == ("APIServer", "INFO", "hi")


def test_docker_timestamp_and_slurm_wrappers() -> None:
    r = parse_line(
        "2026-05-12T08:01:39.331095044Z (APIServer pid=1) INFO 05-12 08:01:39 [loggers.py:271] Engine 000: x"
    )
    assert (r.role, r.time, r.message) == ("APIServer", "05-12 08:01:39", "Engine 000: x")
    r2 = parse_line("1: (Worker_TP1 pid=9) INFO 05-12 08:01:39 [gpu_worker.py:1] Available KV cache memory: 3 GiB")
    assert r2.role == "Worker_TP1" and r2.message == "Available KV cache memory: 3 GiB"
    r3 = parse_line("0: 2026-05-12T08:01:39Z INFO 05-12 08:01:39 [a.py:1] both wrappers")
    assert r3.message == "both wrappers" and r3.level == "INFO"
    r4 = parse_line(" 3: (Worker_TP3 pid=9) INFO 05-12 08:01:39 [x.py:1] padded label")  # srun -l, 10+ tasks
    assert (r4.role, r4.message) == ("Worker_TP3", "padded label")


def test_journald_compose_and_json_formatter() -> None:
    j = parse_line("Aug 18 14:15:04 spark1 python3[28059]: (APIServer pid=28059) INFO 08-18 14:15:04 [a.py:1] hi")
    assert (j.role, j.message) == ("APIServer", "hi")
    c = parse_line("vllm-head-1  | (EngineCore pid=7) INFO 08-18 14:15:04 [core.py:1] hello")
    assert (c.role, c.message) == ("EngineCore", "hello")
    js = parse_line('{"asctime": "11-02 10:00:00", "levelname": "INFO", "name": "vllm.x", '
                    '"processName": "APIServer", "process": 1, "message": "Starting vLLM server on http://0.0.0.0:8000"}')
    assert (js.level, js.role, js.pid, js.time) == ("INFO", "APIServer", 1, "11-02 10:00:00")
    assert js.message.startswith("Starting vLLM server on")
    assert parse_line('{"message": 3}').message == '{"message": 3}'
    # Ray relays a worker's JSON record behind its own prefix; asctime with a year and ms reads as MM-DD.
    ray = parse_line('\x1b[36m(RayWorkerProc pid=52, ip=10.0.0.2)\x1b[0m {"asctime": "2026-04-08 23:30:26,417", '
                     '"levelname": "ERROR", "name": "vllm.x", "processName": "MainProcess", "process": 52, '
                     '"message": "Model loading took 30.57 GiB memory and 41.9 seconds"}')
    assert (ray.role, ray.node, ray.pid, ray.level, ray.time) == (
        "RayWorkerProc", "10.0.0.2", 52, "ERROR", "04-08 23:30:26")
    assert ray.message.startswith("Model loading took")


def test_free_text_before_the_vllm_record() -> None:
    launcher = parse_line("2026-05-29 09:14:45,594 - INFO - [container] (APIServer pid=1) INFO 05-29 09:14:45 "
                          "[api_server.py:1] Starting vLLM server on http://0.0.0.0:8000")
    assert (launcher.role, launcher.level, launcher.time) == ("APIServer", "INFO", "05-29 09:14:45")
    assert launcher.message.startswith("Starting vLLM server on")
    custom = parse_line("[spark1] INFO 05-29 09:14:45 [core.py:1] Initializing a V1 LLM engine (v0.17.1) with config: x")
    assert custom.level == "INFO" and custom.message.startswith("Initializing")
    nccl = parse_line("host:327:327 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read")
    assert nccl.level is None and nccl.message.startswith("host:327")


def test_logging_prefix_after_process_prefixes() -> None:
    # <= 0.30: the stdout patch writes the process prefix, the formatter output starts with the free text.
    old = parse_line("(EngineCore pid=4) (RayWorkerWrapper pid=5) [spark-a] INFO 04-08 23:30:25 [x.py:1] hi")
    assert (old.role, old.node, old.level, old.time, old.message) == (
        "RayWorkerWrapper", None, "INFO", "04-08 23:30:25", "hi")
    # 0.31+: the free text precedes the formatter's process prefix, inside Ray's prefix.
    new = parse_line("\x1b[36m(RayWorkerProc pid=5, ip=10.0.0.2)\x1b[0m [spark-a] (Worker_TP1 pid=5) ERROR "
                     "04-08 23:30:26 [x.py:1] boom")
    assert (new.role, new.node, new.pid, new.level, new.message) == ("Worker_TP1", "10.0.0.2", 5, "ERROR", "boom")


def test_uvicorn_ray_logger_glog_and_autoscaler_lines() -> None:
    u = parse_line("(APIServer pid=148236) \x1b[32mINFO\x1b[0m:     Application startup complete.")
    assert (u.level, u.message, u.time) == ("INFO", "Application startup complete.", None)
    ray = parse_line("2025-04-20 18:28:20,161\tINFO worker.py:1654 -- Connecting to existing Ray cluster at x...")
    assert ray.level == "INFO" and ray.source_file == "worker.py:1654" and ray.time == "2025-04-20 18:28:20"
    assert ray.message.startswith("Connecting to existing Ray cluster")
    glog = parse_line("[rank2]:E0716 18:21:22.792000 132331 torch/_inductor/x.py:874] OSError: [Errno 122] Disk")
    assert glog.level == "ERROR" and glog.message.startswith("OSError") and glog.time == "07-16 18:21:22"
    auto = parse_line("(autoscaler +10m11s, ip=172.31.42.4) Error: No available node types can fulfill")
    assert auto.role == "autoscaler" and auto.message.startswith("Error: No available")


def test_crlf_multiline_record_lines() -> None:
    # NewLineFormatter re-prefixes every line of a multi-line record and joins them with \r\n.
    text = (
        "(EngineCore pid=277) ERROR 08-14 08:00:55 [core.py:1330] EngineCore failed to start.\r\n"
        "(EngineCore pid=277) ERROR 08-14 08:00:55 [core.py:1330] Traceback (most recent call last):\r\n"
        "(EngineCore pid=277) ERROR 08-14 08:00:55 [core.py:1330] ValueError: boom\n"
    )
    reader = LogReader()
    records = reader.feed(text.encode())
    assert [r.message for r in records] == [
        "EngineCore failed to start.", "Traceback (most recent call last):", "ValueError: boom"]
    assert all(r.level == "ERROR" and r.role == "EngineCore" for r in records)
    assert parse_line("INFO 07-16 19:52:39 [api_utils.py:345] \r").message == ""


def test_prefix_only_line_then_bar_inherits_prefix() -> None:
    reader = LogReader()
    records = reader.feed(
        b"\x1b[36m(RayWorkerWrapper pid=860, ip=10.0.0.2)\x1b[0m \n"
        b"Loading safetensors checkpoint shards:  50% Completed | 4/8 [00:02<00:02,  1.75it/s]\n"
    )
    assert len(records) == 1
    bar = records[0]
    assert bar.is_progress and bar.progress is not None
    assert (bar.progress.done, bar.progress.total) == (4, 8)
    assert (bar.role, bar.node) == ("RayWorkerWrapper", "10.0.0.2")
    assert parse_line("(Worker_TP0 pid=4242) ").is_prefix_only


def test_several_cr_progress_updates_on_one_physical_line() -> None:
    line = (
        "(Worker_TP0 pid=4242) \rCapturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/5 "
        "[00:00<?, ?it/s]\rCapturing CUDA graphs (mixed prefill-decode, PIECEWISE):  20%|██        | 1/5 "
        "[00:00<00:00,  6.66it/s]\rCapturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 5/5 "
        "[00:00<00:00,  6.64it/s]"
    )
    r = parse_line(line)  # a line reader's view: the last update is current
    assert r.role == "Worker_TP0" and r.progress is not None and r.progress.done == 5
    reader = LogReader()
    records = reader.feed((line + "\n").encode())  # the byte stream's view: every update
    assert [rec.progress.done for rec in records if rec.progress] == [0, 1, 5]
    assert all(rec.role == "Worker_TP0" for rec in records[:1])


def test_log_line_glued_after_a_progress_bar() -> None:
    glued = (
        "Capturing CUDA graph shapes:   3%|▎         | 1/35 [00:00<00:18,  1.86it/s]"
        "\x1b[36m(RayWorkerWrapper pid=327, ip=10.244.1.18)\x1b[0m INFO 04-14 16:11:41 [model_runner.py:1456] "
        "Capturing cudagraphs for decoding."
    )
    parts = parse_physical_line(glued)
    assert len(parts) == 2
    assert parts[0].is_progress and parts[0].progress is not None and parts[0].progress.done == 1
    assert parts[1].role == "RayWorkerWrapper" and parts[1].node == "10.244.1.18"
    assert parts[1].message == "Capturing cudagraphs for decoding."
    reader = LogReader()
    assert len(reader.feed((glued + "\n").encode())) == 2


def test_cut_paste_prefix() -> None:
    r = parse_line("RayWorkerWrapper pid=1861983) INFO 03-27 10:29:03 [model_runner.py:1442] Capturing cudagraphs")
    assert r.role == "RayWorkerWrapper" and r.pid == 1861983 and r.level == "INFO"


def test_strip_ansi_handles_cut_sequences() -> None:
    assert "\x1b" not in strip_ansi("a\x1b[1;3")
    assert strip_ansi("\x1b[0;0m\x1b[36mx\x1b[0m") == "x"


def test_seed_line_parses_to_version_and_tp() -> None:
    text = SEED.read_text()
    rec = parse_line(text.splitlines()[0])
    assert rec.role == "EngineCore_DP0" and rec.pid == 719
    snap = parse_log_text(text)
    assert snap.vllm_version is not None and snap.vllm_version.startswith("0.17.1rc1")
    assert snap.facts["vllm_release"] == "0.17.1rc1"
    assert snap.facts["tensor_parallel_size"] == 2
    assert snap.model == "/models/Qwen3.5-122B-A10B-FP8"
    assert snap.stage("config").status == "running" and snap.outcome == "incomplete"


def test_md_hms_inverts_seconds_in_year() -> None:
    from sparktui.domain.logs.line import md_hms, seconds_in_year

    for text in ("01-01 00:00:00", "02-29 12:34:56", "03-01 00:00:01", "12-31 23:59:59"):
        seconds = seconds_in_year(text)
        assert seconds is not None and md_hms(seconds) == text
    assert md_hms(-3600.0) == "12-31 23:00:00"


def _progress_by_regex(message: str) -> Progress | None:
    m = _PROGRESS.match(message.lstrip()) if "%" in message else None
    if m is None:
        return None
    try:
        return Progress(m["desc"].strip(), int(m["n"]), int(m["total"]))
    except ValueError:
        return None


def test_parse_progress_finds_what_the_bar_regex_finds() -> None:
    """parse_progress tries the bar's tail at each ":" instead of the regex's lazy description: the same
    answer on every bar of the logs, cut anywhere, and on random text made of a bar's characters."""
    data = Path(__file__).parent / "data" / "vllm-logs"
    texts = [line for path in sorted(data.glob("*.txt"))
             for line in path.read_text(encoding="utf-8", errors="replace").replace("\r", "\n").split("\n")
             if "%" in line]
    assert len(texts) > 300
    rnd = random.Random(12)
    cases = [*texts]
    for line in texts[:400]:
        cut = rnd.randrange(len(line) + 1)
        cases += [line[:cut], line[cut:], "x" * 190 + ": " + line[cut:], line.replace(":", ": 1%| |", 1)]
    alphabet = ": %|/0123456789 Completed[]\r\nab:"
    cases += ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 80))) for _ in range(20_000)]
    for text in cases:
        assert parse_progress(text) == _progress_by_regex(text), repr(text)


def test_the_common_record_reads_as_the_general_reader_reads_it() -> None:
    """line._parse_common (one regex for a simple prefix and vLLM's header) gives what _parse gives, on every
    line, ``\\r`` segment and glued part of the real logs and the recorded ones; it takes a good share."""
    root = Path(__file__).parent
    paths = [*(root / "data" / "vllm-logs").glob("*"), *(root / "public_logs").glob("*.log"),
             *(root / "data" / "synthetic-logs").glob("*"),
             *(root.parent / "sparktui" / "assets" / "recorded").rglob("*.txt")]
    seen = taken = 0
    for path in paths:
        for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
            for part in [line, *split_glued(strip_ansi(line))]:
                for seg in {part, *part.split("\r")}:
                    seen += 1
                    common = _parse_common(seg)
                    if common is not None:
                        taken += 1
                        assert common == _parse(seg), seg
    assert taken > seen // 5


def test_ray_cpp_logger_header() -> None:
    """src/ray/util/logging.cc: "[%Y-%m-%d %H:%M:%S,%e %L %P %t] " and RAY_CHECK's "file.cc:N: "; C is FATAL."""
    rec = parse_line("(EngineCore_DP0 pid=1879) [2025-03-29 12:59:53,123 C 1879 1900] core_worker.cc:912: "
                     "Check failed: x == y")
    assert (rec.level, rec.message, rec.source_file, rec.role, rec.year) == (
        "CRITICAL", "Check failed: x == y", "core_worker.cc:912", "EngineCore_DP0", 2025)
    assert rec.time == "2025-03-29 12:59:53"
    assert parse_line("[2024-06-24 02:49:00,315 E 54163 54163] logging.cc:365: *** SIGABRT received").level == "ERROR"
    assert parse_line("[2024-06-24 02:49:00,315 F 1 1] a.cc:1: Check failed: z").level == "CRITICAL"
    # RAY_CHECK's second space, and the raylet's "(raylet) " before the file (ray-project/ray#41071)
    raylet = parse_line("[2023-11-09 23:36:12,914 C 75 75] (raylet) dependency_manager.cc:214:  Check failed: t")
    assert (raylet.level, raylet.message, raylet.source_file) == ("CRITICAL", "Check failed: t",
                                                                  "dependency_manager.cc:214")
