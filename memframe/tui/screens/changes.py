"""Changes: the memory's revisions, reconstructed on this client from its encrypted versions.

The list is metadata only (version, time, who, what, size) and arrives a
page at a time as the cursor nears the end, so a long history never freezes
the frame. Decrypting and diffing the highlighted revision runs on a worker
thread too; a newer highlight supersedes an older one. Undo is not done here:
the screen dismisses with the revision and the main screen restores it with
the same draft and conflict handling as a Save.

Opened `at` a revision (an Assistant answer's receipt), it keeps fetching
pages until that revision is listed, then puts the cursor on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Static

from memframe.backend.base import Backend
from memframe.core.types import Operation, VersionInfo
from memframe.tui import calls
from memframe.tui.messages import DiffReady, PageLoaded, Tickets
from memframe.tui.state import DocumentState
from memframe.tui.text import diff_text, human_size, operation, when, who
from memframe.tui.widgets.footer import KeyFooter

PAGE_SIZE = 50
#: Start fetching the next page when the cursor is this close to the last loaded row.
PREFETCH_ROWS = 5
#: The fewest rendered lines and cells the revisions list keeps cached (more on a taller screen).
LINES_CACHED = 64
CELLS_CACHED = 1024


class RevisionTable(DataTable[str]):
    """The revisions list: a DataTable whose render caches hold a few screens of lines, not thousands.

    DataTable keys each cached line by the cursor's position, so every cursor move renders the
    visible lines afresh and the stale ones stay cached, up to 1,000 lines and 10,000 cells: tens of
    thousands of objects that every full garbage collection walks and, once they are dropped, frees
    in one go (over 100 ms of a walk down the list on a slow machine). Bounded by what is on screen,
    the table draws exactly the same; it only forgets renders that no cursor position shows any more.
    """

    def on_resize(self, event: events.Resize) -> None:
        lines = max(LINES_CACHED, 4 * event.size.height)
        sizes = {
            "_row_render_cache": lines,
            "_line_cache": lines,
            "_row_renderable_cache": lines,
            "_cell_render_cache": max(CELLS_CACHED, lines * len(self.columns)),
        }
        for name, size in sizes.items():
            # DataTable's own caches (not public API): a Textual that renames one keeps its default size.
            cache = getattr(self, name, None)
            if cache is not None and hasattr(cache, "maxsize"):
                cache.maxsize = size


class ChangesScreen(Screen[int | None]):
    """Dismisses with a revision to restore (Undo), or None."""

    HELP_NAME = "Changes"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back to editor", id="memframe.changes.back"),
        Binding("d", "toggle_against", "Diff: previous/current", id="memframe.changes.against"),
        Binding("u", "restore", "Undo to this revision", id="memframe.changes.restore"),
    ]

    def __init__(
        self, backend: Backend, state: DocumentState, *, clock: Callable[[], float], page_size: int = PAGE_SIZE,
        at: int | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        #: The revision to open at, until it has been found (or shown not to exist).
        self.at = at
        self.opened_at: int | None = None
        self.backend = backend
        self.state = state
        self.clock = clock
        self.page_size = page_size
        self.texts = calls.RevisionTexts(backend)
        self.rows: dict[int, VersionInfo] = {}
        self.oldest: int | None = None
        self.complete = False
        self.fetching = False
        self.against = "previous"
        self.pages = Tickets()
        self.diffs = Tickets()

    def compose(self) -> ComposeResult:
        yield Static(id="changes-title")
        yield RevisionTable(id="revisions", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="diff-pane"):
            yield Static(id="diff-title")
            yield Static(id="diff")
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#revisions", DataTable)
        for label, key in (("Version", "version"), ("When", "when"), ("Who", "who"), ("What", "what")):
            table.add_column(label, key=key)
        table.add_column("Size", key="size")
        table.focus()
        self._title()
        self._request_page()

    # --- the list, page by page ----------------------------------------------------------------

    def _title(self, note: str = "") -> None:
        more = "" if self.complete else " (more load as you scroll)"
        text = f"Changes — {len(self.rows)} revision{'s' if len(self.rows) != 1 else ''} loaded{more}"
        text += f" · ● is version {self.state.base_version}, what the editor is based on"
        if self.opened_at is not None:
            text += f" · opened at revision {self.opened_at}"
        self.query_one("#changes-title", Static).update(text + (f" · {note}" if note else ""))

    def _request_page(self) -> None:
        if self.fetching or self.complete:
            return
        self.fetching = True
        self._load_page(self.pages.issue(), self.oldest)

    @work(thread=True, group="io", exit_on_error=False)
    def _load_page(self, ticket: int, before: int | None) -> None:
        self.post_message(PageLoaded(ticket, calls.history_page(self.backend, self.page_size, before)))

    def on_page_loaded(self, message: PageLoaded) -> None:
        self.fetching = False
        page = message.page
        if page.error is not None:
            self._title(f"could not load more: {page.error}")
            return
        table = self.query_one("#revisions", DataTable)
        first = not self.rows
        now = self.clock()
        for info in page.rows:
            self.rows[info.version] = info
            current = " ●" if info.version == self.state.base_version else ""
            table.add_row(
                f"{info.version}{current}", when(info.created_at, now), who(info), operation(info),
                human_size(info.size), key=str(info.version),
            )  # fmt: skip
        if page.rows:
            self.oldest = page.rows[-1].version
        self.complete = page.last_page or (self.oldest is not None and self.oldest <= 1)
        self._title()
        if self.at is not None and self._seek(self.at):
            return
        if first and not page.rows:
            self.query_one("#diff", Static).update("No revisions yet: the memory has never been saved.")
        elif first:
            self._show_diff(page.rows[0].version)

    def _seek(self, version: int) -> bool:
        """Move the cursor to `version` once it is listed; fetch the next page until then. True while seeking."""
        if version in self.rows:
            self.at, self.opened_at = None, version
            table = self.query_one("#revisions", DataTable)
            row = table.get_row_index(str(version))
            if row == table.cursor_row:
                self._show_diff(version)
            table.move_cursor(row=row)
            self._title()
            return True
        if not self.complete:
            self._title(f"looking for revision {version}…")
            self._request_page()
            return True
        self.at = None
        self._title(f"revision {version} is not in this history")
        return False

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is None:
            return
        self._show_diff(int(event.row_key.value))
        if event.cursor_row >= len(self.rows) - PREFETCH_ROWS:
            self._request_page()

    # --- the diff of the highlighted revision ---------------------------------------------------

    def _highlighted(self) -> int | None:
        table = self.query_one("#revisions", DataTable)
        if not self.rows or table.cursor_row < 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return None if key is None else int(key)

    def _show_diff(self, version: int) -> None:
        self.query_one("#diff-title", Static).update(f"Revision {version}: decrypting…")
        self._diff(self.diffs.issue(), version, self.against, self.state.server_text, self.state.base_version)

    # exclusive: a diff still queued when the person moves on is cancelled before it decrypts anything
    @work(thread=True, group="io-diff", exclusive=True, exit_on_error=False)
    def _diff(self, ticket: int, version: int, against: str, current: str, current_version: int) -> None:
        diff = calls.revision_diff(self.texts, version, against, current, current_version)
        rendered = None if diff.error else diff_text(diff.old, diff.new, diff.old_label, diff.new_label)
        self.post_message(DiffReady(ticket, diff, rendered))  # diffing a long text stays off the UI thread

    def on_diff_ready(self, message: DiffReady) -> None:
        if not self.diffs.latest(message.ticket):
            return  # the person has moved on to another revision
        diff = message.diff
        info = self.rows.get(diff.version)
        title = f"Revision {diff.version}"
        if info is not None:
            title += f" · {operation(info)} by {who(info)} · {human_size(info.size)}"
        if diff.version == self.opened_at:
            title += " · the revision that answer used"
        title += f"\n{diff.old_label} → {diff.new_label}   (d: diff against the "
        title += "current text)" if diff.against == "previous" else "previous revision)"
        self.query_one("#diff-title", Static).update(title)
        body = self.query_one("#diff", Static)
        if diff.error is not None or message.rendered is None:
            body.update(f"Could not read this revision: {diff.error}")
        else:
            body.update(message.rendered)

    def action_toggle_against(self) -> None:
        self.against = "current" if self.against == "previous" else "previous"
        version = self._highlighted()
        if version is not None:
            self._show_diff(version)

    def action_restore(self) -> None:
        version = self._highlighted()
        info = self.rows.get(version) if version is not None else None
        if info is None:
            return
        if info.operation is Operation.DELETE:
            self.notify("That revision is a deletion; there is no text to restore.", severity="warning")
            return
        self.dismiss(version)

    def action_close(self) -> None:
        self.dismiss(None)
