"""A stand-in for ``nvidia-smi -L`` on GPU-less test hosts, answering as a real image does.

Prints the GB10's line in ``nvidia-smi -L``'s format (as recorded from a real driver, see
``tests/fixtures/telemetry/h200/nvidia-smi-L.txt``) once per GPU. How many: the file
``/tmp/sparktui-standin-gpus`` (each test host has a private /tmp), else 1. With 0 it answers as the
driver does when a container was started without ``--gpus all``: "No devices were found", exit 6.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

COUNT_FILE = Path(os.environ.get("SPARKTUI_STANDIN_GPUS_FILE", "/tmp/sparktui-standin-gpus"))
UUIDS = ("GPU-5e1c7a3d-2b9f-4c1e-8f0a-1d2e3f4a5b6c", "GPU-7f2d8b4e-3c0a-4d2f-9e1b-2e3f4a5b6c7d")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args != ["-L"]:
        print("stand-in nvidia-smi: only -L is answered", file=sys.stderr)
        return 2
    try:
        count = int(COUNT_FILE.read_text().strip())
    except (OSError, ValueError):
        count = 1
    if count <= 0:
        print("No devices were found")
        return 6
    for i in range(count):
        print(f"GPU {i}: NVIDIA GB10 (UUID: {UUIDS[i % len(UUIDS)]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
