"""The engine's operations as the dashboard asks for them: start, stop and restart through the
``EngineController`` (one at a time, refused in read-only mode), re-attach to what runs when the
dashboard opens, another sparktui's operation shown while its lock is held, the automatic restart the
session asks for, and the memory guard's stop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace

from sparktui.domain.engine_state import RUNNING
from sparktui.domain.events import (
    ImageSeen,
    Notice,
    OperationBusy,
    OperationChanged,
    OperationRefused,
    OperationView,
    SupervisorSeen,
)
from sparktui.domain.lifecycle.oplock import LockHolder
from sparktui.domain.logs import Timeline
from sparktui.domain.memory_guard import MemoryGuard, MemoryTrip
from sparktui.domain.presence import HEARTBEAT_EVERY
from sparktui.domain.readiness import RestartDecision
from sparktui.domain.supervise import Action
from sparktui.domain.telemetry import Sample
from sparktui.domain.upgrade.progress import UpgradeRecord
from sparktui.domain.upgrade_view import UPGRADE_KIND
from sparktui.remote.backend_wiring import BackendWiring
from sparktui.remote.engine import EngineController
from sparktui.remote.run_logs import feed_start
from sparktui.remote.transport import TransportError
from sparktui.remote.upgrade_record import read_upgrade
from sparktui.remote.upgrade_watch import UpgradeWatch

#: Seconds between looks at the head's operation lock (another sparktui's start/stop/restart).
LOCK_POLL_INTERVAL = 3.0
#: Seconds between reads of the supervisor's presence on the head (it beats every ``HEARTBEAT_EVERY``).
PRESENCE_READ_EVERY = HEARTBEAT_EVERY
#: Engine states in which the memory guard may stop vLLM (starting and serving): the engine runs.
MEMORY_GUARDED = RUNNING

#: One of the controller's operations, passed as itself (no name looked up at run time).
Operation = Callable[[EngineController], Awaitable[OperationView]]


def _start(controller: EngineController) -> Awaitable[OperationView]:
    return controller.start()


def _stop(controller: EngineController) -> Awaitable[OperationView]:
    return controller.stop()


def _restart(controller: EngineController) -> Awaitable[OperationView]:
    return controller.restart()


def _full_restart(controller: EngineController) -> Awaitable[OperationView]:
    return controller.restart(full=True)


def _supervised_start(controller: EngineController) -> Awaitable[OperationView]:
    """The supervisor's: never over a person's stop (checked under the lock)."""
    return controller.start(unless_stopped=True)


def _supervised_restart(controller: EngineController) -> Awaitable[OperationView]:
    return controller.restart(unless_stopped=True)


def _supervised_full_restart(controller: EngineController) -> Awaitable[OperationView]:
    return controller.restart(full=True, unless_stopped=True)


def _stop_unasked(controller: EngineController) -> Awaitable[OperationView]:
    """A stop no person asked for (the memory guard's): the engine's desired state stays as it is."""
    return controller.stop(by_person=False)


#: The supervisor's operations, by the action its policy decided.
SUPERVISED: Mapping[Action, Operation] = {
    Action.START: _supervised_start,
    Action.RESTART: _supervised_restart,
    Action.FULL_RESTART: _supervised_full_restart,
}


def _held_by(holder: LockHolder) -> OperationView:
    return OperationView(kind=holder.kind, running=True, started=holder.started,
                         message=f"held by another sparktui: {holder.describe()}")


class Operations:
    """Start, stop, restart (asked by the person, the session's restart policy or the memory guard)
    and what another sparktui does to the same engine."""

    def __init__(self, wiring: BackendWiring, timeline: Callable[[], Timeline], *, readonly: bool,
                 follow_supervisor: bool = True) -> None:
        self._wiring = wiring
        #: Whether the supervisor's presence on the head is read (not by the supervisor itself).
        self.follow_supervisor = follow_supervisor
        self._presence_read = float("-inf")
        #: The engine log's timeline so far (re-attach refines a running engine with it).
        self._timeline = timeline
        self.readonly = readonly
        config = wiring.config
        self._memory_guard = MemoryGuard(config.engine.memory_floor, config.engine.memory_psi_full)
        #: Another sparktui's upgrade, from its record on the head (read on this watch's cadence).
        self.upgrades = UpgradeWatch(self._read_upgrade, wiring.post)

    async def start(self) -> None:
        self._wiring.session.manual_start()
        await self._run(_start, rearm=True)

    async def stop(self) -> None:
        await self._run(_stop)

    async def restart(self, *, full: bool = False) -> None:
        self._wiring.session.manual_start()
        await self._run(_full_restart if full else _restart, rearm=True)

    async def supervised(self, operation: Operation) -> None:
        """One of ``SUPERVISED``: as a person's start or restart, except that a person's stop (the desired
        state, read under the lock) is never undone."""
        await self._run(operation, rearm=True)

    def on_busy(self, kind: str | None) -> None:
        """The operation gate took one on (or is done): to the dashboard, which refuses others meanwhile."""
        self._wiring.post(OperationBusy(kind))

    def on_progress(self, view: OperationView) -> None:
        """The controller's progress: to the dashboard and into the session."""
        self._wiring.post(OperationChanged(view))
        self._wiring.session.operation(view)

    async def _run(self, operation: Operation, *, rearm: bool = False) -> None:
        """Run one of the controller's operations once nothing refuses it; ``rearm``: a start (or restart)
        arms the memory guard again."""
        controller = self._wiring.controller
        if self.readonly:
            raise OperationRefused("read-only mode: start, stop and restart are disabled")
        if controller is None:
            raise OperationRefused("not connected yet")
        if controller.busy is not None:
            raise OperationRefused(f"{controller.busy} is already running; wait for it to finish")
        if rearm:
            self._memory_guard.rearm()
        view = await operation(controller)
        if view.ok and view.kind in ("start", "restart"):
            await self._feed_start()
        # The state machine saw the finished view as the operation's last progress.
        level = "information" if view.ok else "error"
        self._wiring.post(Notice(f"{view.kind}: {view.message or ('done' if view.ok else 'failed')}", level))

    # -- what runs already -------------------------------------------------------------------------
    async def discover(self) -> None:
        """Re-attach: what runs of ours on the nodes decides the state until the log says more."""
        controller = self._wiring.controller
        assert controller is not None
        delay = 1.0
        while True:
            try:
                await self._wiring.head_transport().wait_connected(timeout=30)
                found = await controller.discover()
            except TransportError as exc:
                # Shown, and tried again for as long as the dashboard runs: the head may come back.
                self._wiring.session.unreachable(f"head unreachable: {exc}")
                await asyncio.sleep(delay)
                delay = min(delay * 2, 15.0)
                continue
            # The log read so far refines a running engine (and only a running one): one reading.
            with self._wiring.session.held() as session:
                session.timeline(self._timeline().snapshot())
                session.discovered(found.state, found.detail)
                session.ray(found.ray)
            if found.running:
                await self._feed_start()
                self._wiring.post(Notice(f"re-attached to the running engine ({found.detail})"))
            return

    async def _feed_start(self) -> None:
        """The running engine's real start, from the head's stamp: its durations count from there."""
        controller = self._wiring.controller
        assert controller is not None
        await feed_start(self._wiring.session, self._wiring.config, self._wiring.head_transport(),
                         controller.homes or None)

    async def watch_lock(self) -> None:
        """Another sparktui's operation (its lock on the head) is shown as the running operation, which
        disables the lifecycle buttons, and followed by the session as running (no verdict of ours on a
        vLLM it stops); when it ends, what runs now is discovered again — until that answers — and
        judged afresh (the run before it is history)."""
        controller = self._wiring.controller
        assert controller is not None
        post = self._wiring.post
        shown: OperationView | None = None
        #: The session was told of another's operation (the lock held): what runs is discovered after it.
        rediscover = told = False
        me = (socket.gethostname(), os.getpid())
        while True:
            await asyncio.sleep(LOCK_POLL_INTERVAL)
            await self.look_at_supervisor()
            if controller.busy is not None:
                continue
            holder = await controller.lock_holder()
            if holder is not None and (holder.host, holder.pid) == me:
                continue
            # An upgrade's stages from its record on the head (before, during and after its hold of the lock).
            upgrading = await self.upgrades.look(holder)
            view = upgrading if upgrading is not None else _held_by(holder) if holder is not None else None
            if view is not None:
                if shown is None or (view.message, view.steps) != (shown.message, shown.steps):
                    shown = view
                    post(OperationChanged(view))
                    if holder is not None:   # the engine is another's (an upgrade's checks leave it be)
                        self._wiring.session.operation(view)
                        told = True
                continue
            if shown is not None:
                ended = self.upgrades.ended(time.time()) if shown.kind == UPGRADE_KIND else None
                post(OperationChanged(ended or replace(
                    shown, running=False, ok=True, message=shown.message.replace("held by", "done by", 1))))
                shown, rediscover, told = None, told, False
            if rediscover:
                with contextlib.suppress(TransportError):
                    found = await controller.discover()
                    if controller.busy is None:
                        with self._wiring.session.held() as session:
                            session.timeline(self._timeline().snapshot())
                            session.discovered(found.state, found.detail, again=True)
                            session.ray(found.ray)
                        if found.running:
                            await self._feed_start()
                    rediscover = False

    async def _read_upgrade(self) -> UpgradeRecord | None:
        """The head's upgrade record (docker: ``sparktui upgrade`` is for images; a host runtime has none)."""
        controller = self._wiring.controller
        if controller is None:
            raise TransportError("not connected yet")
        if self._wiring.config.engine.runtime != "docker":
            return None
        return await read_upgrade(controller.nodes)

    async def look_at_supervisor(self) -> None:
        """Every ``PRESENCE_READ_EVERY`` s (beside the lock's look): the supervisor's record on the head,
        posted; while one is live, the automatic restart is its, not this session's (both acting on one
        crash would start two restarts), and the person is told when that changes."""
        now = time.monotonic()
        controller = self._wiring.controller
        due = now - self._presence_read >= PRESENCE_READ_EVERY
        if not self.follow_supervisor or controller is None or not due:
            return
        self._presence_read = now
        try:
            presence = await controller.presence()
        except TransportError:
            return   # the head is not read now: what was shown stays, and so does who decides
        read_at = time.time()
        self._wiring.post(SupervisorSeen(presence, read_at))
        live = presence is not None and presence.live(read_at)
        decider = f"the supervisor on {presence.who}" if live and presence is not None else None
        if self._wiring.session.defer_restarts(decider) and self._wiring.config.serving.auto_restart:
            self._wiring.post(Notice(f"auto-restart left to {decider}: it decides restarts while it runs"
                                     if decider else "no supervisor seen: this dashboard's auto-restart "
                                     "decides again", "information" if decider else "warning"))
        config = self._wiring.config
        if config.engine.runtime == "docker":   # the image a start uses, read at the same pace
            kept = await controller.image_in_use()
            applies = kept is not None and kept.applies_to(config)
            self._wiring.post(ImageSeen(kept.describe() if kept is not None and applies
                                        else config.engine.image, applies))

    # -- asked for by the session and the memory guard ---------------------------------------------
    def auto_restart(self, _decision: RestartDecision) -> None:
        """The session's ``restart`` port: its budget allowed an automatic restart (it told the person which
        attempt). Refused (another operation runs): that one decides what runs next."""
        self._wiring.spawn(self._restart_refusable())

    async def _restart_refusable(self) -> None:
        with contextlib.suppress(OperationRefused):
            await self._run(_restart, rearm=True)

    def guard_memory(self, name: str, sample: Sample) -> None:
        """The memory guard (sparktui.domain.memory_guard) sees every sample; a trip stops vLLM."""
        if self._memory_guard.observe(name, sample, armed=self._wiring.session.state in MEMORY_GUARDED):
            self._wiring.spawn(self._memory_stop(self._memory_guard.tripped))

    async def _memory_stop(self, trip: MemoryTrip | None) -> None:
        """The memory guard tripped: stop vLLM (after a running start step, if one is), then say why."""
        if trip is None:
            return
        self._wiring.post(Notice(trip.message, "error"))
        while True:
            try:
                await self._run(_stop_unasked)
            except OperationRefused as exc:
                if self.readonly or self._wiring.controller is None:
                    self._wiring.post(Notice(f"memory guard: not stopped ({exc})", "error"))
                    return
                await asyncio.sleep(0.5)    # a start step is running: stop right after it
                continue
            break
        self._wiring.session.memory_stopped(trip.message)
