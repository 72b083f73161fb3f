"""The engine lifecycle with ``runtime = "docker"`` on real Docker Engines: two test hosts, each with its own
dockerd, the CI image (Ray 2.60 + the stand-in as ``vllm``) loaded into both by ``docker save``/``load``.

sparktui's argv is exactly what a Spark gets (``--gpus all``, ``--device /dev/infiniband``, memlock); only the
hardware is stood in for (the test bed's no-op NVIDIA hook, a uverbs node, the memlock clamp). Covered:
preflight (docker usable, one image ID, the image's vLLM version and flags, the model through the mounts);
start → ready; a chat completion; verified stop (no container, no process of ours, seen from outside on both
hosts); restart ×3; re-attach by a new process; failures named by node and cause. One docker test bed is
shared by the module (``docker_testbed``): every test leaves both hosts clean.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sparktui.config import SparkConfig
from sparktui.domain.events import EngineState, OperationView, StepStatus
from sparktui.remote.api_client import EngineApi
from sparktui.remote.cluster import close_cluster, open_cluster
from sparktui.remote.engine import EngineController
from sparktui.remote.engine_wait import wait_until_ready
from sparktui.remote.transport import Transport
from tests.cli_helpers import REPO, run_sparktui
from tests.lifecycle_helpers import lifecycle_overrides, make_model_dirs
from tests.testbed import Testbed, docker_image

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

PREFIX = "sparktui"
#: What of ours may run on a host, seen from outside: Ray, the stand-in, and sparktui's node-side helpers
#: (their script texts are in their command lines: the Ray probe prints RAYPROBE, the follower frames).
OURS = re.compile(r"raylet|gcs_server|ray::|vllm_standin|ray/_private|ray/dashboard|ray/autoscaler|"
                  r"ray\.util\.client|RAYPROBE|def frame\(|sparktui-(detach|stop|state)|docker exec")


def docker_overrides(bed: Testbed, **engine: Any) -> dict[str, Any]:
    """The test bed's lifecycle config, in containers: the image's ``vllm``, ``ray`` and ``python3``."""
    data = lifecycle_overrides(bed, **engine)
    data["engine"].update({
        "runtime": "docker", "image": docker_image.IMAGE, "name_prefix": PREFIX,
        "vllm_command": ["vllm"], "ray_command": ["ray"], "ray_python": ["python3"],
        "mounts": [{"source": "/tmp/models", "target": "/tmp/models", "read_only": True}],
        **engine,
    })
    return data


def docker_config(bed: Testbed, **engine: Any) -> SparkConfig:
    config: SparkConfig = bed.spark_config(**docker_overrides(bed, **engine))
    return config


def containers(bed: Testbed, name: str) -> list[str]:
    """Every container on host ``name`` (running or not), as ``name state``."""
    out = bed.docker(name, "ps", "-a", "--format", "{{.Names}} {{.State}}").stdout
    return [line for line in out.splitlines() if line.strip()]


def processes(bed: Testbed, name: str) -> list[str]:
    """Ray / vLLM / sparktui helper processes on a host (containers included), seen from outside."""
    out = bed.exec(name, ["ps", "-eo", "pid=,args="]).stdout
    return [line.strip() for line in out.splitlines() if OURS.search(line)]


#: sparktui's node-side helpers (not the engine): they must end with the channel that started them.
HELPERS = re.compile(r"RAYPROBE|def frame\(|sparktui-(stop|state)|docker exec")


def helpers_left(bed: Testbed, within: float = 10.0) -> list[str]:
    """The helper processes still there after ``within`` s (on both hosts, containers included)."""
    deadline = time.monotonic() + within
    while True:
        left = [f"{n}: {line[:160]}" for n in bed.names for line in processes(bed, n) if HELPERS.search(line)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def assert_clean(bed: Testbed) -> None:
    for name in bed.names:
        assert [c for c in containers(bed, name) if c.startswith(PREFIX + "-")] == [], name
        assert processes(bed, name) == [], name


def explain(view: OperationView) -> str:
    lines = [view.message] + [f"{s.status} {s.node} {s.name}: {s.message} {list(s.output_tail)[-3:]}"
                              for s in view.steps if s.status is not StepStatus.OK]
    return "\n".join(lines)


class Harness:
    def __init__(self, bed: Testbed, config: SparkConfig, transports: dict[str, Transport]) -> None:
        self.bed = bed
        self.config = config
        self.transports = transports
        self.controller = EngineController(config, transports)

    def new_controller(self) -> EngineController:
        return EngineController(self.config, self.transports)


@contextlib.asynccontextmanager
async def harness(bed: Testbed, **engine: Any) -> AsyncIterator[Harness]:
    make_model_dirs(bed)
    config = docker_config(bed, **engine)
    transports = await open_cluster(config)
    h = Harness(bed, config, transports)
    try:
        yield h
    finally:
        with contextlib.suppress(Exception):
            await h.new_controller().stop()
        await close_cluster(transports)


async def start_ready(h: Harness, controller: EngineController | None = None) -> None:
    c = controller or h.controller
    view = await c.start()
    assert view.ok, explain(view)
    result = await wait_until_ready(c, timeout=180)
    assert result.outcome == "ready", result.detail


async def test_preflight_start_chat_stop(docker_testbed: Testbed) -> None:
    bed = docker_testbed
    async with harness(bed) as h:
        pre = await h.controller.preflight()
        assert pre.ok, explain(pre)
        by_name = {(s.name, s.node): s for s in pre.steps}
        assert "image present" in by_name[("preflight: docker", "spark2")].message
        image_id = bed.docker("spark1", "image", "inspect", "--format", "{{.Id}}", docker_image.IMAGE).stdout
        for node in bed.names:
            assert by_name[("preflight: same image", node)].message == f"image {image_id.strip()}"
            assert by_name[("preflight: vLLM version", node)].message == "vLLM 0.8.3"
            assert by_name[("preflight: model files", node)].status is StepStatus.OK
        assert "flags known" in by_name[("preflight: vLLM help", "spark1")].message
        assert by_name[("preflight: vLLM flags", "spark1")].status is StepStatus.OK

        await start_ready(h)
        names = {n: [c.split()[0] for c in containers(bed, n)] for n in bed.names}
        assert names == {"spark1": [f"{PREFIX}-ray-head"], "spark2": [f"{PREFIX}-ray-spark2"]}
        found = await h.new_controller().discover()
        assert found.running and found.ray_readiness is not None and found.ray_readiness.ready

        api = await EngineApi.connect(h.transports["spark1"], port=h.config.engine.api_port)
        async with api:
            smoke = await api.smoke_test("standin", "Say hello in five words.", max_tokens=8)
        assert smoke.tokens == 8 and smoke.first_words(1)

        stop = await h.controller.stop()
        assert stop.ok, explain(stop)
        assert_clean(bed)
        assert (await h.controller.discover()).state is EngineState.STOPPED


def spawn_sparktui(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "sparktui", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def read_until(proc: subprocess.Popen[str], needle: str, timeout: float) -> str:
    """The process's output up to the first line containing ``needle`` (fails after ``timeout``)."""
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return "".join(seen)
    raise AssertionError(f"no {needle!r} in {timeout:.0f} s:\n{''.join(seen)}")


