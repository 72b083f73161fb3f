"""Which events are worth telling someone about, and how often: the pure half of ``[notify]``.

Fed the one event stream (``sparktui.domain.events``) — the dashboard's and the headless verbs' alike —
``NotificationFilter.feed`` returns a ``Notification`` when the engine *enters* ready, failed, wedged,
degraded or stopped, or a node's link is lost after it was up, or serving turns slower than it should
(``slower``, ``sparktui.domain.serving_pace``); repeats of the same state say nothing.
Rate limit: one notification per (event, node) per ``min_interval`` seconds; the ones held back are
counted and the next one that goes out says how many (``suppressed``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sparktui.domain.events import EngineChanged, EngineState, Event, NodeLinkChanged, ServingSlow

#: Engine states announced, by the event name used in the payload and in ``[notify] events``.
ENGINE_EVENTS: dict[EngineState, str] = {
    EngineState.READY: "ready",
    EngineState.FAILED: "failed",
    EngineState.WEDGED: "wedged",
    EngineState.DEGRADED: "degraded",
    EngineState.STOPPED: "stopped",
}
#: Link phases (``sparktui.remote.transport.LinkPhase`` values) that mean a node is gone.
LOST_PHASES = frozenset({"retrying", "failed"})


@dataclass(frozen=True)
class Notification:
    event: str                  # ready | failed | wedged | degraded | node_lost | stopped | slower …
    detail: str
    cluster: str
    at: float                   # epoch seconds
    node: str | None = None
    previous: str | None = None  # the engine state before (engine events)
    suppressed: int = 0          # notifications of this event held back by the rate limit since the last

    def payload(self) -> dict[str, Any]:
        """The JSON object a command gets on stdin and a webhook as its body."""
        return {
            "source": "sparktui", "event": self.event, "cluster": self.cluster, "node": self.node,
            "detail": self.detail, "previous_state": self.previous,
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.at)), "at_epoch": self.at,
            "suppressed": self.suppressed,
        }


class NotificationFilter:
    def __init__(self, cluster: str, events: Iterable[str], min_interval: float = 60.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.cluster = cluster
        self.events = frozenset(events)
        self.min_interval = min_interval
        self.clock = clock
        self._state: EngineState | None = None
        self._links: dict[str, str] = {}
        self._last_sent: dict[tuple[str, str | None], float] = {}
        self._held: dict[tuple[str, str | None], int] = {}

    def feed(self, event: Event) -> Notification | None:
        if isinstance(event, EngineChanged):
            previous, self._state = self._state, event.state
            name = ENGINE_EVENTS.get(event.state)
            # UNKNOWN → STOPPED is the first look at an idle cluster, not a change worth a message.
            if name is None or event.state == previous or (previous in (None, EngineState.UNKNOWN)
                                                            and event.state is EngineState.STOPPED):
                return None
            return self._limit(name, None, event.detail or f"engine {event.state.value}",
                               previous.value if previous is not None else None)
        if isinstance(event, ServingSlow):
            return self._limit("slower", None, event.describe(), None)
        if isinstance(event, NodeLinkChanged):
            before = self._links.get(event.node)
            self._links[event.node] = event.phase
            if event.phase in LOST_PHASES and before == "connected":
                return self._limit("node_lost", event.node, f"{event.node}: {event.describe()}", None)
        return None

    def named(self, name: str, detail: str, node: str | None = None) -> Notification | None:
        """An event no state change carries (``given_up``: the supervisor stopped trying), rate-limited and
        filtered like the others."""
        return self._limit(name, node, detail, None)

    def _limit(self, name: str, node: str | None, detail: str, previous: str | None) -> Notification | None:
        if name not in self.events:
            return None
        key = (name, node)
        now = self.clock()
        last = self._last_sent.get(key)
        if last is not None and now - last < self.min_interval:
            self._held[key] = self._held.get(key, 0) + 1
            return None
        self._last_sent[key] = now
        return Notification(name, detail, self.cluster, now, node, previous, self._held.pop(key, 0))
