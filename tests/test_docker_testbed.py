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
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from sparktui.commands.exit_status import ExitStatus
from sparktui.config import SparkConfig
from sparktui.domain.events import EngineState, OperationView, StepStatus
from sparktui.remote.api_client import EngineApi
from sparktui.remote.engine import EngineController
from sparktui.remote.engine_wait import wait_until_ready
from tests.cli_helpers import run_sparktui
from tests.harness import Harness, explain, open_harness
from tests.harness import start_ready as shared_start_ready
from tests.leftovers import helpers_left, processes, read_until, sigkill_after, spawn_sparktui
from tests.lifecycle_helpers import lifecycle_overrides, make_model_dirs
from tests.testbed import Testbed, docker_image

pytestmark = [pytest.mark.testbed, pytest.mark.ray]

PREFIX = "sparktui"
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


def assert_clean(bed: Testbed, within: float = 10.0) -> None:
    """No container or process of ours on any host. A helper ends within a few seconds of the channel that
    started it closing (its stdin's EOF), so a helper of a just-closed dashboard is given ``within`` s."""
    for name in bed.names:
        assert [c for c in containers(bed, name) if c.startswith(PREFIX + "-")] == [], name
    left = helpers_left(bed, within)
    assert left == [], left
    for name in bed.names:
        assert processes(bed, name) == [], name



def harness(bed: Testbed, **engine: Any) -> contextlib.AbstractAsyncContextManager[Harness]:
    return open_harness(bed, docker_config(bed, **engine))


async def start_ready(h: Harness, controller: EngineController | None = None) -> None:
    await shared_start_ready(h, controller, timeout=180)


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


async def test_restarts_reattach_and_no_helper_outlives_its_channel(docker_testbed: Testbed,
                                                                    tmp_path: Path) -> None:
    bed = docker_testbed
    config = bed.write_config(tmp_path / "config.toml", **docker_overrides(bed))
    c = ("--config", str(config))
    async with harness(bed) as h:
        # A `start --wait` killed with SIGKILL while it waits: the engine runs on, its helpers end.
        sigkill_after((*c, "start", "--wait"), ("vllm serve: vLLM started detached", 240), ("stage", 60))
        assert helpers_left(bed) == []
        result = await wait_until_ready(h.controller, timeout=180)
        assert result.outcome == "ready", result.detail
        assert helpers_left(bed) == []

        for _ in range(2):
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
        sigkill_after((*c, "logs", "-f"), ("Application startup complete.", 60))
        assert helpers_left(bed) == []

        stop = await h.controller.stop()
        assert stop.ok, explain(stop)
        assert_clean(bed)


def failures_on(view: OperationView, node: str) -> dict[str, str]:
    return {s.name: s.message for s in view.steps if s.node == node and s.status is StepStatus.FAILED}


async def test_preflight_names_the_node_and_the_cause(docker_testbed: Testbed) -> None:
    bed = docker_testbed
    image = docker_image.IMAGE
    async with harness(bed) as h:
        # The image missing on the worker: start refused before anything runs.
        bed.docker("spark2", "tag", image, "keep:1")
        bed.docker("spark2", "rmi", image)
        try:
            view = await h.new_controller().start()
            assert not view.ok
            failed = failures_on(view, "spark2")
            assert failed["preflight: docker"] == (
                f"image {image} is not on spark2: `sparktui image sync` copies it from spark1 "
                f"(or `docker pull {image}` there)"), failed
            version = ("preflight: vLLM version", "spark2")
            asked = {s.status for s in view.steps if (s.name, s.node) == version}
            assert asked == {StepStatus.SKIPPED}
            assert_clean(bed)

            # Another image under the same name on the worker.
            bed.exec("spark2", ["env", "DOCKER_BUILDKIT=0", "docker", "build", "-q", "-t", image, "-"],
                     input="FROM keep:1\nLABEL sparktui.test=other\n", timeout=120, check=True)
            view = await h.new_controller().preflight()
            ids = {n: bed.docker(n, "image", "inspect", "--format", "{{.Id}}", image).stdout.strip()
                   for n in bed.names}
            assert ids["spark1"] != ids["spark2"]
            assert failures_on(view, "spark2")["preflight: same image"] == (
                f"image {ids['spark2']} differs from {ids['spark1']} on spark1: `sparktui image sync` copies "
                "the head's")
        finally:
            bed.docker("spark2", "tag", "keep:1", image)
            bed.docker("spark2", "rmi", "keep:1")
            bed.docker("spark2", "image", "prune", "-f")

        # The daemon down on the worker.
        bed.stop_dockerd("spark2")
        try:
            view = await h.new_controller().preflight()
            assert failures_on(view, "spark2")["preflight: docker"].startswith(
                "the docker daemon is not running (`sudo systemctl start docker`): Cannot connect to the "
                "Docker daemon at unix:///var/run/docker.sock")
        finally:
            bed.start_dockerd("spark2")

        # No docker on the worker at all.
        bed.hide_command("spark2", "docker")
        try:
            view = await h.new_controller().preflight()
            assert failures_on(view, "spark2")["preflight: docker"] == (
                "docker is not installed (no `docker` on PATH): install Docker (`apt install docker.io`)")
        finally:
            bed.unhide_commands("spark2")

        # The API port taken on the head by another container (host network, as ours).
        port = str(h.config.engine.api_port)
        bed.docker("spark1", "run", "-d", "--name", "other-web", "--network", "host",
                   "--entrypoint", "python3", image, "-m", "http.server", "--bind", "0.0.0.0", port)
        try:
            deadline = time.monotonic() + 30
            probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), 1)"
            while bed.exec("spark1", ["python3", "-c", probe]).returncode != 0:
                assert time.monotonic() < deadline, "the other container's server did not listen"
                time.sleep(0.2)
            view = await h.new_controller().start()
            assert not view.ok
            taken = failures_on(view, "spark1")["preflight: ports free"]
            assert taken.startswith(f"already in use: {port} (vLLM API)"), taken
            assert [c for c in containers(bed, "spark1") if c.startswith(PREFIX)] == []
        finally:
            bed.docker("spark1", "rm", "-f", "other-web")
        assert_clean(bed)