async def test_restarts_reattach_and_no_helper_outlives_its_channel(docker_testbed: Testbed,
                                                                    tmp_path: Path) -> None:
    bed = docker_testbed
    config = bed.write_config(tmp_path / "config.toml", **docker_overrides(bed))
    c = ("--config", str(config))
    async with harness(bed) as h:
        # A `start --wait` killed with SIGKILL while it waits: the engine runs on, its helpers end.
        start = spawn_sparktui(*c, "start", "--wait")
        try:
            read_until(start, "vllm serve: vLLM started detached", 240)
            read_until(start, "stage", 60)
        finally:
            start.send_signal(signal.SIGKILL)
            start.wait()
        assert helpers_left(bed) == []
        result = await wait_until_ready(h.controller, timeout=180)
        assert result.outcome == "ready", result.detail
        assert helpers_left(bed) == []

        for _ in range(3):
            view = await h.controller.restart(preflight=False)
            assert view.ok, explain(view)
            result = await wait_until_ready(h.controller, timeout=180)
            assert result.outcome == "ready", result.detail
            assert helpers_left(bed) == []

        # A new sparktui process re-attaches to the running engine.
        status = run_sparktui(*c, "status", "--json", timeout=120)
        engine = json.loads(status.stdout)["engine"]
        assert engine["state"] == "ready" and engine["vllm"]["spark1"]["status"] == "running", engine
        assert helpers_left(bed) == []

        # `start` on the running engine: it is the current run, not leftovers; --wait attaches to it.
        again = run_sparktui(*c, "start", "--wait", timeout=180)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "start: done: already running (vLLM running (spark1 pid" in again.stdout
        assert "engine: ready" in again.stdout
        assert helpers_left(bed) == []

        # `logs -f` killed: its follower on the head ends although the log is not written any more.
        follow = spawn_sparktui(*c, "logs", "-f")
        try:
            read_until(follow, "Application startup complete.", 60)
        finally:
            follow.send_signal(signal.SIGKILL)
            follow.wait()
        assert helpers_left(bed) == []

        stop = await h.controller.stop()
        assert stop.ok, explain(stop)
        assert_clean(bed)
