"""The dashboard's operations: start, restart and stop (asking first where it stops serving), the smoke
test, the benchmark, the link test, the fixes a failed preflight offers, and quitting (never the engine)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from textual import work
from textual.widgets import Button

from sparktui.domain.bench import BenchRecord
from sparktui.domain.bench_chart import BenchDone, chart_of, latest_run
from sparktui.domain.engine_state import RUNNING
from sparktui.domain.events import ClusterBackend, EngineState, OperationRefused
from sparktui.domain.lifecycle.fixes import Fix
from sparktui.ui.controls import Controls
from sparktui.ui.screens.bench_chart import BenchChartScreen
from sparktui.ui.screens.confirm import ConfirmScreen
from sparktui.ui.widgets.engine_panel import ServingView


class Operations(Controls):
    """Part of ``SparkApp`` (``sparktui.ui.app``), which sets what is declared here."""

    backend: ClusterBackend
    bench_runner: Callable[[], Awaitable[BenchDone]] | None
    bench_history: Callable[[], Sequence[BenchRecord]] | None
    linktest_runner: Callable[[], Awaitable[str]] | None
    #: Runs a fix by its id (``image_sync``, ``model_sync``) and returns its one-line outcome.
    fix_runner: Callable[[str], Awaitable[str]] | None
    #: The operation (by its start time) whose fixes were last offered in a toast.
    _fix_offered: float | None
    smoke_result: str | None
    exit_message: str | None

    def on_button_pressed(self, event: Button.Pressed) -> None:
        actions = {"btn-start": self.action_start, "btn-restart": self.action_restart,
                   "btn-stop": self.action_stop, "btn-smoke": self.action_smoke_test}
        handler = actions.get(event.button.id or "")
        if handler is not None:
            event.stop()
            handler()

    def action_start(self) -> None:
        self._lifecycle("start", self.backend.start)

    def action_restart(self) -> None:
        self._confirmed("restart", self.backend.restart,
                        "Restart the engine? Serving stops until it is ready again.")

    def action_stop(self) -> None:
        self._confirmed("stop", self.backend.stop,
                        "Stop the engine on every node (vLLM, Ray and our containers)?")

    def _confirmed(self, kind: str, operation: Callable[[], Awaitable[object]], question: str) -> None:
        if self._refused(kind):
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._lifecycle(kind, operation)

        self.push_screen(ConfirmScreen(question, yes=kind.capitalize()), answered)

    def _lifecycle(self, kind: str, operation: Callable[[], Awaitable[object]]) -> None:
        """Run the backend's ``operation`` (its start, restart or stop; ``kind`` names it in messages)."""
        if not self._refused(kind):
            self._call_backend(kind, operation)   # the backend says it took it on (OperationBusy)

    @work(group="lifecycle", exit_on_error=False)
    async def _call_backend(self, kind: str, operation: Callable[[], Awaitable[object]]) -> None:
        try:
            await operation()
        except OperationRefused as exc:
            self.notify(str(exc) or "another operation is running", title=f"{kind} refused",
                        severity="warning")
        except Exception as exc:
            self.notify(f"{kind} failed: {exc}", severity="error", timeout=20)

    #: States in which something of ours runs on the nodes (quitting leaves it running: say so).
    RUNNING_STATES = RUNNING | {EngineState.PREFLIGHT, EngineState.STOPPING}

    async def action_quit(self) -> None:
        """Quit the dashboard, never the engine — and say so once, on the terminal, when one runs."""
        message = None
        if self.state.engine.state in self.RUNNING_STATES and self.backend.detached:
            message = "the engine keeps running on the nodes — `sparktui stop` stops it"
        self.exit_message = message
        self.exit(0, message=message)

    def action_smoke_test(self) -> None:
        if self._refused("smoke_test"):
            return
        self.notify("sending one streaming completion…", title="smoke test", timeout=3)
        self._smoke()

    @work(group="smoke", exclusive=True, exit_on_error=False)
    async def _smoke(self) -> None:
        try:
            result = await self.backend.smoke_test()
        except Exception as exc:
            self.smoke_result = f"failed: {exc}"
            self.notify(self.smoke_result, title="smoke test", severity="error", timeout=15)
        else:
            self.smoke_result = result
            self.notify(result, title="smoke test", timeout=10)
        self.query_one(ServingView).show(self.state.serving, self.smoke_result)

    def action_bench(self) -> None:
        if self._refused("bench"):
            return
        self.notify("a short benchmark: 8 requests at c=1, then at c=4…", title="bench", timeout=5)
        self._bench()

    @work(group="bench", exclusive=True, exit_on_error=False)
    async def _bench(self) -> None:
        assert self.bench_runner is not None
        try:
            done = await self.bench_runner()
        except Exception as exc:
            self.notify(f"failed: {exc}", title="bench", severity="error", timeout=15)
            return
        if done.record.levels and self.screen is self.screen_stack[0]:
            self._show_bench_chart(done.record, self._saved_benchmarks())   # the summary's figures, and more
            return
        # Nothing measured, or a dialog is open (the chart waits for its key rather than cover it).
        more = f" — {self.key_display('bench_chart')} shows its chart" if done.record.levels else ""
        self.notify(done.summary + more, title="bench", timeout=30)

    def action_bench_chart(self) -> None:
        """The newest saved benchmark against its setup's history (``b`` opens it when one finishes)."""
        if self._refused("bench_chart"):
            return
        saved = self._saved_benchmarks()
        record = latest_run(saved)
        if record is None:
            self.notify(f"no benchmark saved yet: {self.key_display('bench')} runs one while the engine "
                        "serves (or `sparktui bench`)", title="bench chart", severity="warning", timeout=6)
            return
        self._show_bench_chart(record, saved)

    def _saved_benchmarks(self) -> list[BenchRecord]:
        if self.bench_history is None:
            return []
        try:
            return list(self.bench_history())
        except OSError as exc:
            self.notify(f"cannot read the bench history: {exc}", title="bench chart", severity="error")
            return []

    def _show_bench_chart(self, record: BenchRecord, saved: Sequence[BenchRecord]) -> None:
        self.push_screen(BenchChartScreen(chart_of(record, saved)))

    def action_linktest(self) -> None:
        if self._refused("linktest"):
            return
        note = (" — the engine holds the GPUs, so all_reduce_perf may fail; ib_write_bw needs none"
                if self.state.engine.state in self.RUNNING_STATES else "")
        self.notify(f"measuring the cable between the nodes…{note}", title="linktest", timeout=6)
        self._linktest()

    @work(group="linktest", exclusive=True, exit_on_error=False)
    async def _linktest(self) -> None:
        assert self.linktest_runner is not None
        try:
            verdict = await self.linktest_runner()
        except Exception as exc:
            self.notify(f"failed: {exc}", title="linktest", severity="error", timeout=15)
        else:
            self.notify(verdict, title="linktest", timeout=30)

    # ---- fixes a failed preflight offers ----------------------------------------------------------
    def _fix_key(self) -> str:
        """The key that runs the fixes, as bound now (``[ui.keys]`` remaps included)."""
        return self.key_display("fix").split(" ")[0]

    def _offer_fixes(self) -> None:
        op = self.state.operation
        fixes = self.pending_fixes()
        if op is None or not fixes or self._fix_offered == op.started or self.fix_runner is None:
            return
        self._fix_offered = op.started
        self.notify(f"{self._fix_key()}: " + "; ".join(f.describe() for f in fixes), title="fix",
                    severity="warning", timeout=20)

    def action_fix(self) -> None:
        if self._refused("fix"):
            return
        fixes = self.pending_fixes()
        if self.fix_runner is None:
            self.notify(f"run {' and '.join(f'`{f.command}`' for f in fixes)} on a configured cluster",
                        title="fix", severity="warning")
            return
        question = "Run " + ", then ".join(f.describe() for f in fixes) + "?"

        def answered(yes: bool | None) -> None:
            if yes:
                self._fixing = True
                self._update_controls()
                self._run_fixes(fixes)

        self.push_screen(ConfirmScreen(question, yes="Run"), answered)

    @work(group="fix", exclusive=True, exit_on_error=False)
    async def _run_fixes(self, fixes: list[Fix]) -> None:
        assert self.fix_runner is not None
        try:
            for fix in fixes:
                self.notify(f"running `{fix.command}`…", title="fix", timeout=5)
                try:
                    result = await self.fix_runner(fix.id)
                except Exception as exc:
                    self.notify(f"`{fix.command}` failed: {exc}", title="fix", severity="error", timeout=20)
                    return
                self.notify(result, title=f"`{fix.command}`", timeout=20)
        finally:
            self._fixing = False
            self._update_controls()
