"""The Changes list: one row per revision (version, when, who, what, size), metadata only.

A long history is listed a page at a time, so a Down past the last listed row may still have somewhere
to go; the table says so to its screen (`RevisionTable.Owed`), which fetches the next page and pays the
rows owed, so that 100 Downs move 100 rows however the pages fall.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable

from memframe.core.types import VersionInfo
from memframe.tui.text import human_size, operation, when, who
from memframe.tui.widgets.table_caches import bound_render_caches

COLUMNS = (("Version", "version"), ("When", "when"), ("Who", "who"), ("What", "what"), ("Size", "size"))


class RevisionTable(DataTable[str]):
    """Rows keyed by version; Home and End are the screen's (End lists every page first)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("home", "screen.newest", "Newest", tooltip="The newest revision", show=False,
                id="memframe.changes.newest"),
        Binding("end", "screen.oldest", "Oldest", tooltip="The oldest revision (lists every page first)",
                show=False, id="memframe.changes.oldest"),
    ]  # fmt: skip

    class Owed(Message):
        """The person moved `rows` past the last listed row while older revisions are still to come."""

        def __init__(self, rows: int) -> None:
            super().__init__()
            self.rows = rows

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        #: False once the oldest revision is listed: a Down past the end then goes nowhere.
        self.more_to_come = True

    def on_mount(self) -> None:
        for label, key in COLUMNS:
            self.add_column(label, key=key)

    def on_resize(self, event: events.Resize) -> None:
        bound_render_caches(self, event.size.height)

    def add_revisions(self, infos: Iterable[VersionInfo], base_version: int, now: float) -> None:
        """Append a page (newest first); ● marks the editor's base version."""
        for info in infos:
            current = " ●" if info.version == base_version else ""
            self.add_row(
                f"{info.version}{current}", when(info.created_at, now), who(info), operation(info),
                human_size(info.size), key=str(info.version),
            )  # fmt: skip

    def highlighted(self) -> int | None:
        """The version under the cursor, or None while nothing is listed."""
        if not self.row_count or self.cursor_row < 0:
            return None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        return None if key is None else int(key)

    def _owe(self, rows: int) -> bool:
        if not self.more_to_come:
            return False
        self.post_message(self.Owed(rows))
        return True

    def action_cursor_down(self) -> None:
        """Down past the last listed row is owed, not lost, while older revisions are still to come."""
        if self.cursor_row >= self.row_count - 1 and self._owe(1):
            return
        super().action_cursor_down()

    def action_page_down(self) -> None:
        page = max(1, self.scrollable_content_region.height - (self.header_height if self.show_header else 0))
        short = self.cursor_row + page - (self.row_count - 1)
        if short > 0 and self._owe(short):
            self.move_cursor(row=self.row_count - 1)
            return
        super().action_page_down()
