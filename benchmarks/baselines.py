"""The previous ways the benchmarks compare the dashboard against in the same run. They live here, not in
the product: the product has one way.

- ``NaiveLogPane`` (``bench_logflood.py``): every log line written with its own ``Log.write`` as it arrives,
  instead of queued and written in one ``write_lines`` per drain.
- ``poll_always`` (``bench_idle.py``): a drain every 1/``FLUSH_HZ`` s and every panel re-rendered each tick,
  whether anything arrived or not, instead of a drain per batch of events and a tick that redraws only
  what moves.
"""

from __future__ import annotations

from collections.abc import Iterable

from sparktui.domain.events import Event, LogRecords
from sparktui.domain.logs import LogRecord
from sparktui.ui.app import SparkApp
from sparktui.ui.event_drain import FLUSH_HZ
from sparktui.ui.widgets.log_pane import LogPane, format_record


class NaiveLogPane(LogPane):
    """The log pane writing each line as it arrives (same lines, same filters, one ``write`` each)."""

    def add_records(self, source: str, records: Iterable[LogRecord | str]) -> None:
        super().add_records(source, records)
        log = self.log_widget
        for record in self._pending:
            log.write(format_record(record, self.aliases) + "\n")
            self.lines_written += 1
        self._pending.clear()


class NaiveLogApp(SparkApp):
    """The dashboard with ``NaiveLogPane`` (while ``naive``): its log records skip the event queue and go
    straight to it."""

    naive = True

    def compose(self):  # type: ignore[no-untyped-def]
        for widget in super().compose():
            if self.naive and type(widget) is LogPane:
                widget = NaiveLogPane(widget.buffer_lines, aliases=widget.aliases, source=widget.source_of,
                                      id=widget.id)
            yield widget

    def sink(self, event: Event) -> None:
        if self.naive and isinstance(event, LogRecords):
            self.query_one(LogPane).add_records(event.source, event.records)
            return
        super().sink(event)


def poll_always(app: type[SparkApp]) -> None:
    """Turn ``app`` (the class the CLI builds) into the polling dashboard."""
    mount, targets = app.on_mount, app._tick_targets

    def on_mount(self: SparkApp) -> None:
        mount(self)
        self.set_interval(1.0 / FLUSH_HZ, self.drain)

    def tick_targets(self: SparkApp) -> tuple[set[str], bool]:
        nodes, _clock = targets(self)
        return nodes | set(self.state.nodes), True

    app.on_mount = on_mount  # type: ignore[method-assign]
    app._tick_targets = tick_targets  # type: ignore[method-assign]
    app._ticks_with_samples = lambda self: False  # type: ignore[method-assign]
