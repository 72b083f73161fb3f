"""The supervisor's presence on the head and the nodes' boots (``sparktui.domain.presence``).

Who it is, a heartbeat, its last decision and latest incident are kept on the head for the dashboard and
``status`` (a dashboard's auto-restart defers to a live supervisor); each node's boot id is kept there too,
read at the supervisor's start and whenever a node's link comes back: a changed one is a reboot, whose cause
the node's previous boot's kernel log tells (``remote/kernel_read.py``), kept as an incident.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from sparktui.config import SparkConfig
from sparktui.domain.evidence_files import file_part
from sparktui.domain.postmortem import NodeReport
from sparktui.domain.presence import HEARTBEAT_EVERY, LastIncident, SupervisorPresence
from sparktui.domain.supervise import Cause
from sparktui.node.kernel_log import BOOT_ID
from sparktui.remote.backend import SshBackend
from sparktui.remote.kernel_read import read_kernel
from sparktui.remote.transport import TransportError

log = logging.getLogger(__name__)

#: How often the presence loop looks (a boot id to read, a heartbeat due, a change to write).
PRESENCE_TICK = 1.0
#: Seconds a node's boot id may take to read; the record's last words at a clean end.
BOOT_ID_SECONDS = 20.0
ENDED_SECONDS = 5.0
#: A boot id not read (its link up but the command failing) is asked again after this long.
BOOT_RETRY = 5.0


class IncidentPort(Protocol):
    """``(cause, node, detail)`` → keeps the incident's evidence before the supervisor acts; its id.
    ``evidence``: files the supervisor holds already (a reboot's postmortem); ``action``: what is done
    about it, when that is known at once (a reboot is recorded; nothing is run for it)."""

    def __call__(self, cause: Cause, node: str | None, detail: str, *,
                 evidence: Mapping[str, str] | None = None, action: str = "") -> Awaitable[str | None]: ...


#: A node's boot id now (``None``: not read).
BootIdPort = Callable[[str], Awaitable[str | None]]
#: A node's previous boot, read and judged (``sparktui.domain.postmortem``), or why not (in words).
PostmortemPort = Callable[[str], Awaitable[NodeReport | str]]
#: One line of what the supervisor sees or does (``Supervisor._line``): its event and fields.
LineFn = Callable[..., None]


class PresenceKeeper:
    def __init__(self, config: SparkConfig, backend: SshBackend, line: LineFn, links: Mapping[str, str], *,
                 on_incident: IncidentPort, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time, boot_id: BootIdPort | None = None,
                 postmortem: PostmortemPort | None = None) -> None:
        self.config = config
        self.backend = backend
        self._line = line
        #: Each node's SSH link phase, as the supervisor last saw it (shared, read only here).
        self.links = links
        self.on_incident = on_incident
        self._clock = clock
        self._wall = wall
        self.read_boot_id: BootIdPort = boot_id or self._boot_id_over_link
        self.postmortem: PostmortemPort = postmortem or self._postmortem_over_link
        #: Its record on the head; ``None`` until the one there (its boot ids) was read.
        self.presence: SupervisorPresence | None = None
        self._started_at = wall()
        #: When the record was last written (``clock``), and whether it changed since.
        self._presence_written = float("-inf")
        self._presence_dirty = False
        #: Changes noted before the record was read from the head (applied to it then).
        self._early_notes: dict[str, Any] = {}
        #: Wakes the presence loop: a change to write, a link up.
        self._presence_changed = asyncio.Event()
        #: Nodes whose link came up since their boot id was last read (→ when to read it, on ``clock``);
        #: those whose reboot is being looked into now.
        self._boot_pending: dict[str, float] = {}
        self._boot_checking: set[str] = set()
        self._reboots: set[asyncio.Task[None]] = set()

    def link_up(self, node: str) -> None:
        """A node's link came up (again): its boot id is read at the next look."""
        self._boot_pending[node] = self._clock()
        self._presence_changed.set()

    def note(self, **changes: Any) -> None:
        """A new last decision or incident: into the record, written at the presence loop's next look."""
        if self.presence is not None:
            self.presence = replace(self.presence, **changes)
        else:   # not read from the head yet: kept for when it is
            self._early_notes.update(changes)
        self._presence_dirty = True
        self._presence_changed.set()

    def served_again(self, incident: str, seconds: float) -> None:
        record = self.presence
        if record is not None and record.incident is not None and record.incident.id == incident:
            self.note(incident=replace(record.incident, serving_again_s=seconds))

    async def run(self) -> None:
        """Until cancelled: the record read from the head once (the boot ids a previous supervisor saw),
        then written at each change and every ``HEARTBEAT_EVERY`` s; each node whose link came up has its
        boot id read and compared."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(PRESENCE_TICK):
                    await self._presence_changed.wait()
            self._presence_changed.clear()
            try:
                await self.keep_once()
            except Exception:   # the next look tries again; the supervisor's own work goes on
                log.exception("the supervisor's presence not kept")

    async def keep_once(self) -> None:
        """One look of the presence loop."""
        if self.backend.controller is None:
            return
        if self.presence is None and not await self._load_presence():
            return
        now = self._clock()
        for node, due in sorted(self._boot_pending.items()):
            if due <= now and node not in self._boot_checking:
                del self._boot_pending[node]
                await self._check_boot(node)
        await self._write_presence()

    @property
    def reboots(self) -> tuple[asyncio.Task[None], ...]:
        """The reboots being looked into now (a postmortem, then the incident)."""
        return tuple(self._reboots)

    async def _load_presence(self) -> bool:
        controller = self.backend.controller
        assert controller is not None
        try:
            before = await controller.presence()
        except TransportError:
            return False
        now = self._wall()
        self.presence = SupervisorPresence(
            socket.gethostname(), os.getpid(), self._started_at, now,
            decision=before.decision if before else None, incident=before.incident if before else None,
            boot_ids=dict(before.boot_ids) if before else {})
        if self._early_notes:
            self.presence = replace(self.presence, **self._early_notes)
            self._early_notes = {}
        self._presence_dirty = True
        return True

    async def _write_presence(self) -> None:
        """Written when it changed, else as a heartbeat every ``HEARTBEAT_EVERY`` s (one short command)."""
        record = self.presence
        now = self._clock()
        if record is None or (not self._presence_dirty and now - self._presence_written < HEARTBEAT_EVERY):
            return
        controller = self.backend.controller
        assert controller is not None
        self._presence_dirty = False
        self.presence = record = record.beat(self._wall())
        if await controller.write_presence(record):
            self._presence_written = now
        else:   # the head is not written now: again in a few seconds, not at every look
            self._presence_written = now - HEARTBEAT_EVERY + 5.0

    async def _check_boot(self, node: str) -> None:
        """The node's boot id now against the one kept: changed → a reboot to look into (its own task:
        reading a boot's journal takes seconds to minutes)."""
        try:
            now_id = await self.read_boot_id(node)
        except (TransportError, TimeoutError, OSError):
            now_id = None
        record = self.presence
        if now_id is None or record is None:
            if self.links.get(node) == "connected":   # else its link's return asks again
                self._boot_pending[node] = self._clock() + BOOT_RETRY
            return
        before = record.boot_ids.get(node)
        if before is None or before == now_id:
            if before is None:
                self.note(boot_ids={**record.boot_ids, node: now_id})
            return
        self._boot_checking.add(node)
        task = asyncio.create_task(self._rebooted(node, before, now_id), name=f"supervisor reboot {node}")
        self._reboots.add(task)
        task.add_done_callback(self._reboots.discard)

    async def _rebooted(self, node: str, before: str, after: str) -> None:
        """A node rebooted: its previous boot read for the cause, kept as an incident (the postmortem's
        verdict and lines among its evidence), said and told. The new boot id is kept once that is done,
        so a supervisor killed meanwhile looks again at its next start."""
        try:
            found = await self.postmortem(node)
            if isinstance(found, NodeReport):
                verdict = found.previous
                why = f"previous boot: {verdict.summary} [{verdict.cause.value}]"
                text = json.dumps(found.to_json(), indent=1) + "\n"
                evidence = {f"postmortem-{file_part(node)}.json": text}
                cause: str | None = verdict.cause.value
            else:
                why = f"previous boot not read: {found}"
                evidence = {f"postmortem-{file_part(node)}.txt": why + "\n"}
                cause = None
            detail = f"{node} rebooted (boot id {before[:8]} → {after[:8]}); {why}"
            try:
                incident = await self.on_incident(Cause.REBOOTED, node, detail, evidence=evidence,
                                                  action="recorded")
            except Exception:   # the line and the notification still go out
                log.exception("reboot incident not kept")
                incident = None
            self._line("rebooted", node=node, id=incident, verdict=cause, boot_id=after, detail=detail)
            if incident is not None:
                self.note(incident=LastIncident(incident, Cause.REBOOTED.value, node, self._wall(),
                                                 "recorded"))
            record = self.presence
            if record is not None:
                self.note(boot_ids={**record.boot_ids, node: after})
        finally:
            self._boot_checking.discard(node)

    async def _boot_id_over_link(self, node: str) -> str | None:
        transport = self.backend.transports.get(node)
        if transport is None:
            return None
        result = await transport.run(["cat", BOOT_ID], timeout=BOOT_ID_SECONDS)
        return (result.stdout.strip() or None) if result.ok else None

    async def _postmortem_over_link(self, node: str) -> NodeReport | str:
        transport = self.backend.transports.get(node)
        if transport is None:
            return f"no link to {node}"
        return await read_kernel(transport, self.config.node(node), None)

    async def say_ended(self) -> None:
        """A clean end, in the record: readers say "ended", not "not seen" (best effort, bounded)."""
        controller = self.backend.controller
        record = self.presence
        if controller is None or record is None:
            return
        now = self._wall()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(ENDED_SECONDS):
                await controller.write_presence(replace(record, heartbeat=now, ended=now))
