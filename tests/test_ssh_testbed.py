"""The test bed itself: isolated hosts reachable with plain OpenSSH, and its controls."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import MakeTestbed
from tests.testbed import Testbed
from tests.testbed.bed import _port_open

pytestmark = pytest.mark.testbed


def _ssh(bed: Testbed, name: str, *remote: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(bed.ssh_argv(name, *remote), capture_output=True, text=True, timeout=30)


def test_hosts_answer_plain_ssh_with_their_own_names(testbed: Testbed) -> None:
    for name in ("spark1", "spark2"):
        proc = _ssh(testbed, name, "hostname")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == name


def test_each_host_has_its_own_tmp_and_pid_namespace(testbed: Testbed) -> None:
    marker = "testbed-marker-spark1"
    assert _ssh(testbed, "spark1", "touch", f"/tmp/{marker}").returncode == 0
    assert (testbed.host_tmp("spark1") / marker).exists()
    assert not (testbed.host_tmp("spark2") / marker).exists()
    assert not Path(f"/tmp/{marker}").exists()
    # PID 1 of each host is its init, not the machine's.
    comm = testbed.exec("spark2", ["cat", "/proc/1/cmdline"]).stdout
    assert "hostinit.py" in comm


def test_exec_runs_inside_the_host(testbed: Testbed) -> None:
    proc = testbed.exec("spark2", ["hostname"])
    assert proc.returncode == 0 and proc.stdout.strip() == "spark2"


def test_kill_and_restart_sshd(make_testbed: MakeTestbed) -> None:
    bed = make_testbed(["solo"])
    bed.kill_sshd("solo")
    assert not bed.sshd_running("solo")
    assert not _port_open(bed.ip("solo"))
    bed.start_sshd("solo")
    assert _ssh(bed, "solo", "hostname").stdout.strip() == "solo"


def test_teardown_removes_everything(make_testbed: MakeTestbed) -> None:
    bed = make_testbed(["solo"])
    _ssh(bed, "solo", "sh", "-c", "sleep 600 >/dev/null 2>&1 &")
    pids = bed.pids("solo")
    netns, bridge, workdir = bed.host("solo").netns, bed.bridge, bed.dir
    assert bed.teardown() == []
    assert not Path(f"/run/netns/{netns}").exists()
    assert not Path(f"/sys/class/net/{bridge}").exists()
    assert not workdir.exists()
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)
