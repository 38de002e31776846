"""The budget per section (ctrl+b): each top-level heading's bytes and share of the recall bound.

A memory over the bound is kept but withheld from recall, so a person trimming it needs to see which
section holds the bytes; the header's size meter has no room for that at 80 columns, so it opens here
on demand, measured from the draft as it is now (`core.sections`), with no I/O.
"""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from memframe.core.sections import sections
from memframe.core.types import MEMORY_RECALL_MAX_BYTES, utf8_size
from memframe.tui.modal import Modal
from memframe.tui.text import OVERSIZED_EXPLANATION
from memframe.tui.widgets.footer import KeyFooter
from memframe.tui.widgets.status import elide


def budget_table(text: str) -> Table:
    """Section, bytes, share of the bound and a meter per top-level heading, then the total."""
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True)
    table.add_column(justify="right", no_wrap=True)
    table.add_column(justify="right", no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_row(*(Text(h, style="bold") for h in ("Section", "Bytes", "Share", "")))
    for s in sections(text):
        table.add_row(elide(s.title, 30), f"{s.size:,}", f"{s.share:.1%}", _bar(s.size))
    size = utf8_size(text)
    table.add_row(
        Text("Total", style="bold"), f"{size:,}", f"{size / MEMORY_RECALL_MAX_BYTES:.1%}",
        _bar(size),
    )  # fmt: skip
    return table


def _bar(size: int, width: int = 10) -> Text:
    """A section's share of the bound, drawn as the header's size meter draws the whole."""
    filled = min(width, round(width * size / MEMORY_RECALL_MAX_BYTES))
    style = "bold red" if size > MEMORY_RECALL_MAX_BYTES else ""
    return Text.assemble(("▰" * filled, style), ("▱" * (width - filled), "dim"))


class BudgetScreen(Modal[None]):
    """The draft's bytes per top-level heading; escape closes it."""

    HELP_NAME = "Budget"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", tooltip="Back to the editor", id="memframe.budget.close"),
    ]

    def __init__(self, text: str) -> None:
        super().__init__(classes="dialog")
        self.text = text

    def compose(self) -> ComposeResult:
        size = utf8_size(self.text)
        with Vertical(classes="dialog-box"):
            yield Static(f"Bytes per section, of the {MEMORY_RECALL_MAX_BYTES:,}-byte bound", classes="dialog-title")
            with VerticalScroll(id="budget-body"):
                if not self.text:
                    yield Static("The memory is empty: there are no sections yet.")
                else:
                    yield Static(budget_table(self.text), id="budget-table")
                if size > MEMORY_RECALL_MAX_BYTES:
                    over = size - MEMORY_RECALL_MAX_BYTES
                    yield Static(f"\n⚠ Over the bound by {over:,} bytes. {OVERSIZED_EXPLANATION}", markup=False)
                else:
                    yield Static(f"\n{MEMORY_RECALL_MAX_BYTES - size:,} bytes left before recall withholds it.")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#budget-body").focus()

    def action_close(self) -> None:
        self.dismiss(None)
