"""argv: PATH OFFSET INODE POLL [stdin]. Streams a growing file as frames on stdout: ``D <n>\\n`` + n bytes
of data, ``R <inode>\\n`` when the file is (or became) another file than INODE (offset restarts at 0: a new
engine run), ``W 0\\n`` while the file does not exist. Resuming with the last OFFSET and INODE after a
dropped connection therefore loses and repeats nothing. Ends when its channel closes."""

from __future__ import annotations

import os
import sys
import time
from typing import BinaryIO

from sparktui.node.stdin_watch import end_with_stdin


def frame(out: BinaryIO, kind: bytes, data: bytes = b"", n: int | None = None) -> None:
    out.write(b"%s %d\n" % (kind, len(data) if n is None else n) + data)
    out.flush()


def follow(path: str, offset: int, ino: str, poll: float, out: BinaryIO) -> None:
    f: BinaryIO | None = None
    waiting = False
    while True:
        if f is None:
            try:
                f = open(path, "rb")  # noqa: SIM115 - held open across reads, closed on rotation
            except FileNotFoundError:
                if not waiting:
                    frame(out, b"W", n=0)
                    waiting = True
                time.sleep(poll)
                continue
            waiting = False
            st = os.fstat(f.fileno())
            if str(st.st_ino) != ino or st.st_size < offset:
                ino, offset = str(st.st_ino), 0
                frame(out, b"R", ino.encode())
            f.seek(offset)
        data = f.read(262144)
        if data:
            offset += len(data)
            frame(out, b"D", data)
            continue
        now: os.stat_result | None
        try:
            now = os.stat(path)
        except FileNotFoundError:
            now = None
        if now is None or str(now.st_ino) != ino:
            rest = f.read()
            if rest:
                offset += len(rest)
                frame(out, b"D", rest)
            f.close()
            f = None
            continue
        if now.st_size < offset:
            f.close()
            f, ino = None, ""
            continue
        time.sleep(poll)


def main(argv: list[str]) -> None:
    argv = end_with_stdin(argv)
    follow(os.path.expanduser(argv[0]), int(argv[1]), argv[2], float(argv[3]), sys.stdout.buffer)


if __name__ == "__main__":
    main(sys.argv[1:])
