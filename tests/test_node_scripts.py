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

import pytest

from sparktui.domain.lifecycle import scripts as S
from sparktui.domain.lifecycle.oplock import LockAnswer, LockHolder, refusal

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
    with pytest.raises(subprocess.TimeoutExpired):  # following a log nobody writes: nothing to write,
        proc.wait(timeout=0.5)                        # still alive after its polls (0.2 s apart)
    proc.stdin.close()
    assert proc.wait(timeout=5) == 0


def _take(path: Path, holder: LockHolder) -> tuple[subprocess.Popen[bytes], LockAnswer | None]:
    proc = subprocess.Popen([sys.executable, "-c", S.LOCK_PY, "take", str(path), holder.to_json()],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    return proc, LockAnswer.parse(proc.stdout.readline().decode())


def _show(path: Path) -> LockAnswer | None:
    out = subprocess.run([sys.executable, "-c", S.LOCK_PY, "show", str(path)], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    return LockAnswer.parse(out)


def test_operation_lock_one_holder_refusal_names_it_clean_release_and_takeover(tmp_path: Path) -> None:
    path = tmp_path / "state" / "operation.lock"
    first = LockHolder("restart", "`sparktui restart`", "laptop2", 4242, time.time())
    second = LockHolder("start", "the dashboard", "desk", 77, time.time())
    assert _show(path) == LockAnswer("free")

    a, taken = _take(path, first)
    assert taken == LockAnswer("taken", None)
    b, refused = _take(path, second)
    assert refused == LockAnswer("held", first) and b.wait(timeout=10) == 3
    assert _show(path) == LockAnswer("held", first)

    # A clean release: the next taker finds nobody before it.
    assert a.stdin is not None
    a.stdin.write(b"release\n")
    a.stdin.close()
    assert a.wait(timeout=10) == 0
    c, taken = _take(path, second)
    assert taken == LockAnswer("taken", None)

    # The holder vanished (its channel closed without a release): the lock is free, and the next taker
    # learns whom it took it from.
    assert c.stdin is not None
    c.stdin.close()
    assert c.wait(timeout=10) == 0
    assert _show(path) == LockAnswer("free")
    d, taken = _take(path, first)
    assert taken == LockAnswer("taken", second)
    assert d.stdin is not None
    d.stdin.close()
    d.wait(timeout=10)


def test_lock_holder_in_words() -> None:
    started = time.mktime((2026, 12, 1, 10, 2, 0, 0, 0, -1))
    holder = LockHolder("restart", "`sparktui restart`", "laptop2", 4242, started)
    assert holder.describe() == "restart by `sparktui restart` on laptop2 (pid 4242) since 10:02"
    assert refusal("start", holder) == ("cannot start: restart by `sparktui restart` on laptop2 (pid 4242) "
                                        "since 10:02 is running; wait for it to finish")
