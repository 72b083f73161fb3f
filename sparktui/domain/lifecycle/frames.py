"""Decoding the node-side follower's frames (``scripts.FOLLOW_PY``): data, reset, waiting.

Bytes only count once their whole frame has arrived, so a connection that drops mid-frame loses nothing:
the follower resumes from the last complete frame's end offset.
"""

from __future__ import annotations

from dataclasses import dataclass

#: A header line longer than this is not a frame header (protects memory on garbage input).
_MAX_HEADER = 64


@dataclass(frozen=True)
class Frame:
    kind: str          # "D" data, "R" reset (new file; payload = its inode), "W" waiting for the file
    payload: bytes = b""


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
            if len(header) != 2 or header[0] not in (b"D", b"R", b"W") or not header[1].isdigit():
                raise FrameError(f"not a frame header: {bytes(self._buf[:nl])!r}")
            size = int(header[1])
            if len(self._buf) < nl + 1 + size:
                return frames
            payload = bytes(self._buf[nl + 1: nl + 1 + size])
            del self._buf[: nl + 1 + size]
            frames.append(Frame(header[0].decode(), payload))

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held back."""
        return len(self._buf)
