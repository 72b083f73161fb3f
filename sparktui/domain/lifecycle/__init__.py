"""Engine lifecycle planning (pure): argv builders, plans as data, Ray state, preflight judgement.

The executor that runs plans over transports is ``sparktui.remote.engine``.
"""

from sparktui.domain.lifecycle.plan import Phase, Plan, Step, StepKind, build_start_plan, build_stop_plan

__all__ = ["Phase", "Plan", "Step", "StepKind", "build_start_plan", "build_stop_plan"]
