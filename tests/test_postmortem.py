"""`sparktui postmortem`: each kind of death read from the lines the kernel, NVIDIA's driver and the memory
watchdogs print (tests/fixtures/kernel, from public reports), a previous boot's verdict ranked by what ends a
boot, and the node-side reader run for real with a stand-in `journalctl` on its PATH."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.domain.postmortem import NEEDLES, Cause, NodeReport, boot_verdict, event, events
from sparktui.node import kernel_log
from tests.json_times import bad_times

KERNEL = Path(__file__).resolve().parent / "fixtures" / "kernel"
REPO = Path(__file__).resolve().parents[1]


def lines(name: str) -> list[str]:
    return (KERNEL / name).read_text(encoding="utf-8").splitlines()


def test_the_kernels_oom_killer_names_the_process() -> None:
    found = events(lines("oom-previous-boot.log"))
    assert {e.cause for e in found} == {Cause.KERNEL_OOM}
    assert len(found) == 1    # the oom-kill summary and the Killed line: one kill
    assert found[0].what == "the kernel's OOM killer killed python3 (pid 4242)"
    assert found[0].at == "2026-08-04T10:39:10.130000+0000" and found[0].process == "python3"


def test_a_userspace_watchdog_is_told_from_the_kernel() -> None:
    found = events(lines("earlyoom.log"))
    assert [e.cause for e in found] == [Cause.USERSPACE_KILLER]
    assert found[0].what == "earlyoom sent SIGTERM to python3.13 (pid 322603)"
    oomd = event("2026-12-01T10:00:00.000000+0000 spark1 systemd-oomd[642]: Killed /user.slice/"
                 "user-1000.slice/user@1000.service/app.slice/vllm.scope due to memory pressure for "
                 "/user.slice/user-1000.slice/user@1000.service being 65.26% > 50.00% for > 20s with reclaim "
                 "activity")
    assert oomd is not None and oomd.cause is Cause.USERSPACE_KILLER and "memory pressure" in oomd.what


def test_the_drivers_lines_xids_and_no_memory() -> None:
    found = events(lines("nvrm.log"))
    assert found[0].cause is Cause.GPU_NO_MEMORY    # holds "Out of memory" too: not the kernel's OOM killer
    xids = [(e.xid, e.process) for e in found if e.cause is Cause.GPU_XID]
    assert xids == [(13, "<unknown>"), (109, "pt_main_thread"), (45, "python3"), (94, "python3"),
                    (79, "python3")]
    assert "fallen off the bus" in found[-1].what and "hardware or power" in found[-1].what


@pytest.mark.parametrize(("line", "cause"), [
    ("Kernel panic - not syncing: Fatal exception in interrupt", Cause.KERNEL_PANIC),
    ("watchdog: BUG: soft lockup - CPU#7 stuck for 23s! [python3:4242]", Cause.LOCKUP),
    ("NMI watchdog: Watchdog detected hard LOCKUP on cpu 5", Cause.LOCKUP),
    ("INFO: task python3:4242 blocked for more than 122 seconds.", Cause.LOCKUP),
    ("{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 0", Cause.HARDWARE_ERROR),
    ("thermal thermal_zone0: critical temperature reached (105 C), shutting down", Cause.THERMAL),
])
def test_what_ends_a_boot_by_itself(line: str, cause: Cause) -> None:
    found = event(f"2026-12-01T10:00:00.000000+0000 spark1 kernel: {line}")
    assert found is not None and found.cause is cause


def test_every_classified_line_holds_a_needle_the_node_keeps() -> None:
    every = [line for name in ("oom-previous-boot.log", "earlyoom.log", "nvrm.log") for line in lines(name)]
    for line in every:
        if event(line) is not None:
            assert any(n in line for n in NEEDLES), line


def test_a_boot_that_stops_mid_run_is_power_and_a_clean_one_is_clean() -> None:
    power = boot_verdict([], lines("power-loss-tail.log"), [])
    assert power.cause is Cause.POWER_LOSS and "partnerdiag" in power.hint
    clean = boot_verdict([], lines("clean-shutdown-tail.log"), [])
    assert clean.cause is Cause.CLEAN_REBOOT
    unknown = boot_verdict([], [], [], journal_error="No such boot ID in journal")
    assert unknown.cause is Cause.UNKNOWN and "Storage=persistent" in unknown.hint
    assert "No such boot ID" in unknown.summary


def test_the_verdict_ranks_what_ends_a_boot_over_what_only_kills_a_process() -> None:
    oom_then_cut = boot_verdict(lines("oom-previous-boot.log") + lines("earlyoom.log"),
                                lines("power-loss-tail.log"), [])
    assert oom_then_cut.cause is Cause.KERNEL_OOM and len(oom_then_cut.evidence) == 2
    panic_in_pstore = boot_verdict(lines("oom-previous-boot.log"), lines("power-loss-tail.log"),
                                   ["<0>[ 812.1] Kernel panic - not syncing: Fatal exception"])
    assert panic_in_pstore.cause is Cause.KERNEL_PANIC
    # An application's Xid explains a process, not a boot: the driver's out-of-memory comes first.
    app_xid = boot_verdict(lines("nvrm.log")[:2], lines("power-loss-tail.log"), [])
    assert app_xid.cause is Cause.GPU_NO_MEMORY
    fell_off = boot_verdict(lines("nvrm.log"), lines("power-loss-tail.log"), [])
    assert fell_off.cause is Cause.GPU_XID and "79" in fell_off.summary
    # Killed, then shut down cleanly by a person: the kill is history, the reboot was clean.
    killed_then_clean = boot_verdict(lines("earlyoom.log"), lines("clean-shutdown-tail.log"), [])
    assert killed_then_clean.cause is Cause.CLEAN_REBOOT


def test_garbage_is_no_event() -> None:
    for junk in ("", "\x00\xff", "NVRM: Xid (PCI:", "Out of memory", "earlyoom[1]: sending", "x" * 10_000):
        assert event(junk) is None or event(junk) is not None  # never raises
    assert event("NVRM: Xid (PCI:") is None


def journalctl_standin(tmp_path: Path, previous: list[str], current: list[str], *,
                       previous_error: str | None = None) -> Path:
    """A `journalctl` on PATH that prints these lines for `-b -1` and `-b 0` (the real one reads the boot's
    journal; a previous boot that crashed is not something this machine can have)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "previous.log").write_text("".join(line + "\n" for line in previous))
    (tmp_path / "current.log").write_text("".join(line + "\n" for line in current))
    failing = (f'echo "{previous_error}" >&2; exit 1' if previous_error
               else f'cat "{tmp_path}/previous.log"; exit 0')
    script = bindir / "journalctl"
    script.write_text("#!/bin/sh\n"
                      'for a in "$@"; do [ "$a" = "-1" ] && { ' + failing + "; }; done\n"
                      f'cat "{tmp_path}/current.log"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bindir


def run_reader(bindir: Path, since: str = "") -> dict[str, object]:
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    out = subprocess.run([sys.executable, "-c", kernel_log_source(), since, *NEEDLES], env=env,
                         capture_output=True, text=True, timeout=60, check=True)
    data = json.loads(out.stdout)
    assert isinstance(data, dict)
    return data


def kernel_log_source() -> str:
    from sparktui.node import source

    return source("kernel_log")


def test_the_node_reader_keeps_only_what_matters_and_how_the_boot_ended(tmp_path: Path) -> None:
    noise = [f"2026-08-04T10:{i // 60:02d}:{i % 60:02d}.000000+0000 spark2 kernel: eth0: link up {i}"
             for i in range(3000)]
    previous = noise + lines("oom-previous-boot.log") + lines("power-loss-tail.log")
    data = run_reader(journalctl_standin(tmp_path, previous, lines("earlyoom.log")))
    prev = data["previous"]
    assert isinstance(prev, dict) and prev["read"] == len(previous)
    assert prev["lines"] == lines("oom-previous-boot.log")
    assert prev["tail"][-2:] == lines("power-loss-tail.log")
    report = NodeReport.from_json("spark2", data)
    assert report.previous.cause is Cause.KERNEL_OOM
    assert [e.cause for e in report.since] == [Cause.USERSPACE_KILLER]
    assert report.killed(["python3"]) and not report.killed(["ray::"])
    assert bad_times(report.to_json()) == []


def test_the_node_reader_says_why_a_boot_is_missing(tmp_path: Path) -> None:
    data = run_reader(journalctl_standin(tmp_path, [], [], previous_error="Data from the specified boot (-1) "
                                         "is not available: No such boot ID in journal"))
    report = NodeReport.from_json("spark1", data)
    assert report.previous.cause is Cause.UNKNOWN and "No such boot ID" in report.previous.summary


def test_pstore_is_read_file_by_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "dmesg-efi-1").write_text("<6>[  1.0] boot\n<0>[ 812.1] Kernel panic - not syncing: Fatal "
                                          "exception\n")
    monkeypatch.setattr(kernel_log, "PSTORE", str(tmp_path))
    found = kernel_log.pstore(list(NEEDLES))
    files = found["files"]
    assert isinstance(files, list) and files[0]["name"] == "dmesg-efi-1"
    assert files[0]["lines"] == ["<0>[ 812.1] Kernel panic - not syncing: Fatal exception"]
    monkeypatch.setattr(kernel_log, "PSTORE", str(tmp_path / "absent"))
    assert "absent" in kernel_log.pstore(list(NEEDLES))["error"]
