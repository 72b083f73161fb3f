"""``sparktui model sync``'s pure part: the rsync and ssh argv word for word, rsync's figures, the bar, the
reasons with their fixes, the checksum comparison, and the Hugging Face download (argv; the script picks
``hf`` or ``huggingface-cli`` from PATH, run here against stand-in CLIs — there is no network)."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
from pathlib import Path

from sparktui.config import parse_config
from sparktui.domain.lifecycle import model_copy as M
from sparktui.remote.model_sync import sync_model
from sparktui.remote.transport import LocalTransport

TARGET = M.SyncTarget("spark2", "192.168.100.11", "you", "/home/you/models/Qwen3 122B")


def test_rsync_argv_word_for_word() -> None:
    argv = M.rsync_argv("/home/you/models/Qwen3 122B", TARGET, ["-i", "~/.ssh/spark key"])
    ssh = ("ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -o ConnectTimeout=10 -i '~/.ssh/spark key' "
           "-l you")
    assert argv == ["rsync", "-a", "--partial", "--sparse", "--protect-args", "--mkpath",
                    "--no-inc-recursive", "--stats", "-e", ssh, "--info=progress2",
                    "/home/you/models/Qwen3 122B/", "192.168.100.11:/home/you/models/Qwen3 122B/"]
    dry = M.rsync_argv("/m", M.SyncTarget("b", "fe80::2", None, "/m"), [], dry_run=True, checksum=True)
    assert dry[-4:] == ["--checksum", "--dry-run", "/m/", "[fe80::2]:/m/"]
    assert "-l" not in dry[dry.index("-e") + 1]
    # rsync splits -e as a shell would: the option with a space stays one word.
    assert shlex.split(ssh)[-3] == "~/.ssh/spark key"


def test_reach_argv_checks_rsync_on_the_far_side() -> None:
    assert M.reach_argv(TARGET, []) == ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o",
                                        "ConnectTimeout=10", "-l", "you", "192.168.100.11",
                                        "command -v rsync >/dev/null || exit 127"]


STATS = """
Number of files: 5 (reg: 4, dir: 1)
Number of created files: 5 (reg: 4, dir: 1)
Number of regular files transferred: 4
Total file size: 2,400,000,102 bytes
Total transferred file size: 2,400,000,102 bytes
Literal data: 1,200,000,000 bytes
Matched data: 1,200,000,102 bytes
File list size: 0
garbage: x
sent 2,400,586,421 bytes  received 95 bytes  31,174,198.91 bytes/sec
"""


def test_stats_and_progress_are_read_and_garbage_is_ignored() -> None:
    s = M.parse_stats(STATS)
    assert (s.files, s.files_transferred, s.total_bytes, s.transferred_bytes, s.literal_bytes,
            s.matched_bytes) == (5, 4, 2_400_000_102, 2_400_000_102, 1_200_000_000, 1_200_000_102)
    assert M.parse_stats("\x00\xff nonsense\n:::\n") == M.RsyncStats()
    line = "    1,048,576,000  43%  250.00MB/s    0:00:04 (xfr#1, to-chk=2/4)"
    assert M.parse_progress(line) == 1_048_576_000
    assert M.parse_progress("sending incremental file list") is None


def test_progress_bar() -> None:
    assert M.progress_bar("spark2", 1_200_000_000, 2_400_000_000, 4.0) == (
        "spark2 [############............]  50% 1,200.0 MB of 2,400.0 MB (300.0 MB/s)")
    assert M.progress_bar("spark2", 10, None, 0) == "spark2: 0.0 MB (0.0 MB/s)"


def test_reasons_name_the_fix() -> None:
    assert M.reach_problem("spark1", TARGET, 127, "") == (
        "rsync is not installed on spark2: install it there (`sudo apt install rsync`)")
    denied = M.reach_problem("spark1", TARGET, 255, "you@192.168.100.11: Permission denied (publickey).")
    assert "spark1 cannot log in to spark2 as you@192.168.100.11" in denied and "ssh-copy-id you@" in denied
    unknown = M.reach_problem("spark1", TARGET, 255, "No ED25519 host key is known for 192.168.100.11 and "
                              "you have requested strict checking.\nHost key verification failed.")
    assert unknown.startswith("spark1 does not know spark2's host key")
    assert "`ssh you@192.168.100.11 true`" in unknown
    refused = M.reach_problem("spark1", TARGET, 255, "ssh: connect to host 192.168.100.11 port 22: "
                              "Connection refused")
    assert refused == ("spark1 cannot SSH to spark2 at you@192.168.100.11: ssh: connect to host "
                       "192.168.100.11 port 22: Connection refused")
    assert M.disk_refusal("spark2", 10**9, 10**9) == (
        "spark2: not enough disk for the model: 1,000.0 MB free where the model directory goes, 1,050.0 MB "
        "needed; free some, or point engine.model elsewhere")
    assert M.disk_refusal("spark2", None, 10**12) is None


def test_sums_compared() -> None:
    ref = {"a": (1, "x"), "b": (2, "y"), "c": (3, "z")}
    got = {"a": (1, "x"), "b": (2, "q"), "d": (4, "w")}
    assert M.compare_sums("spark1", ref, "spark2", got) == [
        "spark2: missing c", "spark2: only here: d", "spark2: b: sha256 differs from spark1's"]
    assert M.compare_sums("spark1", ref, "spark2", dict(ref)) == []
    assert M.parse_sums('{"missing": true}') is None and M.parse_sums("not json") is None


def test_sums_script_reads_a_directory(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.bin").write_bytes(b"abc")
    out = subprocess.run(["python3", "-c", M.MODEL_SUMS_PY, str(tmp_path)], capture_output=True, text=True,
                         check=True).stdout
    assert M.parse_sums(out) == {
        "sub/x.bin": (3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")}


def _fake_cli(bin_dir: Path, name: str) -> None:
    path = bin_dir / name
    path.write_text(f'#!/bin/sh\necho "{name} $*"\n')
    path.chmod(0o755)


def test_hf_download_argv_and_the_cli_it_picks(tmp_path: Path) -> None:
    argv = M.hf_download_argv("Qwen/Qwen3.5-122B-A10B-FP8")
    assert argv[:2] == ["sh", "-c"] and argv[3:] == ["sparktui-hf", "Qwen/Qwen3.5-122B-A10B-FP8"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    # /usr/bin may hold a real one: run with a PATH of our stand-ins first, and check what answered.
    _fake_cli(bin_dir, "huggingface-cli")
    old = subprocess.run(argv, capture_output=True, text=True, env=env)
    _fake_cli(bin_dir, "hf")
    new = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert new.stdout == "hf download Qwen/Qwen3.5-122B-A10B-FP8\n"
    if not any(Path(d, "hf").exists() for d in ("/usr/bin", "/bin")):
        assert old.stdout == "huggingface-cli download Qwen/Qwen3.5-122B-A10B-FP8\n"
    none = subprocess.run(["/bin/sh", *argv[1:]], capture_output=True, text=True,
                          env={"PATH": str(tmp_path / "empty")})
    assert none.returncode == 127 and "neither hf nor huggingface-cli is installed" in none.stderr


def test_a_hugging_face_id_is_downloaded_on_every_node_dry_run() -> None:
    config = parse_config({"nodes": [{"name": "a", "host": "localhost", "local": True, "role": "head"},
                                     {"name": "b", "host": "localhost", "local": True}],
                           "engine": {"model": "Qwen/Qwen3.5-122B-A10B-FP8"}})
    transports = {n.name: LocalTransport(n.name) for n in config.nodes}
    outcomes = asyncio.run(sync_model(config, transports, dry_run=True))
    assert [(o.node, o.action) for o in outcomes] == [("a", "would copy"), ("b", "would copy")]
    assert all(o.argv == tuple(M.hf_download_argv("Qwen/Qwen3.5-122B-A10B-FP8")) for o in outcomes)
    assert "`hf download Qwen/Qwen3.5-122B-A10B-FP8`" in outcomes[0].message


def test_the_copy_ends_with_its_stdin(tmp_path: Path) -> None:
    """rsync runs under a watch that ends it (SIGTERM, so rsync keeps the partial file) when stdin closes."""
    proc = subprocess.Popen(M.copy_argv("python3", ["sleep", "60"]), stdin=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=20) == 128 + 15
    three = subprocess.Popen(M.copy_argv("python3", ["sh", "-c", "exit 3"]), stdin=subprocess.PIPE)
    assert three.wait(timeout=20) == 3   # stdin still open: the command's own status
    assert three.stdin is not None
    three.stdin.close()
