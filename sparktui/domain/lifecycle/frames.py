"""Decoding the node-side follower's frames (``scripts.FOLLOW_PY``): data, reset, waiting.

Bytes only count once their whole frame has arrived, so a connection that drops mid-frame loses nothing:
the follower resumes from the last complete frame's end offset.

On the wire a frame is ``<kind> <n>\n`` and n bytes (``sparktui/node/follow.py``); here its kind is a
:class:`FrameKind` and what it says a typed value (:func:`follow_event`): :class:`FileData`,
:class:`FileReset` or :class:`FileWaiting`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import assert_never

#: A header line longer than this is not a frame header (protects memory on garbage input).
_MAX_HEADER = 64


class FrameKind(StrEnum):
    """A frame's kind as the follower writes it (its value is the header's letter)."""

    DATA = "D"       # the file's next bytes
    RESET = "R"      # another file than before (new inode, or truncated): the payload is its inode
    WAITING = "W"    # the file does not exist (yet)


_KINDS = frozenset(kind.value.encode() for kind in FrameKind)


@dataclass(frozen=True)
class Frame:
    """One complete frame as it came (the kind is a :class:`FrameKind`; its letter is taken too)."""

    kind: FrameKind
    payload: bytes = b""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", FrameKind(self.kind))


@dataclass(frozen=True, slots=True)
class FileData:
    """The followed file's next bytes."""

    data: bytes


@dataclass(frozen=True, slots=True)
class FileReset:
    """The path is another file than before (the next engine run's log): what follows is it, from byte 0."""

    inode: str


@dataclass(frozen=True, slots=True)
class FileWaiting:
    """The file does not exist yet; the follower looks again until it does."""


FollowEvent = FileData | FileReset | FileWaiting


def follow_event(frame: Frame) -> FollowEvent:
    """What ``frame`` says about the followed file."""
    match frame.kind:
        case FrameKind.DATA:
            return FileData(frame.payload)
        case FrameKind.RESET:
            return FileReset(frame.payload.decode("ascii", "replace"))
        case FrameKind.WAITING:
            return FileWaiting()
        case _:
            assert_never(frame.kind)


class FrameError(ValueError):
    pass


class FrameDecoder:
    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[Frame]:
        self._buf += data
        frames: list[Frame] = []
        while True:
            nl = self._buf.find(b"\n", 0, _MAX_HEADER + 1)
            if nl < 0:
                if len(self._buf) > _MAX_HEADER:
                    raise FrameError(f"not a frame header: {bytes(self._buf[:_MAX_HEADER])!r}")
                return frames
            header = bytes(self._buf[:nl]).split(b" ")
            if len(header) != 2 or header[0] not in _KINDS or not header[1].isdigit():
                raise FrameError(f"not a frame header: {bytes(self._buf[:nl])!r}")
            size = int(header[1])
            if len(self._buf) < nl + 1 + size:
                return frames
            payload = bytes(self._buf[nl + 1: nl + 1 + size])
            del self._buf[: nl + 1 + size]
            frames.append(Frame(FrameKind(header[0].decode()), payload))

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held back."""
        return len(self._buf)
