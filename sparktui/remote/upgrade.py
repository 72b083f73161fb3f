"""``sparktui upgrade IMAGE``: a new engine image tried with a way back.

In order, each a stage the user sees: the image on the head and then on every node (by image ID), the way
back kept (the image in use, on every node), the new image's vLLM checked against this engine's flags — all
before any downtime — then the baseline (the serving engine's smoke test and a short benchmark), the switch
under one hold of the operation lock (stop, start on the new image, ready, smoke, the same benchmark), and
the verdict: promoted (kept on the head, so every later start uses it) or rolled back by itself to the
image in use, verified serving again. The trial image is never kept on the head until promoted: whatever
interrupts the upgrade, the next start (the supervisor's) is on the previous image.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sparktui.domain.bench import BenchPlan, LevelResult
from sparktui.domain.lifecycle.image_in_use import ImageInUse, short_id
from sparktui.domain.upgrade_verdict import Figures, Verdict, decide
from sparktui.remote import upgrade_checks as C
from sparktui.remote.api_client import EngineApi, EngineApiError
from sparktui.remote.bench_runner import run_builtin_sweep
from sparktui.remote.engine import EngineController
from sparktui.remote.engine_wait import wait_until_ready
from sparktui.remote.image_store import read_image_in_use, write_image_in_use
from sparktui.remote.transport import TransportError

#: Who the upgrade is, in the operation lock and the image record.
ORIGIN = "`sparktui upgrade`"
#: The short benchmark run before and after the switch: the same plan both times.
BENCH_PLAN = BenchPlan(concurrency=(1, 4), input_len=128, output_len=64, requests=8, warmup=1)

#: ``(stage, status, message)``: status is "running", "ok", "failed", "skipped".
StageFn = Callable[[str, str, str], None]


@dataclass
class UpgradeReport:
    image: str
    previous: str
    outcome: str = "refused"     # "promoted" | "rolled_back" | "refused" | "failed" | "checked" | "same"
    reason: str = ""
    image_id: str | None = None
    vllm_version: str | None = None
    previous_id: str | None = None
    baseline: Figures | None = None
    candidate: Figures | None = None
    downtime_s: float | None = None
    stages: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"image": self.image, "previous": self.previous, "outcome": self.outcome,
                "reason": self.reason, "image_id": self.image_id, "vllm_version": self.vllm_version,
                "previous_id": self.previous_id,
                "baseline": self.baseline.to_json() if self.baseline else None,
                "candidate": self.candidate.to_json() if self.candidate else None,
                "downtime_s": round(self.downtime_s, 1) if self.downtime_s is not None else None,
                "stages": self.stages}


class ImageUpgrade:
    def __init__(self, controller: EngineController, *, on_stage: StageFn, min_speed_ratio: float = 0.95,
                 ready_timeout: float = 1800.0,
                 confirm: Callable[[UpgradeReport], Awaitable[bool]] | None = None) -> None:
        self.controller = controller
        #: Asked once every check passed, before the switch stops the engine (``None``: go on).
        self.confirm = confirm
        self.on_stage = on_stage
        self.min_speed_ratio = min_speed_ratio
        self.ready_timeout = ready_timeout

    def _stage(self, report: UpgradeReport, name: str, status: str, message: str) -> None:
        if status != "running":
            report.stages.append({"stage": name, "status": status, "message": message})
        self.on_stage(name, status, message)

    async def run(self, image: str, *, dry_run: bool = False) -> UpgradeReport:
        controller = self.controller
        nodes = controller.nodes
        kept = await read_image_in_use(nodes)
        previous = kept.image if kept is not None else controller.given_config.engine.image
        report = UpgradeReport(image, previous)
        say = self._stage

        say(report, "image", "running", f"{image} on the head")
        head = await C.on_head(nodes, image, lambda m: say(report, "image", "running", m))
        if not head.ok or head.image_id is None:
            return self._refused(report, "image", head.message)
        report.image_id = head.image_id
        say(report, "image", "ok", head.message)
        back = await C.rollback_target(nodes, previous)
        if not back.ok:
            return self._refused(report, "way back", back.message)
        report.previous_id = back.image_id
        if back.image_id == head.image_id:
            report.outcome, report.reason = "same", f"{image} is the image in use ({short_id(head.image_id)})"
            say(report, "way back", "ok", report.reason)
            return report
        say(report, "way back", "ok", back.message)

        say(report, "distribute", "running", f"{short_id(head.image_id)} to every node")
        spread = await C.distribute(nodes, image, head.image_id, lambda node, sent, total, s: say(
            report, "distribute", "running", f"{node}: {sent / 1e6:.0f} MB in {s:.0f} s"))
        if not spread.ok:
            return self._refused(report, "distribute", spread.message)
        say(report, "distribute", "ok", spread.message)

        say(report, "check", "running", f"vLLM in {image}")
        checked = await C.vllm_of(nodes, controller.given_config, image)
        report.vllm_version = checked.vllm_version
        if not checked.ok:
            return self._refused(report, "check", checked.message)
        say(report, "check", "ok", checked.message)

        say(report, "baseline", "running", "smoke test and a short benchmark of the serving engine")
        report.baseline = await self._measure()
        say(report, "baseline", "ok" if report.baseline.served else "skipped",
            report.baseline.describe() if report.baseline.served
            else "not serving now: the new image is judged on ready and smoke alone")
        if dry_run:
            report.outcome, report.reason = "checked", "every check passed; nothing was changed (--dry-run)"
            return report
        if self.confirm is not None and not await self.confirm(report):
            report.outcome, report.reason = "refused", "not confirmed: nothing was changed"
            return report

        async with controller.hold("upgrade"):
            down = time.monotonic()
            verdict = await self._try(report, image)
            if verdict.promote:
                stored = await write_image_in_use(nodes, ImageInUse(
                    image, head.image_id, report.vllm_version, previous, back.image_id, ORIGIN,
                    socket.gethostname(), time.time()))
                if stored:
                    report.outcome, report.reason = "promoted", verdict.reason
                    report.downtime_s = time.monotonic() - down
                    say(report, "promote", "ok", f"{image} is the image every start uses now")
                    return report
                verdict = Verdict(False, "the promotion could not be kept on the head (its link or disk): "
                                         "the next start would not use it")
            say(report, "promote", "failed", verdict.reason)
            report.reason = verdict.reason
            back_ok = await self._roll_back(report, previous)
            report.downtime_s = time.monotonic() - down
            report.outcome = "rolled_back" if back_ok else "failed"
            return report

    def _refused(self, report: UpgradeReport, stage: str, message: str) -> UpgradeReport:
        report.outcome, report.reason = "refused", f"{stage}: {message}"
        self._stage(report, stage, "failed", message + " — nothing was changed")
        return report

    async def _try(self, report: UpgradeReport, image: str) -> Verdict:
        """Stop, start on ``image``, ready, smoke, benchmark: the verdict against the baseline."""
        controller = self.controller
        controller.trial_image = image
        self._stage(report, "switch", "running", f"stop, then start on {image}")
        view = await controller.restart(full=True)
        if not view.ok:
            self._stage(report, "switch", "failed", view.message)
            return Verdict(False, f"the start on {image} failed: {view.message}")
        self._stage(report, "switch", "running", "started: waiting for ready")
        waited = await wait_until_ready(controller, timeout=self.ready_timeout)
        if waited.outcome != "ready":
            where = f" at {waited.stage}" if waited.stage else ""
            self._stage(report, "switch", "failed", f"{waited.outcome}{where}: {waited.detail}")
            return Verdict(False, f"{image} was not ready ({waited.outcome}{where}): {waited.detail}")
        self._stage(report, "switch", "ok", f"ready in {waited.seconds:.0f} s")
        self._stage(report, "verify", "running", "smoke test and the same short benchmark")
        report.candidate = await self._measure()
        verdict = decide(report.baseline, report.candidate, self.min_speed_ratio)
        self._stage(report, "verify", "ok" if verdict.promote else "failed", verdict.reason)
        return verdict

    async def _roll_back(self, report: UpgradeReport, previous: str) -> bool:
        """Start the image in use again (the trial forgotten); serving again is the proof."""
        controller = self.controller
        controller.trial_image = None
        self._stage(report, "roll back", "running", f"stop, then start on {previous}")
        view = await controller.restart(full=True)
        waited = await wait_until_ready(controller, timeout=self.ready_timeout) if view.ok else None
        if waited is None or waited.outcome != "ready":
            why = view.message if waited is None else f"{waited.outcome}: {waited.detail}"
            self._stage(report, "roll back", "failed", f"{previous} did not come back: {why}")
            return False
        served = await self._measure(bench=False)
        if not served.served:
            self._stage(report, "roll back", "failed", f"{previous} is ready but its smoke test failed: "
                                                       f"{served.error}")
            return False
        self._stage(report, "roll back", "ok", f"serving again on {previous}: {served.describe()}")
        return True

    async def _measure(self, *, bench: bool = True) -> Figures:
        """The smoke test and (``bench``) the short benchmark, through the head's link."""
        config = self.controller.config
        transport = self.controller.transports[config.head.name]
        try:
            api = await EngineApi.connect(transport, "127.0.0.1", config.engine.api_port)
        except (EngineApiError, TransportError, OSError) as exc:
            return Figures(served=False, error=str(exc))
        try:
            model = config.engine.served_model_name or (await api.models())[0]
            smoke = await api.smoke_test(model, config.serving.smoke_prompt, config.serving.smoke_max_tokens)
            levels: list[LevelResult] = []
            if bench:
                levels = (await run_builtin_sweep(api, model, BENCH_PLAN)).levels
            return Figures.of(smoke.tokens_per_s, levels)
        except (EngineApiError, TransportError, OSError, IndexError) as exc:
            return Figures(served=False, error=str(exc))
        finally:
            await api.aclose()
