"""The log follower as an async iterator of typed values: waiting for the file, the file's bytes, and a
new file at the same path (the next engine run), each a dataclass of ``frames``; the frame kinds an enum."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from sparktui.domain.lifecycle.frames import (
    FileData,
    FileReset,
    FileWaiting,
    FollowEvent,
    Frame,
    FrameKind,
    follow_event,
)
from sparktui.remote.log_follower import LogFollower
from sparktui.remote.transport import LocalTransport


def test_each_frame_kind_is_one_typed_value() -> None:
    assert follow_event(Frame(FrameKind.DATA, b"abc")) == FileData(b"abc")
    assert follow_event(Frame(FrameKind.RESET, b"4711")) == FileReset("4711")
    assert follow_event(Frame(FrameKind.WAITING)) == FileWaiting()
    assert Frame("D", b"x").kind is FrameKind.DATA     # the wire's letter is taken, as its kind
    with pytest.raises(ValueError):
        Frame("X")


async def test_events_wait_for_the_file_then_give_its_bytes_and_a_new_run(tmp_path: Path) -> None:
    path = tmp_path / "vllm.log"
    transport = LocalTransport("local")
    await transport.connect()
    follower = LogFollower(transport, str(path), poll=0.02)
    seen: list[FollowEvent] = []

    async def next_event() -> FollowEvent:
        event = await asyncio.wait_for(anext(events), timeout=30)
        seen.append(event)
        return event

    async def data_until(end: bytes) -> bytes:
        got = b""
        while not got.endswith(end):
            event = await next_event()
            assert isinstance(event, FileData), seen
            got += event.data
        return got

    async with contextlib.aclosing(follower.events()) as events:
        assert await next_event() == FileWaiting()
        path.write_bytes(b"run 1 line a\n")
        first = await next_event()
        assert isinstance(first, FileReset) and first.inode == str(path.stat().st_ino)
        assert await data_until(b"line a\n") == b"run 1 line a\n"
        assert follower.offset == len(b"run 1 line a\n")
        os.replace(path, tmp_path / "vllm.log.prev")     # the next engine start moves the log aside
        path.write_bytes(b"run 2\n")
        while not isinstance(event := await next_event(), FileReset):
            assert isinstance(event, FileData | FileWaiting), seen
        assert event.inode == str(path.stat().st_ino) and follower.inode == event.inode
        assert await data_until(b"run 2\n") == b"run 2\n"
        assert follower.offset == len(b"run 2\n")
    await transport.close()


async def test_logs_follow_prints_the_file_as_it_grows_and_says_it_waits(
        tmp_path: Path, capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    """``sparktui logs -f`` (the iterator's first reader): the log's bytes as they come on stdout, and on
    stderr that it waits while the file is not there."""
    import argparse

    from sparktui.commands.logs import _print_log
    from sparktui.config import load_config
    from sparktui.domain.lifecycle.argv import VLLM_LOG

    config = load_config(Path(__file__).resolve().parents[1] / "config.toml")
    engine = config.engine.model_copy(update={"state_dir": str(tmp_path)})
    config = config.model_copy(update={"engine": engine})
    node = config.nodes[0].name
    log = tmp_path / VLLM_LOG
    transport = LocalTransport("local")
    await transport.connect()
    args = argparse.Namespace(node=None, follow=True, list=False, run=None)
    task = asyncio.create_task(_print_log(config, args, transport, node))
    out = err = b""

    async def until(condition: Callable[[], bool]) -> None:
        nonlocal out, err
        for _ in range(1500):
            got = capfdbinary.readouterr()
            out, err = out + got.out, err + got.err
            if condition():
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"not seen in time: {out!r} {err!r}")

    try:
        await until(lambda: b"waiting for" in err)
        log.write_bytes(b"INFO first line\n")
        await until(lambda: out == b"INFO first line\n")
        with log.open("ab") as f:
            f.write(b"INFO second line\n")
        await until(lambda: out == b"INFO first line\nINFO second line\n")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await transport.close()
