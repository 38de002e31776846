"""Proposals: the Assistant's pending suggestions, each with its diff against the saved memory.

A proposal is made when memory is Read only (or when an automatic change
lost a race to a newer human text). Applying one is the person's own Save,
run by the main screen's flow: an unsaved draft is settled first through
Save / Discard / Cancel, and a newer version on the server opens the usual
conflict view. One made before a Clear is refused with that reason; one
whose target line changed shows as a conflict. Dismissing changes no memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Static

from memframe.backend.base import Backend
from memframe.core.turns import ProposalReason
from memframe.tui import assistant_calls
from memframe.tui.assistant_calls import BEFORE_CLEAR, ProposalView
from memframe.tui.messages import ProposalDismissed, ProposalsLoaded, Tickets
from memframe.tui.state import DocumentState
from memframe.tui.text import ago
from memframe.tui.widgets.footer import KeyFooter

if TYPE_CHECKING:
    from memframe.core.turns import Proposal

#: Why the Assistant proposed rather than remembered, in a few words: the list fits 80 columns.
REASONS = {
    ProposalReason.READ_ONLY: "Read only",
    ProposalReason.CONFLICT: "memory changed",
    ProposalReason.UNGROUNDED: "not in your words",
}


class ProposalsScreen(Screen[None]):
    """Pending proposals; Apply (a normal Save) or Dismiss the highlighted one.

    Applying is the main screen's flow, asked for by message: `Apply` bubbles to the app, which
    routes it to the main screen, and `Applied` comes back when that flow has ended.
    """

    #: This screen's rules, parsed when it first opens rather than before the frame's first paint.
    DEFAULT_CSS = """
    #proposals-title { height: auto; padding: 0 1; background: $boost; text-style: bold; }
    #proposal-list { height: auto; max-height: 35%; }
    #proposal-pane { height: 1fr; border: round $secondary; padding: 0 1; }
    #proposal-title { color: $accent; margin-bottom: 1; }
    #proposals-message { height: auto; padding: 0 1; color: $success; }
    #proposals-message.-error { color: $text; background: $error 35%; }
    """
    SCOPED_CSS = False  # the selectors as written: they name this screen's own ids and classes

    class Apply(Message):
        """Apply `proposal` as the person's own Save; `reply()` tells `proposals` the flow has ended."""

        def __init__(self, proposals: ProposalsScreen, proposal: Proposal) -> None:
            super().__init__()
            self.proposals = proposals
            self.proposal = proposal

        def reply(self) -> None:
            self.proposals.post_message(ProposalsScreen.Applied())

    class Applied(Message, bubble=False):
        """The apply flow has ended (applied, refused or cancelled); its words are in the shared state."""

    HELP_NAME = "Proposals"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", id="memframe.proposals.back"),
        Binding("a", "apply", "Apply", tooltip="Apply the highlighted proposal as your own Save",
                id="memframe.proposals.apply"),
        Binding("x", "drop", "Dismiss", tooltip="Drop the highlighted proposal (asks first); memory is not changed",
                id="memframe.proposals.dismiss"),
        Binding("ctrl+r", "reload", "Reload", tooltip="Read the pending proposals again", show=False,
                id="memframe.proposals.reload"),
    ]  # fmt: skip

    def __init__(self, backend: Backend, state: DocumentState, *, clock: Callable[[], float]) -> None:
        super().__init__()
        self.backend = backend
        self.state = state
        self.clock = clock
        self.views: dict[str, ProposalView] = {}
        self.busy = False
        self.loads = Tickets()  # a newer read supersedes an older one
        self.acts = Tickets()

    def compose(self) -> ComposeResult:
        yield Static(id="proposals-title")
        yield DataTable(id="proposal-list", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="proposal-pane"):
            yield Static(id="proposal-title")
            yield Static(id="proposal-diff")
        yield Static(id="proposals-message")
        yield KeyFooter()

    def on_mount(self) -> None:
        table = self.query_one("#proposal-list", DataTable)
        for label in ("Proposal", "State", "Why", "Against", "Edits", "Made"):
            table.add_column(label, key=label.lower())
        table.focus()
        self._say("")
        self._reload()

    # --- loading and showing -------------------------------------------------------------------

    def _reload(self) -> None:
        self.query_one("#proposals-title", Static).update("Proposals — reading…")
        self._load(self.loads.issue(), self.state.server_text, self.state.base_version)

    @work(thread=True, group="io", exclusive=True, exit_on_error=False)
    def _load(self, ticket: int, text: str, base_version: int) -> None:
        self.post_message(ProposalsLoaded(ticket, assistant_calls.proposals(self.backend, text, base_version)))

    def on_proposals_loaded(self, message: ProposalsLoaded) -> None:
        if not self.loads.latest(message.ticket):
            return
        found = message.found
        table = self.query_one("#proposal-list", DataTable)
        keep = self._highlighted()
        table.clear()
        self.views = {v.proposal.id: v for v in found.views}
        now = self.clock()
        for view in found.views:
            p = view.proposal
            table.add_row(p.id, view.state, REASONS.get(p.reason, p.reason), str(p.base_version),
                          str(len(p.changes)), ago(now - p.created_at), key=p.id)  # fmt: skip
        count = len(found.views)
        title = f"Proposals — {count} pending · diffs are against the saved version {found.base_version}"
        if found.error is not None:
            title = f"Proposals — could not be read: {found.error}"
        self.query_one("#proposals-title", Static).update(title)
        if keep is not None and keep.proposal.id in self.views:
            table.move_cursor(row=table.get_row_index(keep.proposal.id))
        self._show(self._highlighted())

    def _highlighted(self) -> ProposalView | None:
        table = self.query_one("#proposal-list", DataTable)
        if not self.views or table.cursor_row < 0 or table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return self.views.get(key or "")

    def _show(self, view: ProposalView | None) -> None:
        title = self.query_one("#proposal-title", Static)
        diff = self.query_one("#proposal-diff", Static)
        title.display = view is not None
        if view is None:
            diff.update("No pending proposals: nothing waits for review.")
            return
        p = view.proposal
        lines = [
            f"Proposal {p.id} · made {ago(self.clock() - p.created_at)} against version {p.base_version} "
            f"· clear generation {p.clear_generation}"
        ]
        for change in p.changes:
            under = f" under {change.heading}" if change.heading else ""
            what = f"{change.line} => {change.new_line}" if change.op == "replace" else change.line
            lines.append(f"  {change.op}{under}: {what}")
        title.update("\n".join(lines))
        diff.update(view.diff)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show(self.views.get(event.row_key.value or ""))

    def _say(self, message: str, *, error: bool = False) -> None:
        line = self.query_one("#proposals-message", Static)
        line.update(message)
        line.set_class(error, "-error")
        line.display = bool(message)

    # --- acting -------------------------------------------------------------------------------

    def action_apply(self) -> None:
        view = self._highlighted()
        if view is None or self.busy:
            return
        if view.made_before_clear:
            self._say(f"Not applied: proposal {view.proposal.id} {BEFORE_CLEAR}.", error=True)
            return
        self.busy = True
        self._say(f"Applying proposal {view.proposal.id} as your Save against version {self.state.base_version}…")
        self.post_message(self.Apply(self, view.proposal))

    def on_proposals_screen_applied(self, message: ProposalsScreen.Applied) -> None:
        message.stop()
        self.busy = False
        self._say(self.state.message, error=self.state.message_is_error)
        self._reload()

    def action_drop(self) -> None:
        view = self._highlighted()
        if view is None or self.busy:
            return
        self._confirm_drop(view.proposal.id)

    @work(exclusive=True, group="confirm")
    async def _confirm_drop(self, proposal_id: str) -> None:
        """A dismissed proposal cannot be brought back, so one key asks first."""
        from memframe.tui.dialogs.confirm import ConfirmAction

        sure = await self.app.push_screen_wait(
            ConfirmAction(
                f"Dismiss proposal {proposal_id}?",
                "It leaves the list for good (for every member); memory is not changed. The Assistant can "
                "propose it again in a later turn.",
                "Dismiss it",
            )
        )
        if sure and not self.busy:
            self.busy = True
            self._dismiss(self.acts.issue(), proposal_id)

    @work(thread=True, group="io", exit_on_error=False)
    def _dismiss(self, ticket: int, proposal_id: str) -> None:
        self.post_message(ProposalDismissed(ticket, proposal_id, assistant_calls.dismiss(self.backend, proposal_id)))

    def on_proposal_dismissed(self, message: ProposalDismissed) -> None:
        self.busy = False
        if message.error is not None:
            self._say(f"Not dismissed: {message.error}", error=True)
        else:
            self._say(f"Dismissed proposal {message.proposal_id}; memory was not changed.")
        self._reload()

    def action_reload(self) -> None:
        self._reload()

    def action_close(self) -> None:
        self.dismiss(None)