async def test_a_container_that_exits_under_us_is_named(docker_testbed: Testbed) -> None:
    bed = docker_testbed
    async with harness(bed) as h:
        view = await h.controller.start()
        assert view.ok, explain(view)
        bed.docker("spark2", "kill", f"{PREFIX}-ray-spark2")
        result = await wait_until_ready(h.controller, timeout=180)
        assert result.outcome == "failed", result
        assert "spark2" in result.detail, result.detail
        stop = await h.controller.stop()
        assert stop.ok, explain(stop)
        assert_clean(bed)


async def test_dashboard_s_to_ready_and_x_to_stopped(docker_testbed: Testbed, tmp_path: Path) -> None:
    from textual.widgets import Button, Static

    from sparktui.domain.history import HistoryStore
    from sparktui.remote.backend import SshBackend
    from sparktui.ui.app import SparkApp
    from tests.test_app_testbed import wait_until

    bed = docker_testbed
    make_model_dirs(bed)
    config = docker_config(bed)
    backend = SshBackend(config, history=HistoryStore(tmp_path / "runs.jsonl"))
    app = SparkApp(backend, config.ui, roles={n.name: n.role for n in config.nodes},
                   cluster_name=config.cluster.name)
    async with app.run_test(size=(160, 48)) as pilot:
        state = app.state
        # Generous: a loaded 2-core CI box (docker ps and the probes of two hosts at once).
        await wait_until(pilot, lambda: all(n.link_phase == "connected" for n in state.nodes.values()), 90,
                         "both nodes connected")
        await wait_until(pilot, lambda: state.engine.state is EngineState.STOPPED, 180, "discovered: stopped")
        await pilot.press("s")
        await wait_until(pilot, lambda: state.engine.state is EngineState.READY, 240, "ready")
        assert "ready" in app.export_screenshot().lower()
        names = {n: [c.split()[0] for c in containers(bed, n)] for n in bed.names}
        assert names == {"spark1": [f"{PREFIX}-ray-head"], "spark2": [f"{PREFIX}-ray-spark2"]}

        await pilot.press("x")
        await pilot.pause(0.3)
        await pilot.press("y")
        await wait_until(pilot, lambda: state.engine.state is EngineState.STOPPED, 240, "stopped")
        assert state.operation is not None and state.operation.kind == "stop" and state.operation.ok

        # Another sparktui's start: shown with its holder, the lifecycle buttons disabled meanwhile.
        config_file = bed.write_config(tmp_path / "config.toml", **docker_overrides(bed))
        other = spawn_sparktui("--config", str(config_file), "start")
        try:
            held = (f"held by another sparktui: start by `sparktui start` on {socket.gethostname()} "
                    f"(pid {other.pid})")
            await wait_until(pilot, lambda: state.operation is not None and state.operation.running
                             and state.operation.message.startswith(held), 120, "the other start shown")
            assert app.query_one("#btn-start", Button).disabled
            assert app.query_one("#btn-stop", Button).disabled
            shown = str(app.query_one("#operation-steps", Static).render())
            assert f"start: running — {held}" in shown.replace("\n", " "), shown
        finally:
            code = other.wait(timeout=400)
            said = other.stdout.read() if other.stdout is not None else ""
            assert code == 0, f"the other `sparktui start` exited {code}:\n{said}"
        await wait_until(pilot, lambda: state.operation is not None and not state.operation.running, 30,
                         "the other start over")
        assert not app.query_one("#btn-stop", Button).disabled
        await wait_until(pilot, lambda: state.engine.state is EngineState.READY, 240,
                         "ready (started by the other)")
        await pilot.press("x")
        await pilot.pause(0.3)
        await pilot.press("y")
        await wait_until(pilot, lambda: state.engine.state is EngineState.STOPPED, 240, "stopped again")
    assert_clean(bed)


