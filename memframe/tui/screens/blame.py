"""Blame (b in Changes): one revision line by line, each line with the version that wrote it, who and when.

A person reviewing what is remembered needs to see whether they or the Assistant wrote a line, and for
a capture the message of theirs that led to it; the whole history is read and decrypted on a worker
thread here, never on the server. Enter dismisses with the line's version, whose diff Changes then
shows; `i` reads the capture's conversation's receipts (ids and versions only).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Static

from memframe.backend.base import Backend
from memframe.core.blame import BlameLine
from memframe.core.types import Author, Operation, RecallStatus
from memframe.core.wording import many
from memframe.tui import blame_calls
from memframe.tui.keynames import key_of
from memframe.tui.text import ago, when
from memframe.tui.widgets.footer import KeyFooter
from memframe.tui.widgets.status import elide


class BlameReady(Message):
    """The worker's blame of one revision came back."""

    def __init__(self, outcome: blame_calls.BlameOutcome) -> None:
        super().__init__()
        self.outcome = outcome


class ReceiptsReady(Message):
    """The worker's read of one conversation's receipts came back."""

    def __init__(self, outcome: blame_calls.ReceiptsOutcome) -> None:
        super().__init__()
        self.outcome = outcome


def who_wrote(line: BlameLine) -> str:
    """The person's user name ("imported from NAME" for a file they imported), or "Assistant" with the
    conversation; an Undo names what it restored."""
    who = line.imported_from or line.who if line.author is Author.PERSON else f"Assistant {line.who}".rstrip()
    if line.operation is Operation.UNDO and line.restored_from is not None:
        who += f" (undo of {line.restored_from})"
    return who


def _who_cell(line: BlameLine) -> str:
    """`who_wrote` as the narrow Who column shows it: an import by its file's name."""
    return who_wrote(line) if line.source is None else f"from {line.source}"


