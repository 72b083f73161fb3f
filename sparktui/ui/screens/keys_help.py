"""``?``: sparktui's own keys, grouped (engine, log, view, app), each with the key it has now (``[ui.keys]``
included) and, when it cannot run now, why; Textual's generic keys (scrolling, the palette) last. It
scrolls, so all of it can be read at 80×24."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


@dataclass(frozen=True)
class KeyRow:
    """One action: its keys as shown (``s``, ``g home``), its name, what it does, why it cannot run now."""

    keys: str
    label: str
    help: str = ""
    not_now: str | None = None


@dataclass(frozen=True)
class KeySection:
    title: str
    rows: Sequence[KeyRow]


def keys_table(sections: Sequence[KeySection]) -> Group:
    """A table a section, their columns of the same widths so that they line up; a row that cannot run
    now is dim, its reason on a line of its own under what it does."""
    rows = [row for section in sections for row in section.rows]
    key_width = max((cell_len(row.keys) for row in rows), default=1)
    label_width = max((cell_len(row.label) for row in rows), default=1)
    tables = []
    for section in sections:
        table = Table(title=section.title, title_justify="left", title_style="bold underline",
                      show_header=False, box=None, padding=(0, 1), expand=True)
        table.add_column("key", style="bold", no_wrap=True, width=key_width)
        table.add_column("action", no_wrap=True, width=label_width)
        table.add_column("what", ratio=1)
        for row in section.rows:
            what = Text(row.help)
            if row.not_now:
                what.append(("\n" if row.help else "") + f"not now: {row.not_now}", style="italic")
            table.add_row(row.keys, row.label, what, style="dim" if row.not_now else "")
        tables.append(table)
    return Group(*(part for table in tables for part in (table, Text())))


class KeysScreen(ModalScreen[None]):
    """The help screen; ``?``, ``escape`` or ``q`` closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "Close", id="keys.close"),
    ]
    DEFAULT_CSS = """
    KeysScreen { align: center middle; }
    KeysScreen > VerticalScroll {
        width: 100%; max-width: 110; height: 100%; max-height: 44;
        border: round $accent; border-title-align: left; border-subtitle-align: right;
        background: $surface; padding: 0 1;
    }
    """

    def __init__(self, sections: Sequence[KeySection]) -> None:
        super().__init__()
        self.sections = list(sections)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="keys-scroll") as scroll:
            scroll.border_title = "sparktui keys"
            scroll.border_subtitle = "↑↓ PgUp PgDn scroll · ? or Esc closes"
            yield Static(keys_table(self.sections), id="keys-table")

    def on_mount(self) -> None:
        self.query_one("#keys-scroll").focus()

    def action_close(self) -> None:
        self.dismiss(None)
