"""`sparktui linktest`: all_reduce_perf / ib_write_bw output parsed (the tools' own layout), busbw judged
against NVIDIA's 21.875 GB/s pass mark, results kept in history, and "not in the image" when no tool is
there (the real CLI against local nodes, which have neither tool)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sparktui.domain import linktest as L
from tests.cli_helpers import run_sparktui

FIX = Path(__file__).parent / "fixtures" / "linktest"


def test_all_reduce_perf_two_sparks_passes() -> None:
    run = L.parse_nccl_tests((FIX / "all_reduce_perf-2sparks.txt").read_text())
    assert run is not None and run.hosts == ("spark1", "spark2") and run.wrong == 0
    assert run.rows == ((17179869184, 23.73, 23.74),) and run.avg_busbw == pytest.approx(23.7359)
    assert run.peak_busbw == 23.74
    result = L.judge("all_reduce_perf", run.peak_busbw, ("spark1", "spark2"))
    assert result.ok and result.message == ("all_reduce_perf: busbw 23.74 GB/s ≥ 21.875 GB/s "
                                            "(NVIDIA's pass mark): pass")


def test_sockets_fail_with_the_reason() -> None:
    run = L.parse_nccl_tests((FIX / "all_reduce_perf-sockets.txt").read_text())
    assert run is not None and len(run.rows) == 3 and run.peak_busbw == 3.01
    result = L.judge("all_reduce_perf", run.peak_busbw or 0)
    assert not result.ok and "FAIL" in result.message and "sockets" in result.message
    assert "one HCA" in L.judge("x", 12.1).message and "MTU 9000" in L.judge("x", 19.5).message


def test_all_gather_layout_and_garbage() -> None:
    gather = ("#       size         count      type     time   algbw   busbw #wrong     time   algbw   busbw"
              " #wrong\n"
              "  17179869184    2147483648     float   361200   47.56   23.78    N/A   361000   47.59   23.79"
              "    N/A\n"
              "# Avg bus bandwidth    : 23.785\n")
    run = L.parse_nccl_tests(gather)
    assert run is not None and run.peak_busbw == 23.79 and run.wrong == 0
    assert L.parse_nccl_tests("mpirun: command not found\n") is None
    assert L.parse_ib_write_bw("\x00garbage\n") is None


def test_ib_write_bw_gbits_and_megabytes() -> None:
    assert L.parse_ib_write_bw((FIX / "ib_write_bw-client.txt").read_text()) == 92.57
    mb = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n" \
         " 65536      5000             11000.00              11034.26              0.176548\n"
    assert L.parse_ib_write_bw(mb) == pytest.approx(92.56, abs=0.01)
    two = L.judge("ib_write_bw", (92.57 + 97.28) / 8)
    assert two.ok and two.busbw_gbs == pytest.approx(23.73, abs=0.01)


def test_history_keeps_results(tmp_path: Path) -> None:
    store = L.LinkTestStore(tmp_path / "linktest.jsonl")
    store.append(L.judge("all_reduce_perf", 23.74, ("spark1", "spark2")))
    store.append(L.judge("ib_write_bw", 11.5))
    (tmp_path / "linktest.jsonl").open("a").write("not json\n")
    got = store.load()
    assert [r["tool"] for r in got] == ["all_reduce_perf", "ib_write_bw"] and got[0]["ok"] is True
    assert got[0]["nodes"] == ["spark1", "spark2"] and got[1]["busbw_gbs"] == 11.5


def test_argv_in_the_image() -> None:
    argv = L.in_image_argv("img:1", L.all_reduce_argv(["10.0.0.1", "10.0.0.2"], "16G", ["NCCL_IB_HCA"]))
    assert argv[:2] == ["docker", "run"] and "--gpus" in argv and "/dev/infiniband" in argv
    tail = argv[argv.index("img:1"):]
    assert tail[:6] == ["img:1", "--allow-run-as-root", "-np", "2", "-H", "10.0.0.1:1,10.0.0.2:1"]
    assert argv[argv.index("--entrypoint") + 1] == "mpirun" and "-x" in tail and "all_reduce_perf" in tail
    assert L.ib_write_bw_argv("rocep1s0f1", 18515, "10.0.0.2")[-1] == "10.0.0.2"


@pytest.mark.skipif(any(shutil.which(t) for t in L.TOOLS), reason="a link-test tool is installed here")
def test_cli_says_not_in_the_image(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text('[[nodes]]\nname = "a"\nhost = "localhost"\nlocal = true\nrole = "head"\n'
                   '[[nodes]]\nname = "b"\nhost = "localhost"\nlocal = true\n'
                   '[engine]\nruntime = "host"\nmodel = "m"\n')
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    proc = run_sparktui("linktest", "--json", "--config", str(cfg), env=env)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["tool"] == "none" and report["message"].startswith("not in the image: none of "
                                                                     "all_reduce_perf + mpirun, ib_write_bw")
    assert "not in the image" in proc.stderr
    hist = run_sparktui("linktest", "--history", "--json", env=env)
    assert hist.returncode == 0 and json.loads(hist.stdout) == []   # nothing measured, nothing kept


def test_all_reduce_latency_from_the_smallest_message() -> None:
    """The time column of nccl-tests' table (µs, out of place): a tiny message's time is the latency the
    decode ceiling charges per all-reduce (the figures here are made up; the layout is nccl-tests')."""
    text = (FIX / "all_reduce_perf-2sparks.txt").read_text()
    assert L.parse_nccl_tests(text).latency_us == 723841.0
    small = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     "
             "time   algbw   busbw #wrong\n"
             "           8             2     float     sum      -1    27.31    0.00    0.00      0    26.90"
             "    0.00    0.00      0\n"
             "          16             4     float     sum      -1    27.80    0.00    0.00      0    27.44"
             "    0.00    0.00      0\n")
    parsed = L.parse_nccl_tests(small)
    assert parsed is not None and parsed.latency_us == 27.31
    result = L.judge("all_reduce_perf", 23.7, ("spark1", "spark2"), latency_us=parsed.latency_us)
    assert result.message.endswith("; all-reduce latency 27.31 µs (8-byte message)")
    assert result.detail["latency_us"] == 27.31