class BlameScreen(Screen[int | None]):
    """Dismisses with the version whose diff to open (enter on a line), or None."""

    #: This screen's rules, parsed when it first opens rather than before the frame's first paint.
    DEFAULT_CSS = """
    #blame-title { height: auto; padding: 0 1; background: $boost; text-style: bold; }
    #blame-lines { height: 1fr; }
    #blame-detail {
        height: 7;  /* fixed: a pane that grew with the line would scroll the highlighted line out of view */
        border: round $secondary;
        padding: 0 1;
    }
    """
    SCOPED_CSS = False  # the selectors as written: they name this screen's own ids and classes

    HELP_NAME = "Blame"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", tooltip="Back to Changes", id="memframe.blame.back"),
        Binding("enter", "open", "Its diff", tooltip="Open the diff of the version that wrote this line",
                priority=True, id="memframe.blame.open"),
        Binding("i", "receipts", "Receipts", tooltip="The receipts of the conversation a capture came from",
                id="memframe.blame.receipts"),
    ]  # fmt: skip

    def __init__(self, backend: Backend, at: int, *, clock: Callable[[], float]) -> None:
        super().__init__()
        self.backend = backend
        self.at = at
        self.clock = clock
        self.outcome: blame_calls.BlameOutcome | None = None

    def compose(self) -> ComposeResult:
        yield Static(f"Blame — revision {self.at}: reading and decrypting its history…", id="blame-title")
        yield DataTable(id="blame-lines", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="blame-detail"):
            yield Static(id="blame-why")
        yield KeyFooter()

    @property
    def table(self) -> DataTable[str | Text]:
        return self.query_one("#blame-lines", DataTable)

    def on_mount(self) -> None:
        for label in ("Version", "Who", "When", "Line"):
            self.table.add_column(label, key=label.lower())
        self.table.focus()
        self._blame(self.at)

    @work(thread=True, group="io-blame", exclusive=True, exit_on_error=False)
    def _blame(self, at: int) -> None:
        self.post_message(BlameReady(blame_calls.blame_at(self.backend, at)))

    def on_blame_ready(self, message: BlameReady) -> None:
        outcome = self.outcome = message.outcome
        title = self.query_one("#blame-title", Static)
        if outcome.error is not None:
            title.update(f"Blame — revision {self.at} could not be read: {outcome.error}")
            return
        now = self.clock()
        versions = {line.version for line in outcome.lines}
        title.update(
            f"Blame — revision {self.at}: {many(len(outcome.lines), 'line')} from {many(len(versions), 'version')} · "
            f"enter: its diff · {key_of(self.app, 'blame.back')}: back"
        )
        for n, line in enumerate(outcome.lines):
            self.table.add_row(
                str(line.version), elide(_who_cell(line), 20), ago(now - line.time),
                Text(line.text.rstrip("\r\n"), no_wrap=True, overflow="ellipsis"), key=str(n),
            )  # fmt: skip
        if not outcome.lines:
            self.query_one("#blame-why", Static).update(f"Revision {self.at} is empty: there are no lines to blame.")

    def _line(self) -> BlameLine | None:
        table = self.table
        if self.outcome is None or not table.row_count or table.cursor_row < 0:
            return None
        return self.outcome.lines[table.cursor_row]

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        line = self._line()
        if line is not None:
            self.query_one("#blame-why", Static).update(self._why(line))

    def _why(self, line: BlameLine) -> Text:
        """Which version wrote the line and when; for a capture, the person's message that led to it."""
        assert self.outcome is not None
        by = who_wrote(line) if line.source is None else f"{line.who}, imported from {line.source}"
        out = Text.assemble(
            (f"Version {line.version}", "bold"), f" · {line.operation.value} by {by} · ", when(line.time, self.clock()),
        )  # fmt: skip
        capture = self.outcome.captures.get(line.version)
        if line.author is Author.ASSISTANT and capture is not None:
            said = "(not in the transcript)" if capture.message is None else f"“{capture.message}”"
            out.append(f"\nWhy: your message in conversation {capture.conversation_id}: ")
            out.append(said, style="italic")
            out.append(f"\n{key_of(self.app, 'blame.receipts')}: that conversation's receipts", style="dim")
        elif line.author is Author.ASSISTANT:
            out.append("\nThe Assistant's capture; its conversation is not one of yours on this machine.", style="dim")
        return out

    def action_open(self) -> None:
        line = self._line()
        if line is not None:
            self.dismiss(line.version)

    def action_receipts(self) -> None:
        line = self._line()
        capture = None if line is None or self.outcome is None else self.outcome.captures.get(line.version)
        if capture is None:
            self.notify("This line is not the Assistant's capture: there is no conversation to show.", timeout=3)
            return
        self.query_one("#blame-why", Static).update(f"Reading the receipts of {capture.conversation_id}…")
        self._receipts(capture.conversation_id)

    @work(thread=True, group="io-receipts", exclusive=True, exit_on_error=False)
    def _receipts(self, conversation_id: str) -> None:
        self.post_message(ReceiptsReady(blame_calls.receipts(self.backend, conversation_id)))

    def on_receipts_ready(self, message: ReceiptsReady) -> None:
        outcome = message.outcome
        out = Text(f"Receipts of conversation {outcome.conversation_id}", style="bold")
        if outcome.error is not None:
            out.append(f"\nCould not be read: {outcome.error}")
        elif not outcome.receipts:
            out.append("\nNo answer of this conversation has a receipt.")
        now = self.clock()
        for r in outcome.receipts:
            used = f"used revision {r.revision}" if r.status is RecallStatus.PROVIDED else f"memory {r.status.value}"
            out.append(f"\n{when(r.created_at, now)} · answer {r.admission_id} call {r.call_index + 1}: {used}")
        self.query_one("#blame-why", Static).update(out)

    def action_close(self) -> None:
        self.dismiss(None)
