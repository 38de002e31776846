"""The main screen: the editor under its status bar, and every flow that writes.

Each flow (Save, Clear, Undo, Reload, Quit, Mode; applying a proposal, in
apply.py) is an async worker that reads top to bottom: it asks the person
through typed dialogs (`push_screen_wait`) and awaits backend replies. Backend calls themselves
run on thread workers and come back as messages; the handler applies the
outcome to `DocumentState` first, then wakes the waiting flow. Flows run one
at a time, so "wait for an in-flight save before deciding" is the queue itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, TextArea

from memframe.backend.base import Backend
from memframe.core.types import MemoryDocument, utf8_size
from memframe.tui.editor import PLACEHOLDER, MemoryEditor
from memframe.tui.messages import Loaded, Tickets, WriteFinished
from memframe.tui.state import DocumentState, WriteKind, WriteOutcome, WriteRequest
from memframe.tui.status import MessageLine, SizeWarning, StatusBar

# What the first paint does not need (the backend calls, the dialogs, applying a proposal) is imported
# where it is first used: on a worker thread, or in a flow the person started.
if TYPE_CHECKING:
    from memframe.core.turns import Proposal
    from memframe.tui import calls


class MemoryScreen(Screen[None]):
    """Edit the memory; Save, Clear, Undo (via Changes), Reload, switch mode."""

    class Started(Message):
        """The first load has been shown (or has failed and said so): the frame has started."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "save", "Save", tooltip="Upload the draft against the base version", id="memframe.save"),
        Binding("ctrl+t", "preview", "Preview", tooltip="Toggle the rendered Markdown", id="memframe.preview"),
        Binding("ctrl+o", "mode", "Mode", tooltip="Off / Read only / Auto", id="memframe.mode"),
        Binding("ctrl+g", "changes", "Changes", tooltip="Revisions, diffs and Undo", id="memframe.changes"),
        Binding("ctrl+l", "clear", "Clear", tooltip="Empty the memory and fence older automatic work",
                id="memframe.clear"),
        # Not in the footer (ctrl+r and the palette still work), so the footer fits 100 columns.
        Binding("ctrl+r", "reload", "Reload", tooltip="Load the server's current version", show=False,
                id="memframe.reload"),
        Binding("f2", "assistant", "Assistant", tooltip="Talk to the Assistant; see which revision each answer used",
                id="memframe.assistant"),
        Binding("f3", "proposals", "Proposals", tooltip="Review the Assistant's proposed changes",
                id="memframe.proposals"),
    ]  # fmt: skip

    def __init__(
        self, backend: Backend, state: DocumentState, *, clock: Callable[[], float], syntax: bool | None = None,
        cursor_blink: bool = True,
    ) -> None:  # fmt: skip
        super().__init__()
        self.backend = backend
        self.state = state
        self.clock = clock
        self._editor_options = {"syntax": syntax, "cursor_blink": cursor_blink}
        self.tickets = Tickets()
        self.busy: str | None = None
        self._flow_lock: asyncio.Lock | None = None

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        yield SizeWarning(id="size-warning")
        yield MemoryEditor(id="editor", **self._editor_options)  # type: ignore[arg-type]
        yield MessageLine(id="message")
        yield Footer()

    @property
    def editor(self) -> MemoryEditor:
        return self.query_one(MemoryEditor)

    def on_mount(self) -> None:
        self._flow_lock = asyncio.Lock()
        self.state.say("Loading the memory…")
        self.refresh_view()
        self.run_flow("loading", self._first_load_flow)

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

    async def read_memory(self) -> calls.LoadOutcome:
        ticket = self.tickets.issue()
        reply = self.tickets.wait(ticket)
        self._load_worker(ticket)
        return await reply  # type: ignore[no-any-return]

    @work(thread=True, group="io", exit_on_error=False)
    def _load_worker(self, ticket: int) -> None:
        from memframe.tui import calls

        self.post_message(Loaded(ticket, calls.load(self.backend)))

    def on_loaded(self, message: Loaded) -> None:
        outcome = message.outcome
        if outcome.doc is not None:
            self.state.adopt(outcome.doc)
            self.editor.area.placeholder = PLACEHOLDER
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

    # --- the flows ------------------------------------------------------------------------------

    async def _first_load_flow(self) -> None:
        """The first load waits for the first paint, so reading and decrypting (and importing
        cryptography) never delay it; it is queued first, so no flow runs before it."""
        await self.wait_for_refresh()
        await self._load_flow()
        self.post_message(self.Started())

    async def _load_flow(self) -> None:
        outcome = await self.read_memory()
        if outcome.error is None:
            self.say("" if self.state.base_version else "A new, empty memory. Write, then ctrl+s to save.")
        elif outcome.doc is None and self.state.loaded:
            self.say(f"Could not reload: {outcome.error} Still showing version {self.state.base_version}.", error=True)
        elif outcome.doc is None:
            self.editor.area.placeholder = (
                "The memory is not loaded, so there is nothing to edit yet: ctrl+r tries again."
            )
            self.say(f"Could not load the memory: {outcome.error} Press ctrl+r to try again.", error=True)
        else:
            self.say(f"Loaded, but the mode could not be read: {outcome.error}", error=True)

    async def _save_flow(self) -> bool:
        """Save the draft; True when the draft's fate is settled (saved, or discarded in the conflict view)."""
        self.sync_draft()
        state = self.state
        if not state.loaded:
            self.say("The memory is not loaded, so there is no version to save against: press ctrl+r.", error=True)
            return False
        if not state.dirty:
            newer = "" if state.conflict is None else f" Version {state.conflict.version} is newer: ctrl+r loads it."
            self.say(f"No unsaved changes; version {state.base_version} is what the server holds.{newer}")
            return True
        outcome = await self.write(WriteRequest.save(state.draft, state.base_version))
        while outcome.conflict and outcome.server is not None:
            from memframe.tui.dialogs import ConflictScreen

            choice = await self.app.push_screen_wait(
                ConflictScreen(outcome.server, state.draft, state.base_version, now=self.clock())
            )
            if choice == "edit":
                self.say(f"Keep editing. Version {outcome.server.version} is newer; ctrl+s shows the conflict again.")
                return False
            if choice == "discard":
                self.take(outcome.server, f"Discarded your draft; showing version {outcome.server.version}.")
                return True
            server = outcome.server
            outcome = await self.write(WriteRequest.save(state.draft, server.version, revive=server.deleted))
        return outcome.ok

    def take(self, doc: MemoryDocument, message: str, *, error: bool = False) -> None:
        self.state.adopt(doc)
        self.editor.load(doc.text)
        self.say(message, error=error)

    async def resolve_draft(self, purpose: str) -> bool:
        """Save / Discard / Cancel for an unsaved draft; True when it is safe to go on."""
        self.sync_draft()
        if not self.state.dirty:
            return True
        from memframe.tui.dialogs import SaveDiscardCancel

        choice = await self.app.push_screen_wait(SaveDiscardCancel(purpose, self.state.base_version, self.state.size))
        if choice == "discard":
            self.state.discard()
            self.editor.load(self.state.draft)
            self.refresh_view()
            return True
        if choice == "save":
            return await self._save_flow()
        self.say("Cancelled; your draft is still here.")
        return False

    async def _reload_flow(self) -> None:
        if await self.resolve_draft("before reloading"):
            outcome = await self.read_memory()
            if outcome.doc is not None:
                self.say(f"Reloaded version {outcome.doc.version} from the server.")
            else:
                self.say(f"Could not reload: {outcome.error} Still showing version {self.state.base_version}.",
                         error=True)  # fmt: skip

    async def _clear_flow(self) -> None:
        if not self.state.loaded:
            self.say("The memory is not loaded, so there is no version to clear: press ctrl+r.", error=True)
            return
        if not await self.resolve_draft("before clearing"):
            return
        from memframe.tui.dialogs import ClearConflict, ConfirmClear

        confirm = ConfirmClear(self.state.workspace_id, self.state.base_version, utf8_size(self.state.server_text))
        if not await self.app.push_screen_wait(confirm):
            self.say("Clear cancelled; nothing was written.")
            return
        outcome = await self.write(WriteRequest.clear(self.state.base_version))
        while outcome.conflict and outcome.server is not None:
            if not await self.app.push_screen_wait(ClearConflict(outcome.server, outcome.policy, now=self.clock())):
                self.say(f"Kept version {outcome.server.version}; nothing was cleared.")
                return
            outcome = await self.write(WriteRequest.clear(outcome.server.version))

    async def _undo_flow(self, revision: int) -> None:
        if not await self.resolve_draft(f"before restoring revision {revision}"):
            return
        if revision == self.state.base_version:
            self.say(f"Revision {revision} is already the current version; nothing to restore.")
            return
        outcome = await self.write(WriteRequest.undo(revision, self.state.base_version))
        while outcome.conflict and outcome.server is not None:
            from memframe.tui.dialogs import ConflictScreen

            server = outcome.server
            screen = ConflictScreen(server, outcome.text, self.state.base_version, now=self.clock(), revision=revision)
            choice = await self.app.push_screen_wait(screen)
            if choice == "discard":
                self.take(server, f"Kept version {server.version}; revision {revision} was not restored.")
                return
            if choice == "edit":
                self.take(server, f"Revision {revision}'s text is your draft on top of version {server.version}.")
                self.editor.load(outcome.text)
                return
            outcome = await self.write(WriteRequest.undo(revision, server.version))

    async def _mode_flow(self) -> None:
        if self.state.policy is None:
            self.say("The mode is not known until the memory loads: press ctrl+r.", error=True)
            return
        from memframe.tui.mode import ModeSwitcher  # screens opened on demand load on demand

        policy = await self.app.push_screen_wait(ModeSwitcher(self.backend, self.state.policy))
        if policy is not None:
            self.state.policy = policy
            self.say(f"Mode: {policy.mode.label} (policy revision {policy.revision}). {policy.mode.explanation}")

    async def _leave_flow(self) -> None:
        if await self.resolve_draft("before quitting"):
            self.app.exit(0)

    # --- actions: keys, footer and command palette ---------------------------------------------

    def action_save(self) -> None:
        self.run_flow("saving", self._save_flow)

    def action_reload(self) -> None:
        self.run_flow("reloading", self._reload_flow)

    def action_clear(self) -> None:
        self.run_flow("clearing", self._clear_flow)

    def action_mode(self) -> None:
        self.run_flow("changing the mode", self._mode_flow)

    def action_preview(self) -> None:
        self.editor.preview = not self.editor.preview

    def action_changes(self) -> None:
        self.open_changes()

    def action_assistant(self) -> None:
        if not self.app.is_screen_installed("assistant"):
            # Installed, so the conversation (and a send in flight) survives closing the pane.
            from memframe.tui.assistant import AssistantScreen

            self.app.install_screen(AssistantScreen(self.backend, self.state, self), "assistant")
        self.app.push_screen("assistant")

    def action_proposals(self) -> None:
        from memframe.tui.proposals import ProposalsScreen

        self.app.push_screen(ProposalsScreen(self.backend, self.state, self))

    def apply_proposal(self, proposal: Proposal, done: Callable[[], None]) -> None:
        """Apply `proposal` in the flow queue (after any Save in progress); `done` runs afterwards, always."""
        from memframe.tui.apply import apply_flow

        async def flow() -> None:
            try:
                await apply_flow(self, proposal)
            except Exception as exc:  # said here, so `done` can show it
                self.say(f"Something went wrong while applying proposal {proposal.id}: {exc}.", error=True)
            finally:
                done()

        self.run_flow("applying a proposal", flow)

    def catch_up(self, version: int) -> None:
        """The Assistant wrote `version` of the memory; load it when the editor holds no draft."""
        from memframe.tui.apply import catch_up_flow

        self.run_flow("loading the Assistant's change", lambda: catch_up_flow(self, version))

    def open_changes(self, at: int | None = None) -> None:
        """Changes, optionally at revision `at`; an Undo chosen there runs here, like any write."""
        self.sync_draft()

        def restore(revision: int | None) -> None:
            if revision is not None:
                self.run_flow("restoring", lambda: self._undo_flow(revision))

        from memframe.tui.changes import ChangesScreen

        self.app.push_screen(ChangesScreen(self.backend, self.state, clock=self.clock, at=at), restore)

    def request_leave(self) -> None:
        """Quit, as the person asked: after any flow in progress, and only once the draft is settled."""
        self.run_flow("quitting", self._leave_flow)
