"""Help (F1): every key of the screen it was opened on, with what it does and its binding id, then
every key of the frame.

Made from the bindings themselves (`memframe.tui.keys`), with the person's keymap applied, so the
help says what the keys do today and cannot drift from them; the binding id is what the settings
file's `[keymap]` names to remap a key. Escape (or F1 again) closes it.
"""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from memframe.tui.keynames import PREFIX
from memframe.tui.keys import HELP_BINDINGS, KeyRow
from memframe.tui.modal import Modal
from memframe.tui.widgets.footer import KeyFooter

INTRO = (
    "One key means one thing everywhere; escape always goes back without changing anything. "
    "ctrl+p opens the command palette, which offers every action below and the themes. "
    "Keys can be remapped in the settings file's [keymap] table by the binding id shown beside each key "
    '(save = "f9").'
)


def key_table(key_rows: list[KeyRow]) -> Table:
    """Key, its binding id (what `[keymap]` names), what it does, and the longer why (the binding's tooltip)."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(style="dim", no_wrap=True)
    table.add_column()
    for row in key_rows:
        what = Text(row.description, style="bold")
        if row.tooltip:
            what.append(f" — {row.tooltip}", style="")
        table.add_row(row.keys, row.id.removeprefix(PREFIX), what)
    return table


class HelpScreen(Modal[None]):
    """The keys of `screen_name` (`here`), then the whole frame's (`every`: screen name and its rows)."""

    HELP_NAME = "Help"
    BINDINGS: ClassVar[list[BindingType]] = HELP_BINDINGS

    def __init__(self, screen_name: str, here: list[KeyRow], every: list[tuple[str, list[KeyRow]]]) -> None:
        super().__init__(classes="dialog")
        self.screen_name = screen_name
        self.here = here
        self.every = every

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box help-box"):
            yield Static(f"Help · {self.screen_name}", classes="dialog-title")
            with VerticalScroll(id="help-body"):
                yield Static(INTRO, classes="help-intro", markup=False)
                yield Static(Text("Keys here", style="bold underline"))
                yield Static(key_table(self.here), id="help-here")
                yield Static(Text("Every key of the frame", style="bold underline"), classes="help-section")
                for name, key_rows in self.every:
                    yield Static(Text(name, style="bold"), classes="help-screen-name")
                    yield Static(key_table(key_rows))
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#help-body").focus()

    def action_close(self) -> None:
        self.dismiss(None)
