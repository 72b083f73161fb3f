"""An upgrade's progress kept on the head (``sparktui.domain.upgrade.progress``), written and read as the
head's other records are (``head_record``): written by the upgrade at each stage change and every
``HEARTBEAT_EVERY`` seconds, as the supervisor beats (so a reader can tell it is still going); read by
``sparktui status`` and the dashboard. The writes run beside the upgrade, never in its way: one that fails
is a warning in the log, and the upgrade goes on."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import replace
from functools import partial

from sparktui.domain.presence import HEARTBEAT_EVERY
from sparktui.domain.upgrade import progress as U
from sparktui.remote.engine_nodes import EngineNodes
from sparktui.remote.head_record import read_record, write_record
from sparktui.remote.transport import TransportError

log = logging.getLogger(__name__)

#: Seconds between two writes at least: the distribution's progress changes a stage's message many times a
#: second; each write is one SSH command.
WRITE_GAP = 1.0


async def read_upgrade(nodes: EngineNodes) -> U.UpgradeRecord | None:
    """The head's record (``None``: no upgrade ever wrote one). Raises ``TransportError`` when the head cannot
    be read now (which is not the same as no upgrade)."""
    text = await read_record(nodes, partial(U.read_argv, nodes.config))
    if text is None:
        raise TransportError(f"the upgrade's record on {nodes.config.head.name} not read")
    return U.UpgradeRecord.parse(text)


class UpgradeRecorder:
    """Keeps one upgrade's record on the head: ``begin`` once the images are known, ``stage`` at each
    change (the latest state is written, at most every ``WRITE_GAP`` s), ``finish`` at the end (awaited)."""

    def __init__(self, nodes: EngineNodes, host: str, pid: int) -> None:
        self.nodes = nodes
        self.host, self.pid = host, pid
        self.record: U.UpgradeRecord | None = None
        self._changed = asyncio.Event()
        #: Set by ``finish``: the writer ends after the write it is in. It is never cancelled: Python 3.11's
        #: ``wait_for`` swallows a cancel that meets a set event, and the upgrade then hung on its last word.
        self._ended = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None

    def begin(self, image: str, previous: str, *, dry_run: bool) -> None:
        now = time.time()
        self.record = U.UpgradeRecord(image, previous, self.host, self.pid, now, now, dry_run=dry_run)
        self._ended.clear()   # a recorder that kept an earlier upgrade begins afresh
        self._changed.set()
        self._writer = asyncio.get_running_loop().create_task(self._keep_written())

    def stage(self, name: str, status: str, message: str, *, image_id: str | None = None,
              previous_id: str | None = None) -> None:
        if self.record is None:
            return
        record = self.record.stage(name, status, message, time.time())
        self.record = replace(record, image_id=image_id or record.image_id,
                              previous_id=previous_id or record.previous_id)
        self._changed.set()

    async def finish(self, outcome: str, reason: str, downtime_s: float | None) -> None:
        """The outcome written (once, awaited: the last word must not be lost to a gap)."""
        if self.record is None:
            return
        self._ended.set()
        self._changed.set()   # wakes a writer waiting for a change
        if self._writer is not None:
            with contextlib.suppress(Exception):   # a write in flight ends within its own timeout
                await self._writer
        self.record = self.record.finish(outcome, reason, downtime_s, time.time())
        await self._write()

    async def _keep_written(self) -> None:
        """The latest state on each change, and a heartbeat while nothing changes; at most one write a
        ``WRITE_GAP``; ends (after the write it is in) once ``finish`` sets ``_ended``."""
        while not self._ended.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(HEARTBEAT_EVERY):
                    await self._changed.wait()
            if self._ended.is_set():
                return
            self._changed.clear()
            await self._write()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(WRITE_GAP):
                    await self._ended.wait()

    async def _write(self) -> None:
        record = self.record
        if record is None:
            return
        record = self.record = record.beat(time.time())
        try:
            await write_record(self.nodes, lambda homes: U.write_argv(self.nodes.config, homes, record),
                               "the upgrade's progress")
        except Exception as exc:   # the record is worth less than the upgrade itself
            log.warning("the upgrade's progress not written: %s", exc)
