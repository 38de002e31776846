"""The main screen: the editor under its status bar, and the host of every flow that writes.

The flows themselves (Save, Clear, Undo, Reload, Quit, Mode, applying a
proposal, catching up) live in `memframe.tui.flows`; this screen is their
`FlowHost`. It runs them one at a time as async workers, so "wait for an
in-flight save before deciding" is the queue itself; it asks the person
through typed dialogs (`push_screen_wait`); and it runs backend calls on
thread workers whose replies come back as messages: the handler applies the
outcome to `DocumentState` first, then wakes the waiting flow. Side screens
never call in here: they post messages, which the app routes to the methods
at the end of this class.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import wait
from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen, ScreenResultType
from textual.timer import Timer
from textual.widgets import TextArea

from memframe.backend.base import Backend
from memframe.tui import flows
from memframe.tui.messages import HeadRead, Loaded, Tickets, WriteFinished
from memframe.tui.state import DRAFT_FILE_KEY, DocumentState, WriteKind, WriteOutcome, WriteRequest
from memframe.tui.widgets.editor import MemoryEditor, placeholder
from memframe.tui.widgets.footer import KeyFooter
from memframe.tui.widgets.status import MessageLine, SizeWarning, StatusBar

# What the first paint does not need (the backend calls, the dialogs, applying a proposal) is imported
# where it is first used: on a worker thread, or in a flow the person started.
if TYPE_CHECKING:
    from concurrent.futures import Future

    from memframe.core.turns import Proposal
    from memframe.tui import calls


#: How long the main screen, when it is made, waits for a first read already under way (`run_frame`)
#: rather than showing an empty editor first: a local read is well within it; a remote one may not be.
FIRST_READ_WAIT = 0.25


class MemoryScreen(Screen[None]):
    """Edit the memory; Save, Clear, Undo (via Changes), Reload, switch mode."""

    #: No -narrow / -wide / -low / -tall classes here: nothing in the .tcss reflows this screen by them,
    #: and setting them on the first resize restyled every widget of the screen before its first paint.
    #: The dialogs and side screens keep the app's breakpoints.
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = []  # type: ignore[misc]
    VERTICAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = []  # type: ignore[misc]

    # The footer shows Save, Changes, Assistant and Proposals (with Help and Quit, so it fits 80 columns);
    # every binding is also in help (F1) and the command palette.
    HELP_NAME = "Memory (the editor)"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Save", tooltip="Upload the draft against the base version", id="memframe.save"),
        Binding("ctrl+t", "preview", "Preview", tooltip="Toggle the rendered Markdown", show=False,
                id="memframe.preview"),
        Binding("ctrl+o", "mode", "Mode", tooltip="Off / Read only / Auto", show=False, id="memframe.mode"),
        Binding("ctrl+g", "changes", "Changes", tooltip="Revisions, diffs and Undo", id="memframe.changes"),
        Binding("ctrl+l", "clear", "Clear", tooltip="Empty the memory and fence older automatic work", show=False,
                id="memframe.clear"),
        Binding("ctrl+r", "reload", "Reload", tooltip="Load the server's current version", show=False,
                id="memframe.reload"),
        Binding("f2", "assistant", "Assistant", tooltip="Talk to the Assistant; see which revision each answer used",
                id="memframe.assistant"),
        Binding("f3", "proposals", "Proposals", tooltip="Review the Assistant's proposed changes",
                id="memframe.proposals"),
        Binding("ctrl+b", "budget", "Budget", tooltip="Bytes per top-level heading, against the recall bound",
                show=False, id="memframe.budget"),
        Binding(DRAFT_FILE_KEY, "draft_file", "Draft to file",
                tooltip="Write the draft to a private file (when a Save fails)", show=False,
                id="memframe.draft_file"),
    ]  # fmt: skip

    def __init__(
        self, backend: Backend, state: DocumentState, *, clock: Callable[[], float], syntax: bool | None = None,
        cursor_blink: bool = True, poll_seconds: float = 0.0, first_load: Future[calls.LoadOutcome] | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.backend = backend
        #: The first read of the memory, when whoever made the screen started it already (`run_frame`).
        self._first_load = first_load
        #: How often the head poll looks for changes made elsewhere (0: never; `flows.notice`).
        self.poll_seconds = poll_seconds
        self.poll_timer: Timer | None = None
        self._polling = False
        self.state = state
        self.clock = clock
        self._editor_options = {"syntax": syntax, "cursor_blink": cursor_blink}
        self.tickets = Tickets()
        self.busy: str | None = None
        self._flow_lock: asyncio.Lock | None = None

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        yield SizeWarning(id="size-warning")
        yield MemoryEditor(id="editor", text=self._first_text(), **self._editor_options)  # type: ignore[arg-type]
        yield MessageLine(id="message")
        yield KeyFooter()

    def _first_text(self) -> str:
        """The memory's text when the first read is done: the editor is made holding it, rather than
        made empty and loaded (each costs a parse of the text). The load applies it as before.

        A read still under way is waited for, up to FIRST_READ_WAIT: the thread that reads shares
        the interpreter lock with Textual's start, and each of its SQLite and decrypt calls gave the
        lock away and waited a switch interval for it back, so a short read took several times as long and the
        first screen was an empty editor, painted again once the text arrived. Waited for here, the
        read has the interpreter to itself and the first screen is the memory. A read slower than
        that (a distant server) is shown when it arrives, as before, under "Loading the memory…".
        """
        first = self._first_load
        if first is None:
            return ""
        wait([first], timeout=FIRST_READ_WAIT)
        if not first.done() or first.exception() is not None:
            return ""
        doc = first.result().doc
        return "" if doc is None else doc.text

    @property
    def editor(self) -> MemoryEditor:
        return self.query_one(MemoryEditor)

    def on_mount(self) -> None:
        self._flow_lock = asyncio.Lock()
        self.state.say("Loading the memory…")
        self.refresh_view()
        self.run_flow("loading", self._first_load_flow)
        if self.poll_seconds > 0:  # a screen's timers stop with it, so the poll ends when the frame does
            self.poll_timer = self.set_interval(self.poll_seconds, self.poll_head, name="head poll")

    def refresh_view(self) -> None:
        self.query_one(StatusBar).show(self.state)
        self.query_one(SizeWarning).show(self.state)
        self.query_one(MessageLine).show(self.state)

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        self.state.edit(event.text_area.text)
        self.refresh_view()

    def sync_draft(self) -> None:
        """Read the draft from the editor: a keypress may not have reached `on_text_area_changed` yet."""
        if self.state.loaded:
            self.state.edit(self.editor.text)

    def say(self, message: str, *, error: bool = False) -> None:
        self.state.say(message, error=error)
        self.refresh_view()

    # --- flows, one at a time -----------------------------------------------------------------

    def run_flow(self, name: str, flow: Callable[[], Awaitable[object]]) -> None:
        self.run_worker(self._one_at_a_time(name, flow), group="flow", exit_on_error=False)

    async def _one_at_a_time(self, name: str, flow: Callable[[], Awaitable[object]]) -> None:
        assert self._flow_lock is not None
        if self._flow_lock.locked():
            self.notify(f"Waiting for {self.busy} to finish first…", timeout=3)
        async with self._flow_lock:
            self.busy = name
            try:
                await flow()
            except Exception as exc:  # a bug must not cost the person their draft
                self.say(f"Something went wrong while {name}: {exc}. Your draft is kept.", error=True)
            finally:
                self.busy = None
                self.refresh_view()

    # --- backend calls: thread workers, replies as messages -------------------------------------

    async def read_memory(self, *, keep_edits: bool = False) -> calls.LoadOutcome:
        ticket = self.tickets.issue()
        reply = self.tickets.wait(ticket)
        started, self._first_load = self._first_load, None  # only ever the first read
        if started is not None and started.done() and started.exception() is None:
            self.on_loaded(Loaded(ticket, started.result(), keep_edits=keep_edits))  # read already: no thread hop
        else:
            self._load_worker(ticket, keep_edits, started)
        return await reply  # type: ignore[no-any-return]

    @work(thread=True, group="io", exit_on_error=False)
    def _load_worker(
        self, ticket: int, keep_edits: bool = False, started: Future[calls.LoadOutcome] | None = None
    ) -> None:
        from memframe.tui import calls

        outcome = started.result() if started is not None else calls.load(self.backend)
        self.post_message(Loaded(ticket, outcome, keep_edits=keep_edits))

    def on_loaded(self, message: Loaded) -> None:
        outcome = message.outcome
        if message.keep_edits and outcome.doc is not None:
            self.sync_draft()
            if self.state.dirty:  # typed while the load was in flight: the draft wins, the newer version waits
                self.state.newer = max(outcome.doc.version, self.state.newer or 0)
                outcome = replace(outcome, doc=None)
        if outcome.doc is not None:
            self.state.adopt(outcome.doc)
            self.editor.area.placeholder = placeholder(self.state.key("save"))
            self.editor.load(outcome.doc.text)
            self.editor.set_editable(True)
            self.editor.focus_text()
        if outcome.policy is not None:
            self.state.policy = outcome.policy
        self.refresh_view()
        self.tickets.resolve(message.ticket, outcome)

    async def write(self, request: WriteRequest) -> WriteOutcome:
        self.state.begin(request)
        if request.kind is not WriteKind.SAVE:
            self.editor.set_editable(False)  # a Clear, Undo or Apply replaces the text; no typing meanwhile
        self.refresh_view()
        ticket = self.tickets.issue()
        reply = self.tickets.wait(ticket)
        self._write_worker(ticket, request)
        return await reply  # type: ignore[no-any-return]

    @work(thread=True, group="io", exit_on_error=False)
    def _write_worker(self, ticket: int, request: WriteRequest) -> None:
        from memframe.tui import calls

        self.post_message(WriteFinished(ticket, calls.write(self.backend, request)))

    def on_write_finished(self, message: WriteFinished) -> None:
        outcome = message.outcome
        self.sync_draft()
        self.state.finish(outcome)
        if outcome.request.kind is not WriteKind.SAVE:
            self.editor.load(self.state.draft)
            self.editor.set_editable(True)
        self.refresh_view()
        self.tickets.resolve(message.ticket, outcome)

    # --- the head poll: changes made elsewhere -------------------------------------------------

    def poll_head(self) -> None:
        """One look at the server's head revision and policy (the timer's tick; tests call it).
        Skipped while a flow or a write is underway: what they change is theirs to show."""
        if self._polling or self.busy is not None or self.state.in_flight or not self.state.loaded:
            return
        self._polling = True
        self._head_worker()

    @work(thread=True, group="io-poll", exit_on_error=False)
    def _head_worker(self) -> None:
        from memframe.tui import calls

        self.post_message(HeadRead(0, calls.head(self.backend)))

    def on_head_read(self, message: HeadRead) -> None:
        self._polling = False
        if self.busy is not None or self.state.in_flight:
            return  # a flow began meanwhile; the next tick looks again
        head = message.outcome.head
        if flows.notice(self, head, message.outcome.error) and head is not None:
            version = head.version
            self.run_flow("taking the newer version", lambda: flows.follow(self, version))
        self.refresh_view()

    # --- the flows ------------------------------------------------------------------------------

    async def _first_load_flow(self) -> None:
        """The first load waits for the first paint, so reading and decrypting (and importing
        cryptography) never delay it; it is queued first, so no flow runs before it. A read that
        `run_frame` began before the app ran and that has finished already delays nothing: its
        text goes into the first paint."""
        if self._first_load is None or not self._first_load.done():
            await self.wait_for_refresh()
        await flows.load(self)

    # --- what the flows ask of their host (flows.FlowHost) ---------------------------------------

    def show(self, text: str) -> None:
        self.editor.load(text)
        self.refresh_view()

    def set_placeholder(self, text: str) -> None:
        self.editor.area.placeholder = text

    async def ask(self, dialog: Screen[ScreenResultType]) -> ScreenResultType:
        return await self.app.push_screen_wait(dialog)  # type: ignore[no-any-return]

    def quit(self, farewell: str | None = None) -> None:
        self.app.exit(0, message=farewell)

    # --- actions: keys, footer and command palette ---------------------------------------------

    def action_save(self) -> None:
        self.run_flow("saving", lambda: flows.save(self))

    def action_reload(self) -> None:
        self.run_flow("reloading", lambda: flows.reload(self))

    def action_clear(self) -> None:
        self.run_flow("clearing", lambda: flows.clear(self))

    def action_mode(self) -> None:
        self.run_flow("changing the mode", lambda: flows.mode(self))

    def action_draft_file(self) -> None:
        async def flow() -> None:
            flows.draft_to_file(self)

        self.run_flow("writing the draft to a file", flow)

    def action_budget(self) -> None:
        from memframe.tui.screens.budget import BudgetScreen

        self.sync_draft()
        self.app.push_screen(BudgetScreen(self.state.draft))

    def action_preview(self) -> None:
        self.editor.preview = not self.editor.preview

    def action_changes(self) -> None:
        self.open_changes()

    def action_assistant(self) -> None:
        if not self.app.is_screen_installed("assistant"):
            # Installed, so the conversation (and a send in flight) survives closing the pane.
            from memframe.tui.screens.assistant import AssistantScreen

            self.app.install_screen(AssistantScreen(self.backend, self.state), "assistant")
        self.app.push_screen("assistant")

    def action_proposals(self) -> None:
        from memframe.tui.screens.proposals import ProposalsScreen

        self.app.push_screen(ProposalsScreen(self.backend, self.state, clock=self.clock))

    # --- what the side screens ask for (their messages, routed here by the app) ----------------

    def apply_proposal(self, proposal: Proposal, done: Callable[[], None]) -> None:
        """Apply `proposal` in the flow queue (after any Save in progress); `done` runs afterwards, always."""

        async def flow() -> None:
            try:
                await flows.apply(self, proposal)
            except Exception as exc:  # said here, so `done` can show it
                self.say(f"Something went wrong while applying proposal {proposal.id}: {exc}.", error=True)
            finally:
                done()

        self.run_flow("applying a proposal", flow)

    def catch_up(self, version: int) -> None:
        """The Assistant wrote `version` of the memory; load it when the editor holds no draft."""
        self.run_flow("loading the Assistant's change", lambda: flows.catch_up(self, version))

    def open_changes(self, at: int | None = None) -> None:
        """Changes, optionally at revision `at`; an Undo chosen there runs here, like any write."""
        self.sync_draft()

        from memframe.tui.revert_flow import RevertRequest, revert
        from memframe.tui.screens.changes import ChangesScreen

        def restore(chosen: int | RevertRequest | None) -> None:
            if isinstance(chosen, RevertRequest):
                self.run_flow("reverting", lambda: revert(self, chosen.version))
            elif chosen is not None:
                self.run_flow("restoring", lambda: flows.undo(self, chosen))

        self.app.push_screen(ChangesScreen(self.backend, self.state, clock=self.clock, at=at), restore)

    def request_leave(self) -> None:
        """Quit, as the person asked: after any flow in progress, and only once the draft is settled."""
        if self.state.rotating:  # a rotation's worker must finish: its new key becomes the key only then
            self.notify("A key rotation is running: quit once its receipt is shown.", severity="warning")
            return
        self.run_flow("quitting", lambda: flows.leave(self))
