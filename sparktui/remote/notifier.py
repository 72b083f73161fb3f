"""Delivers ``[notify]``: an ``EventSink`` that runs the configured command (argv list, never a shell;
the JSON payload on its stdin) and/or POSTs the payload to the webhook, in the background.

A notifier that fails (command missing, non-zero exit, timeout, HTTP error) is logged and told once as a
warning on the event stream's log, never raised: a broken pager must not break the dashboard or a start.
Commands run on the machine sparktui runs on (where the person is), not on the nodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable

import httpx

from sparktui.config import NotifyConfig
from sparktui.domain.deadline import within
from sparktui.domain.events import EngineChanged, Event, NodeLinkChanged, ServingSlow
from sparktui.domain.notify import Notification, NotificationFilter

log = logging.getLogger(__name__)


class Notifier:
    """Call it with every event (it is an ``EventSink``); ``await drain()`` before the process ends."""

    #: What can become a notification (``NotificationFilter.feed``): it observes only these.
    kinds = (EngineChanged, NodeLinkChanged, ServingSlow)

    def __init__(self, config: NotifyConfig, cluster: str, *,
                 clock: Callable[[], float] | None = None) -> None:
        self.config = config
        kwargs = {"clock": clock} if clock is not None else {}
        self.filter = NotificationFilter(cluster, config.events, config.min_interval, **kwargs)
        self.failures: list[str] = []
        self.sent: list[Notification] = []
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, event: Event) -> None:
        if self.config.enabled:
            self._send(self.filter.feed(event))

    def tell(self, name: str, detail: str, node: str | None = None) -> None:
        """An event no state change carries (``given_up``), to the same command and webhook."""
        if self.config.enabled:
            self._send(self.filter.named(name, detail, node))

    def _send(self, note: Notification | None) -> None:
        if note is None:
            return
        try:
            task = asyncio.get_running_loop().create_task(self.deliver(note))
        except RuntimeError:      # no loop (a synchronous caller): nothing to run it on
            self._failed(f"notify {note.event}: no event loop to deliver it")
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def deliver(self, note: Notification) -> None:
        body = json.dumps(note.payload(), separators=(",", ":")).encode()
        self.sent.append(note)
        jobs = []
        if self.config.command:
            jobs.append(self._run_command(note, body))
        if self.config.webhook:
            jobs.append(self._post(note, body))
        await asyncio.gather(*jobs)

    async def _run_command(self, note: Notification, body: bytes) -> None:
        argv = list(self.config.command)
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE)
        except OSError as exc:
            self._failed(f"notify {note.event}: cannot run {argv[0]}: {exc.strerror or exc}")
            return
        try:
            _, err = await within(proc.communicate(body), self.config.timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            self._failed(f"notify {note.event}: {argv[0]} still running after {self.config.timeout:g} s; "
                         "killed")
            return
        if proc.returncode != 0:
            tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
            self._failed(f"notify {note.event}: {argv[0]} exited {proc.returncode}: {tail[0][:200]}")

    async def _post(self, note: Notification, body: bytes) -> None:
        url = self.config.webhook or ""
        try:
            async with httpx.AsyncClient(timeout=self.config.timeout, trust_env=True) as client:
                response = await client.post(url, content=body, headers={"content-type": "application/json"})
        except httpx.HTTPError as exc:
            self._failed(f"notify {note.event}: webhook {url}: {type(exc).__name__}: {exc}")
            return
        if response.status_code >= 400:
            self._failed(f"notify {note.event}: webhook {url}: HTTP {response.status_code}")

    def _failed(self, message: str) -> None:
        log.warning("%s", message)
        self.failures.append(message)

    async def drain(self, timeout: float | None = None) -> None:
        """Wait for notifications in flight (a verb about to exit)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout or self.config.timeout + 5)
