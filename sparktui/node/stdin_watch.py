"""For the streaming scripts (Ray probe, log follower): with ``stdin`` as their last argument they end as
soon as their stdin reaches EOF — when the channel that started them closes, or the sparktui that opened
it dies. A write to a closed channel is not enough: under ``docker exec`` the container's shim holds the
output open (the docker client dies, the script never sees a broken pipe), and a follower of a quiet log
writes nothing for hours. ``docker exec -i`` carries the EOF into the container."""

from __future__ import annotations

import os
import threading


def _until_stdin_closes() -> None:
    def watch() -> None:
        try:
            while os.read(0, 65536):
                pass
        except OSError:
            pass
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def end_with_stdin(argv: list[str]) -> list[str]:
    """``argv`` without a last ``stdin``; when it had one, the process ends at its stdin's EOF from now."""
    if argv and argv[-1] == "stdin":
        _until_stdin_closes()
        return argv[:-1]
    return argv