def test_two_starts_at_once_exactly_one_runs_and_a_dead_holder_is_taken_over(docker_testbed: Testbed,
                                                                               tmp_path: Path) -> None:
    bed = docker_testbed
    make_model_dirs(bed)
    config = bed.write_config(tmp_path / "config.toml", **docker_overrides(bed))
    c = ("--config", str(config))
    me = socket.gethostname()
    try:
        first, second = spawn_sparktui(*c, "start"), spawn_sparktui(*c, "start")
        outs = {p.pid: p.communicate(timeout=400)[0] for p in (first, second)}
        codes = {p.pid: p.returncode for p in (first, second)}
        assert sorted(codes.values()) == [ExitStatus.OK, ExitStatus.BUSY], outs
        winner = next(pid for pid, code in codes.items() if code == 0)
        loser = next(pid for pid, code in codes.items() if code == ExitStatus.BUSY)
        refused = (rf"sparktui start: cannot start: start by `sparktui start` on {re.escape(me)} "
                   rf"\(pid {winner}\) since \d\d:\d\d is running; wait for it to finish")
        assert re.search(refused, outs[loser]), outs[loser]
        engines = [line for n in bed.names for line in processes(bed, n) if "vllm_standin serve" in line]
        assert len(engines) == 1, engines

        # A stop killed while it holds the lock: the next one takes the lock over and says from whom.
        killed = spawn_sparktui(*c, "stop")
        try:
            read_until(killed, "stop vLLM", 120)
        finally:
            killed.send_signal(signal.SIGKILL)
            killed.wait()
        stop = run_sparktui(*c, "stop", timeout=300)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        took = (rf"warn +spark1 +operation lock: took the operation lock over from stop by `sparktui stop` "
                rf"on {re.escape(me)} \(pid {killed.pid}\) since \d\d:\d\d: it is gone")
        assert re.search(took, stop.stdout), stop.stdout
    finally:
        run_sparktui(*c, "stop", timeout=300)
    assert_clean(bed)


def test_image_sync_copies_the_heads_image_to_a_node_without_it(docker_testbed: Testbed,
                                                                 tmp_path: Path) -> None:
    bed = docker_testbed
    image = docker_image.IMAGE
    config = bed.write_config(tmp_path / "config.toml", **docker_overrides(bed))
    want = bed.docker("spark1", "image", "inspect", "--format", "{{.Id}}", image).stdout.strip()
    bed.docker("spark2", "rmi", image)  # its only tag: the layers go too
    try:
        assert bed.docker("spark2", "image", "inspect", image, check=False).returncode != 0
        t0 = time.monotonic()
        done = run_sparktui("--config", str(config), "image", "sync", timeout=900)
        seconds = time.monotonic() - t0
        assert done.returncode == 0, done.stdout + done.stderr
        copied = r"spark2: copied: copied [\d,.]+ MB in [\d.]+ s \([\d,.]+ MB/s\); now " + re.escape(want)
        assert re.search(copied, done.stdout), done.stdout
        progress = r"^spark2: [\d,.]+ MB of [\d,.]+ MB \([\d,.]+ MB/s\)$"
        assert re.search(progress, done.stdout, re.M), done.stdout
        assert bed.docker("spark2", "image", "inspect", "--format", "{{.Id}}", image).stdout.strip() == want
        print(f"image sync: {seconds:.1f} s")
        again = run_sparktui("--config", str(config), "image", "sync", "--json", timeout=120)
        report = json.loads(again.stdout)
        assert report["ok"] and [n["action"] for n in report["nodes"]] == ["same", "same"], report
    finally:
        if bed.docker("spark2", "image", "inspect", image, check=False).returncode != 0:
            bed.docker("spark2", "load", "-q", "-i", str(docker_image.saved_image(bed)), timeout=600)
