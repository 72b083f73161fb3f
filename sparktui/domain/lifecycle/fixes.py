"""The fix a failed preflight check offers: the command that repairs it (pure).

A check whose message names ``sparktui image sync`` or ``sparktui model sync`` (the image missing or of
another ID on a node; the model directory missing or different on a node) carries that fix: the verbs
print the command, the dashboard runs it on a key (``fix`` in ``sparktui.domain.keys``) after asking.
The command texts live here only; the checks' messages are built from them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sparktui.domain.events import StepStatus, StepView

IMAGE_SYNC = "sparktui image sync"
MODEL_SYNC = "sparktui model sync"


@dataclass(frozen=True)
class Fix:
    #: ``image_sync`` | ``model_sync``: what the dashboard's runner is asked to do.
    id: str
    #: The command a user types for it.
    command: str
    #: The nodes whose failed check it repairs.
    nodes: tuple[str, ...]

    def describe(self) -> str:
        what = "the head's image" if self.id == "image_sync" else "the head's model directory"
        return f"`{self.command}` copies {what} to {', '.join(self.nodes)}"


#: Check name → the fix it may offer (only when its message names the command).
_BY_CHECK = {"docker": ("image_sync", IMAGE_SYNC), "same image": ("image_sync", IMAGE_SYNC),
             "model files": ("model_sync", MODEL_SYNC)}


def fixes_for(steps: Iterable[StepView]) -> list[Fix]:
    """The fixes the failed checks among ``steps`` offer, one per command, in the checks' order."""
    found: dict[str, tuple[str, list[str]]] = {}
    for step in steps:
        known = _BY_CHECK.get(step.name.removeprefix("preflight: "))
        if step.status is not StepStatus.FAILED or known is None or f"`{known[1]}`" not in step.message:
            continue
        fix_id, command = known
        nodes = found.setdefault(fix_id, (command, []))[1]
        if step.node and step.node not in nodes:
            nodes.append(step.node)
    return [Fix(fix_id, command, tuple(nodes)) for fix_id, (command, nodes) in found.items()]


__all__ = ["IMAGE_SYNC", "MODEL_SYNC", "Fix", "fixes_for"]
