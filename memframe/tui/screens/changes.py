"""Changes: the memory's revisions, reconstructed on this client from its encrypted versions.

The list is metadata only and arrives a page at a time as the cursor nears the end, so a long history
never freezes the frame; decrypting and diffing the highlighted revision runs on a worker thread, and a
newer highlight supersedes an older one. Undo and revert are not done here: the screen dismisses with
the request and the main screen runs it with a Save's draft and conflict handling. Opened `at` a
revision (a receipt), or asked for one (g), it fetches pages until that revision is listed. Home and
End go to the newest and oldest; Downs past the last listed row are owed and paid when the next page
arrives; `/` searches every revision's text, decrypted here (`widgets.revision_search`); `v` shows a
whole text; `b` blames a revision line by line (`screens.blame`); `f` forgets the history before a
revision and `k` rotates the key, then the list is read afresh (`dialogs.forget`). The list is
`widgets.revision_table`. A few lines over 400 with the screen's own CSS: one job still, the list
of revisions and what is done from it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from memframe.backend.base import Backend
from memframe.core.types import Operation, VersionInfo
from memframe.tui import changes_calls
from memframe.tui.dialogs.forget import ForgetKeys
from memframe.tui.keynames import key_of
from memframe.tui.messages import DiffReady, PageLoaded, Tickets
from memframe.tui.revert_flow import RevertRequest
from memframe.tui.state import DocumentState
from memframe.tui.text import diff_text, revision_title
from memframe.tui.widgets.footer import KeyFooter
from memframe.tui.widgets.revision_search import RevisionSearch, SearchProgress, search_job
from memframe.tui.widgets.revision_table import RevisionTable

PAGE_SIZE = 50
#: Pages asked for while seeking a revision far down the list (End, go to, a search hit), up to the API's cap.
SEEK_PAGE_SIZE = 1000
#: Start fetching the next page when the cursor is this close to the last loaded row.
PREFETCH_ROWS = 5


class ChangesScreen(ForgetKeys, Screen["int | RevertRequest | None"]):
    """Dismisses with a revision to restore (Undo), a version whose change to revert, or None."""

    #: This screen's rules, parsed when it first opens rather than before the frame's first paint.
    DEFAULT_CSS = """
    #changes-title { height: auto; padding: 0 1; background: $boost; text-style: bold; }
    #revisions { height: auto; max-height: 40%; }
    #diff-pane { height: 1fr; border: round $secondary; padding: 0 1; }
    #diff-title { color: $accent; margin-bottom: 1; }
    #changes-input { dock: bottom; margin-bottom: 1; }
    """
    SCOPED_CSS = False  # the selectors as written: they name this screen's own ids and classes

    HELP_NAME = "Changes"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", tooltip="Back to the editor (or close the search / go-to box first)",
                id="memframe.changes.back"),
        Binding("u", "restore", "Undo", tooltip="Restore this revision's text as a new version",
                id="memframe.changes.restore"),
        Binding("r", "revert", "Revert", tooltip="Undo only this version's change, keeping later edits",
                id="memframe.changes.revert"),
        Binding("b", "blame", "Blame", tooltip="Each line of this revision with the version, who and when",
                id="memframe.changes.blame"),
        Binding("c", "toggle_against", "Compare", tooltip="Diff against the previous revision or the current text",
                show=False, id="memframe.changes.against"),
        Binding("v", "toggle_view", "Text", tooltip="Show the revision's whole text, or its diff",
                id="memframe.changes.view"),
        Binding("g", "goto", "Go to", tooltip="Go to a version by its number", id="memframe.changes.goto"),
        Binding("f", "forget", "Forget before", tooltip="Forget the history before this revision: destroy the "
                "older versions by rotating the key (asks first, names what goes)", id="memframe.changes.forget"),
        Binding("k", "rotate_key", "Rotate key", tooltip="Rotate the workspace key: everything re-sealed under a "
                "new one made here (asks first)", show=False, id="memframe.changes.rotate"),
        Binding("slash", "search", "Search", tooltip="Search the text of every revision (decrypted here)",
                id="memframe.changes.search"),
        Binding("n", "next_match", "Next match", tooltip="The next (older) revision the search found", show=False,
                id="memframe.changes.next_match"),
    ]  # fmt: skip

    def __init__(
        self, backend: Backend, state: DocumentState, *, clock: Callable[[], float], page_size: int = PAGE_SIZE,
        at: int | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        #: The revision to open at (or go to), until it has been found (or shown not to exist).
        self.at = at
        self.receipt_at = at
        self.opened_at: int | None = None
        self.backend = backend
        self.state = state
        self.clock = clock
        self.page_size = page_size
        self.against = "previous"
        #: "diff" (against `against`) or "text" (the revision's whole text).
        self.view = "diff"
        #: What the input box is for while shown: "goto" or "search".
        self.asking: str | None = None
        self.search = RevisionSearch()
        self.pages, self.diffs, self.searches = Tickets(), Tickets(), Tickets()
        self._fresh()

    def _fresh(self) -> None:  # nothing listed yet: before the first page, or after a key rotation
        self.texts = changes_calls.RevisionTexts(self.backend)
        self.rows: dict[int, VersionInfo] = {}
        self.oldest: int | None = None
        self.complete = self.fetching = False
        self.forgotten = ""  # "versions 1–(N−1) were forgotten …", once the oldest page says so
        #: The newest version, once the first page is in: the history's length (versions count 1, 2, …).
        self.total: int | None = None
        #: Rows the person moved down past the last listed one, paid when the next page arrives.
        self.owed = 0

    def compose(self) -> ComposeResult:
        yield Static(id="changes-title")
        yield RevisionTable(id="revisions")
        with VerticalScroll(id="diff-pane"):
            yield Static(id="diff-title")
            yield Static(id="diff")
        yield Input(id="changes-input")
        yield KeyFooter()

    @property
    def table(self) -> RevisionTable:
        return self.query_one(RevisionTable)

    def on_mount(self) -> None:
        self.query_one("#changes-input", Input).display = False
        self.table.focus()
        self._title()
        self._request_page()

    # --- the list, page by page ----------------------------------------------------------------

    def _title(self, note: str = "") -> None:
        if self.total is None:
            text = "Changes — reading the history…" if not self.complete else "Changes — no revisions yet"
        else:
            count = len(self.rows) if self.complete else self.total  # fewer once older versions were forgotten
            total = f"{count:,} revision{'s' if count != 1 else ''}"
            listed = "" if self.complete else f" ({len(self.rows):,} listed; more load as you go)"
            text = f"Changes — {total}{listed}"
        text += f" · {self.forgotten}" if self.forgotten else ""
        text += f" · ● is version {self.state.base_version}, the editor's base"
        if self.opened_at is not None:
            text += f" · opened at revision {self.opened_at}"
        if self.search.note:
            text += f" · {self.search.note}"
        self.query_one("#changes-title", Static).update(text + (f" · {note}" if note else ""))

    def _request_page(self, *, seeking: bool = False) -> None:
        if self.fetching or self.complete:
            return
        self.fetching = True
        size = max(self.page_size, SEEK_PAGE_SIZE) if seeking else self.page_size
        self._load_page(self.pages.issue(), self.oldest, size)

    @work(thread=True, group="io", exit_on_error=False)
    def _load_page(self, ticket: int, before: int | None, size: int) -> None:
        self.post_message(PageLoaded(ticket, changes_calls.history_page(self.backend, size, before)))

    def on_revision_table_owed(self, message: RevisionTable.Owed) -> None:
        if not self.complete:
            self.owed += message.rows
            self._request_page()

    def on_page_loaded(self, message: PageLoaded) -> None:
        if not self.pages.latest(message.ticket):
            return  # a page of the history as it was before `reload`
        self.fetching = False
        page = message.page
        if page.error is not None:
            self._title(f"could not load more: {page.error}")
            return
        table = self.table
        first = not self.rows
        self.rows.update((info.version, info) for info in page.rows)
        table.add_revisions(page.rows, self.state.base_version, self.clock())
        if page.rows:
            self.oldest = page.rows[-1].version
            if self.total is None:
                self.total = page.rows[0].version
        self.complete = page.last_page or (self.oldest is not None and self.oldest <= 1)
        self.forgotten = page.forgotten or self.forgotten
        table.more_to_come = not self.complete
        self._title()
        if self.owed and page.rows:
            step, self.owed = self.owed, 0
            target = table.cursor_row + step
            if target > table.row_count - 1 and not self.complete:
                self.owed = target - (table.row_count - 1)
                self._request_page()
            table.move_cursor(row=min(target, table.row_count - 1), animate=False)
        if self.at is not None and self._seek(self.at, opened=self.at == self.receipt_at):
            return
        if first and not page.rows:
            self.query_one("#diff", Static).update("No revisions yet: the memory has never been saved.")
        elif first:
            self._show_diff(page.rows[0].version)

    def _seek(self, version: int, *, opened: bool = False) -> bool:
        """Move the cursor to `version` once it is listed; fetch the next page until then. True while seeking.

        `opened`: this is the revision Changes was opened at (an answer's receipt), and the title says so."""
        if version in self.rows:
            self.at = None
            if opened:
                self.opened_at, self.receipt_at = version, None
            table = self.table
            row = table.get_row_index(str(version))
            if row == table.cursor_row:
                self._show_diff(version)
            table.move_cursor(row=row)
            self._title()
            return True
        if not self.complete:
            self.at = version
            self._title(f"looking for revision {version}… ({len(self.rows):,} listed)")
            self._request_page(seeking=True)
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

    def _show_diff(self, version: int) -> None:
        self.query_one("#diff-title", Static).update(f"Revision {version}: decrypting…")
        against = "text" if self.view == "text" else self.against
        self._diff(self.diffs.issue(), version, against, self.state.server_text, self.state.base_version)

    # exclusive: a diff still queued when the person moves on is cancelled before it decrypts anything
    @work(thread=True, group="io-diff", exclusive=True, exit_on_error=False)
    def _diff(self, ticket: int, version: int, against: str, current: str, current_version: int) -> None:
        if against == "text":  # the revision's whole text, not a diff
            diff = changes_calls.revision_text(self.texts, version)
            shown = Text(diff.new) if diff.new else Text("(empty: this revision has no text)", style="dim")
            self.post_message(DiffReady(ticket, diff, None if diff.error else shown))
            return
        diff = changes_calls.revision_diff(self.texts, version, against, current, current_version)
        rendered = None if diff.error else diff_text(diff.old, diff.new, diff.old_label, diff.new_label)
        self.post_message(DiffReady(ticket, diff, rendered))  # diffing a long text stays off the UI thread

    def on_diff_ready(self, message: DiffReady) -> None:
        if not self.diffs.latest(message.ticket):
            return  # the person has moved on to another revision
        diff = message.diff
        contains = self.search.query if diff.version in self.search.matches else None
        keys = key_of(self.app, "changes.view"), key_of(self.app, "changes.against")
        title = revision_title(diff, self.rows.get(diff.version), diff.version == self.opened_at, contains, *keys)
        self.query_one("#diff-title", Static).update(title)
        body = self.query_one("#diff", Static)
        if diff.error is not None or message.rendered is None:
            body.update(f"Could not read this revision: {diff.error}")
        else:
            body.update(message.rendered)

    def _redraw(self) -> None:
        if (version := self.table.highlighted()) is not None:
            self._show_diff(version)

    def action_toggle_against(self) -> None:
        self.against, self.view = ("current" if self.against == "previous" else "previous"), "diff"
        self._redraw()

    def action_toggle_view(self) -> None:
        self.view = "text" if self.view == "diff" else "diff"
        self._redraw()

    def action_restore(self) -> None:
        info = self.rows.get(version) if (version := self.table.highlighted()) is not None else None
        if info is not None and info.operation is Operation.DELETE:
            self.notify("That revision is a deletion; there is no text to restore.", severity="warning")
        elif info is not None:
            self.dismiss(info.version)

    def action_revert(self) -> None:
        if (version := self.table.highlighted()) is not None:
            self.dismiss(RevertRequest(version))

    def action_blame(self) -> None:
        """Blame the highlighted revision (the current one before any is listed); enter there opens a diff."""
        from memframe.tui.screens.blame import BlameScreen

        at = self.table.highlighted() or self.state.base_version
        if at >= 1:
            self.app.push_screen(BlameScreen(self.backend, at, clock=self.clock), self._blamed)

    def _blamed(self, version: int | None) -> None:
        if version is not None:  # enter on a line: that version's diff against the one before it
            self.view, self.against = "diff", "previous"
            self._seek(version)

    # --- Home, End, go to ------------------------------------------------------------------------

    def action_newest(self) -> None:
        self.owed = 0
        if self.table.row_count:
            self.table.move_cursor(row=0, animate=False)

    def action_oldest(self) -> None:
        """End: list every page (large ones), then the last row; the title counts them meanwhile."""
        self.owed = 0
        if self.complete:
            table = self.table
            if table.row_count:
                table.move_cursor(row=table.row_count - 1, animate=False)
            return
        self._seek(1)

    def action_goto(self) -> None:
        self._ask("goto", f"Go to version (a number; enter goes, {key_of(self.app, 'changes.back')} closes)")

    def _goto(self, answer: str) -> None:
        try:
            version = int(answer.strip().lstrip("#").replace(",", "").replace("_", ""))
        except ValueError:
            self._title(f"“{answer.strip()}” is not a version number")
            return
        if version < 1 or (self.total is not None and version > self.total):
            newest = f"; the newest is {self.total:,}" if self.total else ""
            self._title(f"there is no version {version:,}{newest}")
            return
        self._seek(version)

    # --- search ----------------------------------------------------------------------------------

    def action_search(self) -> None:
        if self.search.running:
            self.notify(f"A search is running: {key_of(self.app, 'changes.back')} cancels it first.", timeout=3)
            return
        self._ask("search", "Search every revision's text (decrypted on this machine); enter searches")

    def _search(self, query: str) -> None:
        if not query.strip() or self.total is None:
            return
        self.search.start(query, self.total, key_of(self.app, "changes.back"))
        self._title()
        job = partial(search_job, self.backend, self.searches.issue(), query, self.total, self.post_message)
        self.run_worker(job, thread=True, group="io-search", exclusive=True, exit_on_error=False)

    def on_search_progress(self, message: SearchProgress) -> None:
        if not self.searches.latest(message.ticket) or not self.search.running:
            return
        keys = key_of(self.app, "changes.back"), key_of(self.app, "changes.next_match")
        first = self.search.progress(message, *keys)
        self._title()
        if first:
            self._seek(self.search.matches[0])

    def cancel_search(self) -> None:
        self.searches.issue()  # progress already on its way is dropped
        self.workers.cancel_group(self, "io-search")
        self.search.cancel(key_of(self.app, "changes.next_match"))
        self._title()

    def action_next_match(self) -> None:
        if (version := self.search.next_match(self.table.highlighted())) is None:
            self._title("no search results: / searches")
        else:
            self._seek(version)

    # --- the one input box (go to, search) --------------------------------------------------------

    def _ask(self, purpose: str, placeholder: str) -> None:
        box = self.query_one("#changes-input", Input)
        self.asking = purpose
        box.placeholder = placeholder
        box.value = ""
        box.display = True
        box.focus()

    def _close_input(self) -> None:
        self.query_one("#changes-input", Input).display = False
        self.asking = None
        self.table.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        purpose = self.asking
        self._close_input()
        if purpose == "goto":
            self._goto(event.value)
        elif purpose == "search":
            self._search(event.value)

    def action_close(self) -> None:
        """Escape closes the innermost thing: the input box, then a running search, then the screen."""
        if self.asking is not None:
            self._close_input()
        elif self.search.running:
            self.cancel_search()
        else:
            self.dismiss(None)
