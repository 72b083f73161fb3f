"""Fix actions: a failed preflight check that a command repairs names it (image missing or of another ID on
a node → ``sparktui image sync``; the model directory missing or different on a node → ``sparktui model
sync``); the verbs print it, and the dashboard's ``F`` key runs it after asking (Textual's pilot)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from sparktui.config import parse_config
from sparktui.domain.events import OperationChanged, OperationView, StepStatus, StepView
from sparktui.domain.keys import DEFAULT_KEYS
from sparktui.domain.lifecycle import preflight as F
from sparktui.domain.lifecycle.docker_diag import image_problem
from sparktui.domain.lifecycle.fixes import Fix, fixes_for
from sparktui.ui.app import SparkApp
from sparktui.ui.screens.confirm import ConfirmScreen
from tests.ui_fakes import FakeBackend, notifications, settle


def facts(model: object) -> F.PreflightFacts:
    return F.PreflightFacts.parse(json.dumps({"hostname": "h", "home": "/home/u", "model": model}))


def config(**engine: object):  # type: ignore[no-untyped-def]
    return parse_config({"nodes": [{"name": "spark1", "host": "a", "role": "head"},
                                   {"name": "spark2", "host": "b"}],
                         "engine": {"runtime": "host", "model": "~/models/m", **engine}})


MODEL = {"exists": True, "files": [["config.json", 10], ["w.safetensors", 100]], "total_bytes": 110}


def failed(views: Sequence[StepView]) -> list[StepView]:
    return [v for v in views if v.status is StepStatus.FAILED]


def test_model_checks_name_model_sync_where_the_head_has_the_model() -> None:
    cfg = config()
    missing = F.check_model(cfg, {"spark1": facts(MODEL), "spark2": facts({"exists": False})})
    (bad,) = failed(missing)
    assert bad.message == "/home/u/models/m: no such directory; `sparktui model sync` copies it from spark1"
    other = dict(MODEL, files=[["config.json", 10], ["w.safetensors", 99]])
    (bad,) = failed(F.check_model(cfg, {"spark1": facts(MODEL), "spark2": facts(other)}))
    assert bad.message.endswith("(2 files, 0.00 GiB); `sparktui model sync` copies it from spark1")
    # The head itself lacks it: there is nothing to copy from, so no fix is offered.
    (bad,) = failed(F.check_model(cfg, {"spark1": facts({"exists": False}), "spark2": facts(MODEL)}))
    assert "sparktui model sync" not in bad.message
    assert fixes_for(missing) == [Fix("model_sync", "sparktui model sync", ("spark2",))]


def test_image_checks_name_image_sync() -> None:
    views = F.check_same("same image", {"spark1": "sha256:a", "spark2": "sha256:b"}, "image", "spark1",
                         fix="sparktui image sync")
    assert failed(views)[0].message == ("image sha256:b differs from sha256:a on spark1: "
                                       "`sparktui image sync` copies the head's")
    # vLLM versions have no fix.
    (vllm,) = failed(F.check_same("same vLLM", {"spark1": "0.1", "spark2": "0.2"}, "vLLM", "spark1"))
    assert "`" not in vllm.message
    missing = StepView("preflight: docker", "spark3", StepStatus.FAILED,
                       message=image_problem("img:1", "spark3", "spark1", "", "Error: No such image: img:1"))
    shown = [StepView(f"preflight: {v.name}", v.node, v.status, message=v.message) for v in views]
    fixes = fixes_for([*shown, missing])
    assert fixes == [Fix("image_sync", "sparktui image sync", ("spark2", "spark3"))]
    assert fixes[0].describe() == "`sparktui image sync` copies the head's image to spark2, spark3"
    # A docker check that failed for another reason offers nothing.
    assert fixes_for([StepView("preflight: docker", "spark2", StepStatus.FAILED, message="docker is not "
                               "installed (no `docker` on PATH)")]) == []
    assert DEFAULT_KEYS["fix"] == "F"


FAILED_PREFLIGHT = OperationView(
    "start", running=False, ok=False, message="preflight failed: spark2: model files: …",
    steps=(StepView("preflight: model files", "spark2", StepStatus.FAILED,
                    message="/tmp/m: no such directory; `sparktui model sync` copies it from spark1"),),
    started=1000.0)


async def test_f_runs_the_offered_fix_after_asking() -> None:
    asked: list[str] = []

    async def run_fix(fix_id: str) -> str:
        asked.append(fix_id)
        return "spark2: copied: 4 file(s), 2,400.0 MB"

    backend = FakeBackend()
    app = SparkApp(backend, roles={"spark1": "head", "spark2": "worker"}, fix=run_fix)
    async with app.run_test(size=(140, 44)) as pilot:
        await settle(pilot, app)
        await pilot.press("F")
        await settle(pilot, app)
        assert "no failed check offers a fix" in notifications(app)
        backend.post(OperationChanged(FAILED_PREFLIGHT))
        await settle(pilot, app)
        # The failure's toast names the key and the command.
        assert any(n.startswith("F: `sparktui model sync` copies the head's model directory to spark2")
                   for n in notifications(app)), notifications(app)
        await pilot.press("F")
        await settle(pilot, app)
        assert isinstance(app.screen, ConfirmScreen)
        assert "Run `sparktui model sync` copies the head's model directory to spark2?" in app.screen.question
        await pilot.press("n")
        await settle(pilot, app)
        assert asked == []
        await pilot.press("F")
        await settle(pilot, app)
        await pilot.press("y")
        await settle(pilot, app)
        running = [w for w in app.workers if w.group == "fix"]
        if running:  # an empty list would mean every worker, the backend's too
            await app.workers.wait_for_complete(running)
        await settle(pilot, app)
        assert asked == ["model_sync"]
        assert "spark2: copied: 4 file(s), 2,400.0 MB" in notifications(app)
        assert app.refusal() is None
