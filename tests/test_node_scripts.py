"""The node-side scripts' lifetimes and process finding, run here for real (standard library scripts).

* ``ours(tag)`` finds a tagged process's descendants whose environment lost the tag (Ray's agents rewrite
  theirs with setproctitle), and ``stop`` ends them too;
* the streaming helpers (Ray probe, log follower) end as soon as their stdin reaches EOF, even when they
  have nothing to write (a quiet log): the channel that started them closed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from sparktui.domain.lifecycle import scripts as S

TAG = "sparktui-test/node"


def _tagged(tag: str, *argv: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SPARKTUI_TAG": tag}
    return subprocess.Popen(list(argv), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


def _tagged_py(*args: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", S.TAGGED_PY, *args], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def test_a_descendant_that_lost_the_tag_is_found_and_stopped() -> None:
    tag = f"{TAG}-{os.getpid()}"
    # The child's environment has no tag (as a setproctitle'd Ray agent's); only its parent carries it.
    parent = _tagged(tag, "sh", "-c", 'env -u SPARKTUI_TAG sleep 300 & echo $! >/dev/null; wait')
    try:
        deadline = time.monotonic() + 10
        while True:
            procs = _tagged_py("list", tag)["processes"]
            assert isinstance(procs, list)
            if len(procs) == 2 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert sorted(str(p["cmdline"]).split()[0] for p in procs) == ["sh", "sleep"], procs
        stopped = _tagged_py("stop", tag, "2")
        assert stopped["processes"] == []
        assert len(stopped["signalled"]) >= 2  # type: ignore[arg-type]
    finally:
        parent.kill()
        parent.wait()


def test_follower_ends_when_its_stdin_closes_on_a_quiet_log(tmp_path: Path) -> None:
    log = tmp_path / "quiet.log"
    log.write_bytes(b"one line\n")
    proc = subprocess.Popen([sys.executable, "-c", S.FOLLOW_PY, str(log), "0", "", "0.2", "stdin"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline().startswith(b"R ")
    time.sleep(0.5)
    assert proc.poll() is None  # following a log nobody writes: nothing to write, still alive
    proc.stdin.close()
    assert proc.wait(timeout=5) == 0
