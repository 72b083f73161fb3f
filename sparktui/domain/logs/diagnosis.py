"""How a failure's diagnosis is told: what a person can act on first, the evidence after.

One order for every place that shows a failure (the engine panel, ``sparktui timeline``): the kind with the
node and the stage where it happened, then the hint, then the raw message the log gave. The raw message is
the longest part (a CUDA OOM's is five lines at 56 columns); first, it pushed the hint below the fold.
Which kind a message is, and the hint's words, are :mod:`.failures`' part.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DiagnosisPart:
    #: ``kind`` (``oom``), ``where`` (``on spark2 · in KV cache``), ``hint``, ``message`` (the raw text).
    role: str
    text: str


def node_label(node: str | None, names: Mapping[str, str], head: str | None) -> str | None:
    """The name a person knows a failure's node by: the log's Ray ``ip=`` as the configured node it is
    (``names``: address → name), a name as it is, and no ``ip=`` at all as the head (Ray prefixes every
    line a worker node's process prints to the driver's log; the head's own processes go without)."""
    if node is None:
        return head
    return names.get(node, node)


def diagnosis(kind: str, stage: str | None, node: str | None, hint: str, message: str) -> list[DiagnosisPart]:
    """The parts of a diagnosis in the order they are shown; ``stage`` as a label (``KV cache``), ``node``
    as :func:`node_label` gives it. Empty parts are left out."""
    places = (f"on {node}" if node else "", f"in {stage}" if stage else "")
    where = " · ".join(place for place in places if place)
    parts = [DiagnosisPart("kind", kind), DiagnosisPart("where", where), DiagnosisPart("hint", hint),
             DiagnosisPart("message", message)]
    return [part for part in parts if part.text]
