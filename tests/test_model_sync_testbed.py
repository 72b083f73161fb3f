"""``sparktui model sync`` on the real test hosts: rsync runs on the head (spark1) and pushes over SSH to
spark2's address, with the head's own ssh (the test bed's key and known_hosts through
``engine.sync_ssh_options``; host keys checked). A model directory of a few GB of sparse files plus a small
config.json and safetensors header is copied, its SHA-256 compared on both ends; a second run is "already in
sync"; a run killed mid-copy is continued by the next one; a node whose disk is short is refused."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import REPO, run_sparktui
from tests.lifecycle_helpers import lifecycle_overrides
from tests.testbed import Testbed
from tests.testbed.bed import MODEL_DIR

pytestmark = [pytest.mark.testbed]

#: The big files: sparse (holes read as zeros), so the copy is real but the disk barely notices.
SPARSE = {"model-00001-of-00002.safetensors": 750_000_000, "model-00002-of-00002.safetensors": 450_000_000}


def sync_overrides(bed: Testbed) -> dict[str, Any]:
    return {"engine": {"sync_ssh_options": ["-i", str(bed.client_key),
                                            "-o", f"UserKnownHostsFile={bed.known_hosts}"]}}


def model_dir(bed: Testbed, name: str) -> Path:
    return bed.host_tmp(name) / MODEL_DIR.removeprefix("/tmp/")


def make_head_model(bed: Testbed) -> Path:
    root = model_dir(bed, "spark1")
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / "config.json").write_text('{"architectures": ["StandinForCausalLM"]}\n')
    header = json.dumps({"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}}).encode()
    (root / "small.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + os.urandom(8))
    for name, size in SPARSE.items():
        with open(root / name, "wb") as f:
            f.write(os.urandom(4096))       # a real head, then a hole
            f.truncate(size)
    return root


def sha256_tree(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h = hashlib.sha256()
            with open(p, "rb") as f:
                while chunk := f.read(1 << 22):
                    h.update(chunk)
            out[str(p.relative_to(root))] = h.hexdigest()
    return out


def rsyncs_on(bed: Testbed) -> list[str]:
    return [f"{n}: {line.strip()}" for n in bed.names
            for line in bed.exec(n, ["ps", "-ww", "-eo", "pid=,args="]).stdout.splitlines()
            if "rsync" in line]


@pytest.fixture
def synced_bed(testbed: Testbed, tmp_path: Path) -> Iterator[Path]:
    if shutil.which("rsync") is None:
        pytest.fail("rsync is not installed (.ci/run installs it)")
    make_head_model(testbed)
    shutil.rmtree(model_dir(testbed, "spark2"), ignore_errors=True)
    config: Path = testbed.write_config(tmp_path / "config.toml", **sync_overrides(testbed))
    try:
        yield config
    finally:
        # The hosts are the session's: give the next test the standard model directory on every node
        # (a head with this test's extra files would fail every later preflight's "same model" check).
        for name in testbed.names:
            shutil.rmtree(model_dir(testbed, name), ignore_errors=True)
        testbed.make_model_dirs()


def test_copies_checks_sums_then_is_in_sync(testbed: Testbed, synced_bed: Path, tmp_path: Path) -> None:
    bed, c = testbed, ("--config", str(synced_bed))
    # Before: `start`'s preflight finds spark2 without the model and names the command that copies it.
    overrides = lifecycle_overrides(bed)
    overrides["engine"].update(sync_overrides(bed)["engine"])
    start = run_sparktui("--config", str(bed.write_config(tmp_path / "start.toml", **overrides)), "start",
                         timeout=300)
    assert start.returncode == 1, start.stdout + start.stderr
    assert re.search(r"preflight: model files.*/tmp/models/standin-model: no such directory; "
                     r"`sparktui model sync` copies it from spark1", start.stdout), start.stdout
    assert "  fix: `sparktui model sync` copies the head's model directory to spark2\n" in start.stdout
    dry = run_sparktui(*c, "model", "sync", "--dry-run", timeout=120)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert re.search(r"^spark2: would copy: 4 file\(s\), 1,200\.0 MB from spark1 to [\d.]+:/tmp/models/"
                     r"standin-model$", dry.stdout, re.M), dry.stdout
    assert "spark1$ rsync -a --partial --sparse" in dry.stdout
    assert f"{bed.ip('spark2')}:{MODEL_DIR}/" in dry.stdout
    assert not model_dir(bed, "spark2").exists()

    t0 = time.monotonic()
    done = run_sparktui(*c, "model", "sync", timeout=600)
    seconds = time.monotonic() - t0
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^spark2: copied: 4 file\(s\), 1,200\.0 MB in [\d.]+ s \([\d,.]+ MB/s, [\d,.]+ MB "
                     r"sent\); 4 files, sizes and sha256 equal$", done.stdout, re.M), done.stdout
    assert re.search(r"^spark2 \[[#.]{24}\] +\d+% [\d,.]+ MB of 1,200\.0 MB \([\d,.]+ MB/s\)$", done.stdout,
                     re.M), done.stdout
    assert sha256_tree(model_dir(bed, "spark2")) == sha256_tree(model_dir(bed, "spark1"))
    print(f"model sync of {sum(SPARSE.values()) / 1e9:.1f} GB (sparse): {seconds:.1f} s")

    again = run_sparktui(*c, "model", "sync", "--json", timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    report = json.loads(again.stdout)
    assert report["ok"] and [n["action"] for n in report["nodes"]] == ["source", "same"], report
    assert "already in sync with spark1" in report["nodes"][1]["message"]
    assert rsyncs_on(bed) == []


def test_a_killed_copy_is_continued_by_the_next_run(testbed: Testbed, synced_bed: Path) -> None:
    bed, c = testbed, ("--config", str(synced_bed))
    proc = subprocess.Popen([sys.executable, "-m", "sparktui", *c, "model", "sync"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    seen = []
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            seen.append(line)
            # A bar short of 100 %: rsync is sending.
            if re.match(r"spark2 \[[#.]+\] +([1-9]|[1-9]\d)% ", line):
                break
            assert line, "".join(seen)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # Nothing of ours left copying on either host: rsync on the head and its receiver end with the channel.
    deadline = time.monotonic() + 20
    while rsyncs_on(bed) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert rsyncs_on(bed) == []
    partial = sum(p.stat().st_size for p in model_dir(bed, "spark2").rglob("*") if p.is_file()) \
        if model_dir(bed, "spark2").exists() else 0
    assert partial > 0, "".join(seen)

    done = run_sparktui(*c, "model", "sync", "--json", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    node = json.loads(done.stdout)["nodes"][1]
    assert node["action"] == "copied", node
    assert sha256_tree(model_dir(bed, "spark2")) == sha256_tree(model_dir(bed, "spark1"))


def test_a_short_disk_is_refused_and_a_missing_key_is_named(testbed: Testbed, synced_bed: Path,
                                                           tmp_path: Path) -> None:
    bed, c = testbed, ("--config", str(synced_bed))
    free = shutil.disk_usage(bed.host_tmp("spark2")).free
    huge = model_dir(bed, "spark1") / "model-huge.safetensors"
    with open(huge, "wb") as f:
        f.truncate(free + 10**9)
    try:
        done = run_sparktui(*c, "model", "sync", timeout=120)
        assert done.returncode == 1, done.stdout + done.stderr
        assert re.search(r"^spark2: refused: spark2: not enough disk for the model: [\d,.]+ MB free "
                         r"where the model directory goes, [\d,.]+ MB needed", done.stdout, re.M), done.stdout
        assert not model_dir(bed, "spark2").exists()
    finally:
        huge.unlink()
    # Without the test bed's key the head cannot log in to spark2: said, with the fix.
    plain = bed.write_config(tmp_path / "plain.toml", engine={"sync_ssh_options": [
        "-o", f"UserKnownHostsFile={bed.known_hosts}", "-o", "IdentitiesOnly=yes",
        "-i", str(tmp_path / "no-such-key")]})
    denied = run_sparktui("--config", str(plain), "model", "sync", timeout=120)
    assert denied.returncode == 1
    assert "spark2: failed: spark1 cannot log in to spark2 as root@" in denied.stdout, denied.stdout
    assert "ssh-copy-id root@" in denied.stdout
