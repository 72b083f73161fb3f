"""``sparktui upgrade IMAGE``: a new engine image tried with a way back.

In order, each a stage the user sees: the image on the head; the way back kept (the image in use, on every
node); the new image's vLLM checked on the head against this engine's flags and model; the new image on
every node (by image ID) — all before any downtime. Then the baseline (the serving engine's smoke test and
a short benchmark, or the last one of the same recipe in the bench history); the switch under one hold of
the operation lock (stop, start on the new image, ready, smoke, the same benchmark); and the verdict
(``domain/upgrade/verdict``): promoted (kept on the head, so every later start uses it) or rolled back by
itself to the image in use, verified serving again. The trial image is never kept on the head until
promoted: whatever interrupts the upgrade, the next start (the supervisor's) is on the previous image.
Each outcome is recorded in the images history (``domain/upgrade/images``). All along, the upgrade keeps
its progress on the head (``upgrade.json``, ``remote/upgrade_record``): each stage as it changes, a
heartbeat, then the outcome and the downtime — what a dashboard and ``sparktui status`` show of it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sparktui.domain.bench import BenchPlan, BenchRecord, bench_record
from sparktui.domain.bench_history import BenchStore
from sparktui.domain.upgrade import images as I
from sparktui.domain.upgrade import verdict as V
from sparktui.remote import upgrade_checks as C
from sparktui.remote.api_client import EngineApi, EngineApiError
from sparktui.remote.bench_runner import run_builtin_sweep
from sparktui.remote.engine import EngineController
from sparktui.remote.engine_wait import wait_until_ready
from sparktui.remote.image_store import read_image_in_use, write_image_in_use
from sparktui.remote.transport import TransportError
from sparktui.remote.upgrade_record import UpgradeRecorder

#: Who the upgrade is, in the operation lock and the image record.
ORIGIN = "`sparktui upgrade`"
#: The short benchmark run before and after the switch: the same plan both times.
BENCH_PLAN = BenchPlan(concurrency=(1, 4), input_len=128, output_len=64, requests=8, warmup=1)

#: ``(stage, status, message)``: status is "running", "ok", "failed", "skipped".
StageFn = Callable[[str, str, str], None]


@dataclass(frozen=True)
class Served:
    """One look at the engine through its API: the smoke test, and the short benchmark when asked."""

    smoke_ok: bool
    detail: str
    bench: BenchRecord | None = None

    def describe(self) -> str:
        if not self.smoke_ok:
            return f"not serving: {self.detail}"
        speeds = [f"{lv.output_tok_s:.1f} tok/s at {lv.concurrency}"
                  for lv in (self.bench.levels if self.bench else ()) if lv.output_tok_s]
        return ", ".join([self.detail, *speeds])


@dataclass
class UpgradeReport:
    image: str
    previous: str
    outcome: str = "refused"     # "promoted" | "rolled_back" | "refused" | "failed" | "checked" | "same"
    reason: str = ""
    image_id: str | None = None
    vllm_version: str | None = None
    previous_id: str | None = None
    baseline: BenchRecord | None = None
    #: Where the baseline came from: "measured now", "the bench history (…)", or why there is none.
    baseline_from: str = ""
    candidate: BenchRecord | None = None
    verdict: V.Verdict | None = None
    downtime_s: float | None = None
    stages: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"image": self.image, "previous": self.previous, "outcome": self.outcome,
                "reason": self.reason, "image_id": self.image_id, "vllm_version": self.vllm_version,
                "previous_id": self.previous_id, "baseline_from": self.baseline_from,
                "baseline": self.baseline.to_json() if self.baseline else None,
                "candidate": self.candidate.to_json() if self.candidate else None,
                "verdict": self.verdict.to_json() if self.verdict else None,
                "downtime_s": round(self.downtime_s, 1) if self.downtime_s is not None else None,
                "stages": self.stages}


class ImageUpgrade:
    def __init__(self, controller: EngineController, *, on_stage: StageFn, min_speed_ratio: float = 0.95,
                 ready_timeout: float = 1800.0,
                 confirm: Callable[[UpgradeReport], Awaitable[bool]] | None = None,
                 history: I.ImageHistory | None = None, benches: BenchStore | None = None) -> None:
        self.controller = controller
        self.on_stage = on_stage
        self.min_speed_ratio = min_speed_ratio
        self.ready_timeout = ready_timeout
        #: Asked once every check passed, before the switch stops the engine (``None``: go on).
        self.confirm = confirm
        self.history = history if history is not None else I.ImageHistory()
        self.benches = benches if benches is not None else BenchStore()
        #: The upgrade's progress on the head (each ``run`` begins its record anew).
        self.progress = UpgradeRecorder(controller.nodes, socket.gethostname(), os.getpid())

    def _stage(self, report: UpgradeReport, name: str, status: str, message: str) -> None:
        if status != "running":
            report.stages.append({"stage": name, "status": status, "message": message})
        self.on_stage(name, status, message)
        self.progress.stage(name, status, message, image_id=report.image_id, previous_id=report.previous_id)

    async def run(self, image: str, *, dry_run: bool = False) -> UpgradeReport:
        """The upgrade, its progress kept on the head from its first stage to its outcome (``upgrade.json``:
        what the dashboard and ``sparktui status`` show of it)."""
        report = UpgradeReport(image, "")
        try:
            await self._run(report, dry_run)
        except BaseException as exc:
            with contextlib.suppress(Exception):
                await self.progress.finish("interrupted", str(exc) or type(exc).__name__, report.downtime_s)
            raise
        await self.progress.finish(report.outcome, report.reason, report.downtime_s)
        return report

    async def _run(self, report: UpgradeReport, dry_run: bool) -> UpgradeReport:
        controller = self.controller
        nodes = controller.nodes
        config = controller.given_config
        image = report.image
        kept = await read_image_in_use(nodes)
        previous = I.start_image(config, kept)
        report.previous = kept.ref if kept is not None and kept.applies_to(config) else previous
        self.progress.begin(image, report.previous, dry_run=dry_run)
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
            report.outcome = "same"
            report.reason = f"{image} is the image in use ({I.short_id(head.image_id)})"
            say(report, "way back", "ok", report.reason)
            return report
        say(report, "way back", "ok", back.message)

        say(report, "check", "running", f"vLLM in {image}")
        checked = await C.vllm_of(nodes, config, image)
        report.vllm_version = checked.vllm_version
        if not checked.ok:
            return self._refused(report, "check", checked.message)
        arch = await C.architecture(nodes, config, image)
        if not arch.ok:
            return self._refused(report, "check", arch.message)
        say(report, "check", "ok", f"{checked.message}; {arch.message}")

        say(report, "distribute", "running", f"{I.short_id(head.image_id)} to every node")
        spread = await C.distribute(nodes, image, head.image_id, lambda node, sent, total, s: say(
            report, "distribute", "running", f"{node}: {sent / 1e6:.0f} MB in {s:.0f} s"))
        if not spread.ok:
            return self._refused(report, "distribute", spread.message)
        say(report, "distribute", "ok", spread.message)

        say(report, "baseline", "running", "smoke test and a short benchmark of the serving engine")
        baseline = await self._baseline(report, previous)
        say(report, "baseline", "ok" if report.baseline else "skipped", report.baseline_from)
        if dry_run:
            report.outcome, report.reason = "checked", "every check passed; nothing was changed (--dry-run)"
            return report
        if self.confirm is not None:
            # The record only (the report lists stages done): a dashboard shows what it waits for.
            self.progress.stage("switch", "pending", "waits for a yes: the switch stops the engine")
            if not await self.confirm(report):
                report.outcome, report.reason = "refused", "not confirmed: nothing was changed"
                return report

        async with controller.hold("upgrade"):
            down = time.monotonic()
            verdict = await self._try(report, image, baseline)
            report.verdict = verdict
            report.reason = verdict.reason
            if verdict.promote:
                stored = await write_image_in_use(nodes, I.ImageInUse(
                    image, head.image_id, report.vllm_version, config.engine.image, report.previous,
                    back.image_id, ORIGIN, socket.gethostname(), time.time()))
                if stored:
                    report.outcome = "promoted"
                    report.downtime_s = time.monotonic() - down
                    say(report, "promote", "ok", f"{image} is the image every start uses now")
                    self._record(report, I.ImageEvent.PROMOTED)
                    return report
                report.reason = ("the promotion could not be kept on the head (its link or disk): the next "
                                 "start would not use it")
            say(report, "promote", "failed", report.reason)
            back_ok = await self._roll_back(report, previous)
            report.downtime_s = time.monotonic() - down
            report.outcome = "rolled_back" if back_ok else "failed"
            self._record(report, I.ImageEvent.ROLLED_BACK)
            return report

    def _refused(self, report: UpgradeReport, stage: str, message: str) -> UpgradeReport:
        report.outcome, report.reason = "refused", f"{stage}: {message}"
        self._stage(report, stage, "failed", message + " — nothing was changed")
        self._record(report, I.ImageEvent.REFUSED)
        return report

    def _record(self, report: UpgradeReport, event: I.ImageEvent) -> None:
        figures = tuple(f.to_json() for f in report.verdict.figures) if report.verdict else ()
        with contextlib.suppress(OSError):   # the record is worth less than the upgrade's own outcome
            self.history.append(I.ImageRecord(
                time.time(), event, report.image, report.image_id, report.vllm_version, report.reason,
                figures, report.downtime_s, report.previous, report.previous_id,
                self.controller.config.cluster.name))

    async def _baseline(self, report: UpgradeReport, previous: str) -> V.Baseline:
        """The image in use, measured now (and its start-up log's warnings); else its last benchmark of the
        same recipe from the bench history; else none (the new image is then judged on serving alone)."""
        controller = self.controller
        now = await self._measure()
        warnings: frozenset[str] = frozenset()
        if now.smoke_ok and now.bench is not None:
            attached = await wait_until_ready(controller, timeout=60)   # the running engine's own log
            warnings = V.warning_classes(attached.timeline.get("facts", {}))
            report.baseline, report.baseline_from = now.bench, f"measured now: {now.describe()}"
            return V.Baseline(now.bench, warnings)
        engine = controller.given_config.engine
        try:
            earlier = V.baseline_from_history(self.benches.load(), image=previous, model=engine.model,
                                              flags=engine.extra_args)
        except OSError:
            earlier = None
        if earlier is not None:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(earlier.started_at))
            report.baseline, report.baseline_from = earlier, f"the bench history ({when}): not serving now"
        else:
            report.baseline_from = "none: not serving now, and no benchmark of this recipe in the history"
        return V.Baseline(earlier, warnings)

    async def _try(self, report: UpgradeReport, image: str, baseline: V.Baseline) -> V.Verdict:
        """Stop, start on ``image``, ready, smoke, benchmark: the verdict against the baseline."""
        controller = self.controller
        controller.trial_image = image
        self._stage(report, "switch", "running", f"stop, then start on {image}")
        view = await controller.restart(full=True)
        if not view.ok:
            self._stage(report, "switch", "failed", view.message)
            return V.decide(V.Candidate(False, "start", view.message), baseline, self.min_speed_ratio)
        self._stage(report, "switch", "running", "started: waiting for ready")
        waited = await wait_until_ready(controller, timeout=self.ready_timeout)
        if waited.outcome != "ready":
            self._stage(report, "switch", "failed", f"{waited.outcome}: {waited.detail}")
            return V.decide(V.Candidate(False, waited.stage, waited.detail), baseline, self.min_speed_ratio)
        self._stage(report, "switch", "ok", f"ready in {waited.seconds:.0f} s")
        self._stage(report, "verify", "running", "smoke test and the same short benchmark")
        served = await self._measure()
        report.candidate = served.bench
        if baseline.bench is None and served.smoke_ok:
            # Nothing to compare with: serving is the test (said so in the reason).
            verdict = V.Verdict(V.Decision.PROMOTE, f"it serves ({served.describe()}); no baseline to "
                                "compare its speed with", min_speed_ratio=self.min_speed_ratio)
        else:
            verdict = V.decide(V.Candidate(True, smoke_ok=served.smoke_ok, smoke_detail=served.detail,
                                           bench=served.bench,
                                           warnings=V.warning_classes(waited.timeline.get("facts", {}))),
                               baseline, self.min_speed_ratio)
        self._stage(report, "verify", "ok" if verdict.promote else "failed", verdict.reason)
        return verdict

    async def _roll_back(self, report: UpgradeReport, previous: str) -> bool:
        """Start the image in use again (the trial forgotten); a smoke test answered is the proof."""
        controller = self.controller
        controller.trial_image = None
        self._stage(report, "roll back", "running", f"stop, then start on {report.previous}")
        view = await controller.restart(full=True)
        waited = await wait_until_ready(controller, timeout=self.ready_timeout) if view.ok else None
        if waited is None or waited.outcome != "ready":
            why = view.message if waited is None else f"{waited.outcome}: {waited.detail}"
            self._stage(report, "roll back", "failed", f"{report.previous} did not come back: {why}")
            return False
        served = await self._measure(bench=False)
        if not served.smoke_ok:
            self._stage(report, "roll back", "failed", f"{report.previous} is ready but its smoke test "
                                                       f"failed: {served.detail}")
            return False
        self._stage(report, "roll back", "ok", f"serving again on {report.previous} "
                                               f"({I.short_id(previous)}): {served.describe()}")
        return True

    async def _measure(self, *, bench: bool = True) -> Served:
        """The smoke test and (``bench``) the short benchmark, through the head's link."""
        config = self.controller.config
        transport = self.controller.transports[config.head.name]
        try:
            api = await EngineApi.connect(transport, "127.0.0.1", config.engine.api_port)
        except (EngineApiError, TransportError, OSError) as exc:
            return Served(False, str(exc))
        try:
            model = config.engine.served_model_name or (await api.models())[0]
            smoke = await api.smoke_test(model, config.serving.smoke_prompt, config.serving.smoke_max_tokens)
            detail = (f"smoke {smoke.tokens_per_s:.1f} tok/s" if smoke.tokens_per_s else "smoke answered")
            if not bench:
                return Served(True, detail)
            started = time.time()
            version = await api.version()
            levels = (await run_builtin_sweep(api, model, BENCH_PLAN)).levels
            return Served(True, detail, bench_record(config, BENCH_PLAN, levels, client="builtin",
                                                     vllm_version=version, started_at=started))
        except (EngineApiError, TransportError, OSError, IndexError) as exc:
            return Served(False, str(exc))
        finally:
            await api.aclose()
