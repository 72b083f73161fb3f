"""Readiness and crash logic after "Application startup complete": pure state, every time passed in.

- ``ReadyCheck``: the verify-ready sequence's outcome (``/health`` → ``/v1/models`` → one tiny chat
  completion). The engine counts as *ready* only when it generated a token.
- ``CrashDetector``: after ready, ``/health`` failing for ``fail_after`` seconds (or the engine process
  gone) is a crash. One failed poll is not: a busy server or a blip on the SSH forward can drop one.
- ``RestartBudget``: optional auto-restart with a limit, so a model that crashes on every start is not
  restarted forever. The count starts again after a manual start or once the engine stayed up for
  ``stable_seconds``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sparktui.domain.durations import format_duration


# ---- verify-ready ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class VerifyStep:
    name: str          # "health" | "models" | "completion"
    ok: bool
    seconds: float
    detail: str = ""


@dataclass(frozen=True)
class ReadyCheck:
    ok: bool
    steps: tuple[VerifyStep, ...] = ()
    model_ids: tuple[str, ...] = ()
    ttft_seconds: float | None = None
    vllm_version: str | None = None

    @property
    def failed_step(self) -> VerifyStep | None:
        return next((s for s in self.steps if not s.ok), None)

    def summary(self) -> str:
        if self.ok:
            model = self.model_ids[0] if self.model_ids else "the model"
            ttft = f", TTFT {format_duration(self.ttft_seconds)}" if self.ttft_seconds is not None else ""
            return f"{model} answers{ttft}"
        step = self.failed_step
        if step is None:
            return "not verified"
        return f"{step.name} check failed: {step.detail or 'no detail'}"


# ---- crash detection ------------------------------------------------------------------------------
class Health(StrEnum):
    HEALTHY = "healthy"
    FAILING = "failing"      # failing, but not yet for ``fail_after`` seconds
    CRASHED = "crashed"


@dataclass(frozen=True)
class Crash:
    at: float                 # clock time the crash was decided
    ready_for: float          # seconds between ready and the first failure
    reason: str               # "health" | "process_exited"
    detail: str               # e.g. "/health failing for 15s (HTTP 503)"

    def describe(self, root_cause: str | None = None) -> str:
        """The engine state's detail text: "crashed after 2h03m: <root cause from the log>"."""
        return f"crashed after {format_duration(self.ready_for)}: {root_cause or self.detail}"


@dataclass(frozen=True)
class HealthVerdict:
    health: Health
    failing_for: float = 0.0
    last_error: str = ""
    crash: Crash | None = None


class CrashDetector:
    """Feed it every ``/health`` result after ready; it says when failures add up to a crash."""

    def __init__(self, ready_at: float, fail_after: float) -> None:
        if fail_after <= 0:
            raise ValueError("fail_after must be positive")
        self.ready_at = ready_at
        self.fail_after = fail_after
        self._failing_since: float | None = None
        self._last_error = ""
        self._crash: Crash | None = None

    @property
    def crash(self) -> Crash | None:
        return self._crash

    def observe(self, ok: bool, now: float, error: str = "") -> HealthVerdict:
        if self._crash is not None:
            return HealthVerdict(Health.CRASHED, now - (self._failing_since or now), self._last_error,
                                 self._crash)
        if ok:
            self._failing_since = None
            self._last_error = ""
            return HealthVerdict(Health.HEALTHY)
        if self._failing_since is None:
            self._failing_since = now
        self._last_error = error or self._last_error
        failing_for = now - self._failing_since
        if failing_for >= self.fail_after:
            detail = f"/health failing for {format_duration(failing_for)}"
            if self._last_error:
                detail += f" ({self._last_error})"
            self._crash = Crash(now, max(0.0, self._failing_since - self.ready_at), "health", detail)
            return HealthVerdict(Health.CRASHED, failing_for, self._last_error, self._crash)
        return HealthVerdict(Health.FAILING, failing_for, self._last_error)

    def process_gone(self, now: float, detail: str = "engine process exited") -> Crash:
        """The engine process (or container) is gone: a crash at once, no grace period."""
        if self._crash is None:
            since = self._failing_since if self._failing_since is not None else now
            self._crash = Crash(now, max(0.0, since - self.ready_at), "process_exited", detail)
        return self._crash


# ---- auto-restart accounting ----------------------------------------------------------------------
@dataclass(frozen=True)
class RestartDecision:
    restart: bool
    attempt: int              # which auto-restart this would be (1-based); 0 when not restarting
    limit: int
    message: str


class RestartBudget:
    """Counts automatic restarts since the last manual start or the last stable stretch."""

    def __init__(self, limit: int, stable_seconds: float = 600.0, *, decider: str | None = None) -> None:
        self.limit = max(0, limit)
        self.stable_seconds = stable_seconds
        self.used = 0
        #: Who decides restarts instead of this budget (``sparktui supervise``: its policy per cause).
        self.decider = decider

    def manual_start(self) -> None:
        self.used = 0

    def note_uptime(self, ready_for: float) -> None:
        """Call with how long the engine has been up; a long enough run earns the budget back."""
        if ready_for >= self.stable_seconds:
            self.used = 0

    def decide(self, auto_restart: bool) -> RestartDecision:
        if self.decider is not None:
            return RestartDecision(False, 0, self.limit, f"{self.decider} decides")
        if not auto_restart:
            return RestartDecision(False, 0, self.limit, "auto-restart is off")
        if self.used >= self.limit:
            return RestartDecision(
                False, 0, self.limit,
                f"auto-restart limit reached ({self.used}/{self.limit}); not restarting",
            )
        attempt = self.used + 1
        return RestartDecision(True, attempt, self.limit, f"auto-restart {attempt}/{self.limit}")

    def restarted(self) -> None:
        self.used += 1
