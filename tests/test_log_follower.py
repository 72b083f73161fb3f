"""The log follower: framed streaming, resume after a dropped channel with no byte lost or doubled, file
replacement (a new engine run), and the frame decoder on its own."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from sparktui.domain.lifecycle.frames import Frame, FrameDecoder, FrameError
from sparktui.domain.lifecycle.ray_logs import LogFile, choose_worker_log, parse_listing
from sparktui.remote.log_follower import LogFollower
from sparktui.remote.transport import LocalTransport
from tests.waiting import wait_until


def test_frame_decoder_handles_split_frames() -> None:
    d = FrameDecoder()
    stream = b"R 5\n12345D 3\nabcW 0\nD 2\nxy"
    frames: list[Frame] = []
    for i in range(len(stream)):
        frames += d.feed(stream[i:i + 1])
    assert frames == [Frame("R", b"12345"), Frame("D", b"abc"), Frame("W"), Frame("D", b"xy")]
    assert d.pending == 0
    assert d.feed(b"D 10\nabc") == [] and d.pending == 8
    with pytest.raises(FrameError):
        FrameDecoder().feed(b"garbage without header" * 5)


def test_ray_worker_log_choice() -> None:
    files = [LogFile("raylet.out", 10, 1.0),
             LogFile("worker-aa-ffffffff-11.err", 50, 9.0),
             # an actor started from a pooled worker keeps ffffffff in its name; the markers tell
             LogFile("worker-bb-ffffffff-12.out", 5000, 5.0, "RayWorkerWrapper", "02000000"),
             LogFile("worker-bb-ffffffff-12.err", 60, 6.0, "RayWorkerWrapper", "02000000"),
             LogFile("worker-cc-02000000-13.err", 900, 7.0, "OtherActor", "02000000")]
    assert choose_worker_log(files) == "worker-bb-ffffffff-12.out"
    # vLLM logging to stderr: the .err file is the one with the output
    files[3] = LogFile("worker-bb-ffffffff-12.err", 90000, 6.0, "RayWorkerWrapper", "02000000")
    assert choose_worker_log(files) == "worker-bb-ffffffff-12.err"
    assert choose_worker_log([LogFile("worker-dd-01000000-14.err", 10, 1.0)]) == "worker-dd-01000000-14.err"
    assert choose_worker_log([LogFile("raylet.out", 1, 1.0), LogFile("worker-aa-ffffffff-11.err", 5, 1.0)]) \
        == "raylet.out"
    assert choose_worker_log([]) is None
    d, listed, err = parse_listing('{"dir": "/tmp/ray/x/logs", "files": [{"name": "a", "size": 1, '
                                   '"mtime": 2.0, "actor": "RayWorkerWrapper"}]}')
    assert d == "/tmp/ray/x/logs" and listed == (LogFile("a", 1, 2.0, "RayWorkerWrapper"),) and err is None


async def test_follow_resumes_after_drops_without_loss_or_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "vllm.log"
    transport = LocalTransport("local")
    await transport.connect()
    got = bytearray()
    resets = []
    follower = LogFollower(transport, str(path), got.extend, on_reset=lambda: resets.append(1),
                           poll=0.02, retry_delay=0.05)
    task = asyncio.create_task(follower.run())
    lines = 3000
    delivered = -1
    try:
        with path.open("ab") as f:
            for i in range(lines):
                f.write(f"line {i:05d} {'x' * (i % 50)}\n".encode())
                f.flush()
                if i % 300 == 150:
                    # Drop the channel mid-stream, as a lost SSH connection would: once the session has
                    # delivered (one dropped before its first byte counts as a failed start, and those
                    # back off, up to 10 s).
                    def delivering(seen: int = delivered) -> bool:
                        return follower._proc is not None and follower.offset > seen

                    await wait_until(delivering, "the session delivering")
                    delivered = follower.offset
                    proc = follower._proc
                    assert proc is not None
                    proc.terminate()
                if i % 50 == 0:
                    await asyncio.sleep(0.005)
        size = path.stat().st_size
        await wait_until(lambda: follower.offset == size, "the whole log followed",
                         state=lambda: follower.offset)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    text = got.decode().splitlines()
    assert [int(t.split()[1]) for t in text] == list(range(lines))
    assert bytes(got) == path.read_bytes()
    assert follower.sessions >= 5 and resets == [1]


async def test_follow_waits_for_the_file_then_sees_a_new_run(tmp_path: Path) -> None:
    path = tmp_path / "vllm.log"
    transport = LocalTransport("local")
    await transport.connect()
    chunks: list[bytes] = []
    events: list[str] = []
    follower = LogFollower(transport, str(path), chunks.append, on_reset=lambda: events.append("reset"),
                           on_waiting=lambda: events.append("waiting"), poll=0.02)
    task = asyncio.create_task(follower.run())
    try:
        await wait_until(lambda: events == ["waiting"], "waiting for the log", state=lambda: events)
        path.write_bytes(b"run 1 line a\n")
        await wait_until(lambda: b"".join(chunks) == b"run 1 line a\n", "run 1's line", state=lambda: chunks)
        # The next engine start moves the log aside and writes a new one.
        os.replace(path, tmp_path / "vllm.log.prev")
        path.write_bytes(b"run 2\n")
        await wait_until(lambda: b"".join(chunks).endswith(b"run 2\n"), "run 2's line", state=lambda: chunks)
        assert events == ["waiting", "reset", "reset"]
        assert follower.offset == len(b"run 2\n")
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
