"""Running the real ``sparktui`` CLI in a subprocess, as a user does."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_sparktui(
    *args: str, cwd: Path = REPO, env: Mapping[str, str] | None = None, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    """``python -m sparktui ARGS`` in ``cwd``. The caller's ``$SPARKTUI_CONFIG`` is dropped, so only the
    config the test names (``--config``, ``env``, or ``cwd/config.toml``) counts."""
    base = {k: v for k, v in os.environ.items() if k != "SPARKTUI_CONFIG"}
    return subprocess.run([sys.executable, "-m", "sparktui", *args], capture_output=True, text=True,
                          cwd=cwd, env={**base, **(env or {})}, timeout=timeout)
