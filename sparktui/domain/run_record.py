"""The session's ``Record`` effect as a line of the run history: one rule for every process that records
a run (the dashboard's backend, ``start --wait``, ``restart --wait``, the supervisor)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from sparktui.domain.history import RunRecord, record_from_timeline, setup_of
from sparktui.domain.lifecycle.argv import VLLM_LOG
from sparktui.node.run_logs import kept_name

if TYPE_CHECKING:
    from sparktui.config import SparkConfig
    from sparktui.domain.engine_state import Record
    from sparktui.domain.logs.stages import TimelineSnapshot

#: Ends after ready that are no failure of the run.
CLEAN_ENDS = frozenset({"stopped", "restarted"})


def history_entry(effect: Record, timeline: TimelineSnapshot, config: SparkConfig) -> RunRecord:
    """The run (its start, or its end after ready) with its log timeline, naming its kept log on the head."""
    model, image = setup_of(config.engine)
    entry = record_from_timeline(timeline, started_at=effect.started_at, model=model, image=image,
                                 ready_seconds=effect.ready_seconds, outcome=effect.outcome,
                                 cluster=config.cluster.name)
    log_file = kept_name(VLLM_LOG, effect.stamp) if effect.stamp is not None else None
    entry = dataclasses.replace(entry, stamp=effect.stamp, log_file=log_file)
    if effect.end is None:
        return entry
    # An end's update: the start's line keeps its stages and ready time; the end's cause is the run's
    # failure (a clean stop or restart is none).
    failure = None if effect.end in CLEAN_ENDS else f"{effect.end}: {effect.cause or 'see the log'}"
    return dataclasses.replace(entry, stages={}, ready_seconds=None, failure=failure, end=effect.end,
                               ended_at=effect.ended_at)
