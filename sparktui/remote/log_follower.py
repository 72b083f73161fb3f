"""Streams a file on a node (the head's ``vllm.log``, a node's Ray worker log) as raw bytes.

The node runs ``scripts.FOLLOW_PY`` over the node's transport; it sends framed chunks and the follower
counts the byte offset of every complete frame. When the channel or the SSH connection drops, the
``LineStream`` under it waits for the transport to come back and starts again from the last offset and
file identity (inode): no byte is lost and none is delivered twice. A replaced file (the next engine
run moves the old log to ``vllm.log.prev``) arrives as a reset, then the new file from byte 0.

``LogFollower.events()`` is the stream as typed values (``FileData``, ``FileReset``, ``FileWaiting`` of
``sparktui.domain.lifecycle.frames``); ``run()`` hands the same to the callbacks given.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Callable, Sequence

from sparktui.domain.backoff import Backoff
from sparktui.domain.lifecycle import scripts as S
from sparktui.domain.lifecycle.frames import (
    FileData,
    FileReset,
    FileWaiting,
    FollowEvent,
    FrameDecoder,
    FrameError,
    follow_event,
)
from sparktui.remote.line_stream import LineStream
from sparktui.remote.transport import RemoteProcess, Transport

log = logging.getLogger(__name__)

BytesCallback = Callable[[bytes], None]


class LogFollower:
    """Follow ``path`` on ``transport``; ``on_bytes`` gets every byte once, in order (or, without
    callbacks, ``events()`` gives every frame as a typed value).

    ``on_reset`` is called when the file is another one than before (first attach included): whatever
    parses the stream should start afresh. ``command_prefix`` runs the follower elsewhere on the node
    (``["docker", "exec", "<container>"]`` for a file inside a container).
    """

    def __init__(
        self,
        transport: Transport,
        path: str,
        on_bytes: BytesCallback | None = None,
        *,
        python: Sequence[str] = ("python3",),
        command_prefix: Sequence[str] = (),
        offset: int = 0,
        inode: str = "",
        on_reset: Callable[[], None] | None = None,
        on_waiting: Callable[[], None] | None = None,
        poll: float = 0.1,
        retry_delay: float = 0.5,
    ) -> None:
        self.transport = transport
        self.path = path
        self.on_bytes = on_bytes
        self.python = tuple(python)
        self.command_prefix = tuple(command_prefix)
        self.offset = offset
        self.inode = inode
        self.on_reset = on_reset
        self.on_waiting = on_waiting
        self.poll = poll
        self._decoder = FrameDecoder()
        self._stream = LineStream(transport, self.argv, name=f"log follower {path}",
                                  backoff=Backoff(initial=retry_delay, maximum=max(retry_delay, 10.0)),
                                  on_session=self._new_session, reap_timeout=2.0)

    def argv(self) -> list[str]:
        # "stdin": it ends when its channel closes, even on a log that is never written again.
        return [*self.command_prefix, *self.python, "-c", S.FOLLOW_PY, self.path, str(self.offset),
                self.inode, str(self.poll), "stdin"]

    async def events(self) -> AsyncGenerator[FollowEvent, None]:
        """The file as typed values until cancelled (or the transport is closed), ``offset`` and ``inode``
        already past each; survives any number of dropped channels and connections, each session resuming
        at ``offset`` of file ``inode``."""
        async with contextlib.aclosing(self._stream.chunks()) as chunks:
            async for chunk in chunks:
                try:
                    frames = self._decoder.feed(chunk)
                except FrameError as exc:
                    # A corrupted stream cannot be resumed mid-frame; start again from the last good offset.
                    log.warning("log follower %s: %s", self.path, exc)
                    self._stream.restart(str(exc))
                    continue
                for frame in frames:
                    event = follow_event(frame)
                    self._advance(event)
                    yield event

    async def run(self) -> None:
        """Follow until cancelled (or the transport is closed), each event to its callback."""
        async with contextlib.aclosing(self.events()) as events:
            async for event in events:
                match event:
                    case FileData(data):
                        if self.on_bytes is not None:
                            self.on_bytes(data)
                    case FileReset():
                        if self.on_reset is not None:
                            self.on_reset()
                    case FileWaiting():
                        if self.on_waiting is not None:
                            self.on_waiting()

    def _advance(self, event: FollowEvent) -> None:
        """Where the next session resumes: past this data, or at byte 0 of the new file."""
        if isinstance(event, FileData):
            self.offset += len(event.data)
        elif isinstance(event, FileReset):
            self.inode = event.inode
            self.offset = 0

    def _new_session(self) -> None:
        self._decoder = FrameDecoder()

    @property
    def sessions(self) -> int:
        """How many times the stream was (re)opened; > 1 after a drop."""
        return self._stream.sessions

    @property
    def last_error(self) -> str | None:
        return self._stream.last_error

    @property
    def _proc(self) -> RemoteProcess | None:
        return self._stream.proc
