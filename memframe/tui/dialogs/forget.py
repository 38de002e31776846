"""Forget history before a revision, or rotate the workspace key: asked first, run on a worker, a receipt after.

Opened from Changes (`f` on a revision, `k` for the key), it names exactly what will go before
anything is done: the versions with their count, the stored conversations behind a switch with
theirs, and the honest boundary. Confirmed, the rotation (`memframe.tui.forget_calls`, the CLI's path)
runs on a thread worker: the frame stays responsive, a second confirm is refused and nothing closes
the dialog until the outcome is in. Then it shows the receipt the CLI prints and keeps, or why
nothing changed (with what goes read again, so a retry is explicit and named afresh).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Input, Static, Switch

from memframe.tui.keynames import key_of
from memframe.tui.messages import ForgetFinished, ForgetPreviewed, Tickets
from memframe.tui.modal import Modal
from memframe.tui.widgets.footer import KeyFooter
from memframe.tui.widgets.revision_search import RevisionSearch

if TYPE_CHECKING:
    from pathlib import Path

    from textual.app import App

    from memframe.backend.base import Backend
    from memframe.tui.forget_calls import Preview
    from memframe.tui.state import DocumentState
    from memframe.tui.widgets.revision_table import RevisionTable


class ForgetDialog(Modal[bool]):
    """Dismisses True once a rotation was tried (Changes reads its history again), False when cancelled."""

    HELP_NAME = "Forget / rotate the key"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "go", "Yes, go ahead", tooltip="Rotate now, as the dialog names it", id="memframe.forget.yes"),
        Binding("escape", "close", "Cancel", tooltip="Nothing is done (after the receipt: back to Changes)",
                id="memframe.forget.cancel"),
    ]  # fmt: skip

    def __init__(
        self, backend: Backend, state: DocumentState, forget_before: int | None, *, clock: Callable[[], float]
    ) -> None:
        super().__init__(classes="dialog")
        self.backend = backend
        self.state = state
        self.forget_before = forget_before
        self.clock = clock
        #: "reading" what goes, "asking", "running" the rotation, "done" (the receipt is shown).
        self.phase = "reading"
        self.tried = False
        self.preview: Preview | None = None

    @property
    def do(self) -> str:
        return "Rotate the key" if self.forget_before is None else "Forget history"

    def compose(self) -> ComposeResult:
        if self.forget_before is None:
            title = f"Rotate the key of workspace {self.state.workspace_id}?"
        else:
            title = f"Forget the history before revision {self.forget_before}?"
        with Vertical(classes="dialog-box"):
            yield Static(title, classes="dialog-title", id="forget-title")
            with VerticalScroll(classes="dialog-body"):
                yield Static(id="forget-note", markup=False)
                yield Static("Reading what would go…", id="forget-what", markup=False)
                with Horizontal(id="forget-switch"):
                    yield Switch(False, animate=False, id="conversations")
                    yield Static(id="conversations-label")
                yield Static(id="forget-boundary", markup=False)
            yield Input(password=True, placeholder="The key file's passphrase (not shown)", id="passphrase")
            with Horizontal(classes="dialog-buttons"):
                yield Button(self.do, id="go", variant="error", disabled=True)
                yield Button("Cancel", id="cancel")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._note("")
        self.query_one("#forget-switch").display = False
        self.query_one("#passphrase").display = False
        self.query_one("#cancel", Button).focus()
        self._read()

    # --- what goes ---------------------------------------------------------------------------------

    def _read(self) -> None:
        self.phase = "reading"
        self.query_one("#go", Button).disabled = True
        self._preview()

    @work(thread=True, group="io-forget", exit_on_error=False)
    def _preview(self) -> None:
        from memframe.tui import forget_calls

        self.post_message(ForgetPreviewed(0, forget_calls.preview(self.backend, self.forget_before)))

    def on_forget_previewed(self, message: ForgetPreviewed) -> None:
        self.preview = found = message.preview
        if found.landed is not None:
            self._landed(found.landed)
            return
        if found.goes is None:
            title = str(self.query_one("#forget-title", Static).content)
            self._done(title, f"Nothing can be done: {found.error}", keep_note=True)
            return
        self.phase = "asking"
        self.query_one("#forget-switch").display = self.forget_before is not None
        self.query_one("#passphrase").display = found.needs_passphrase
        self.query_one("#go", Button).disabled = False
        self._describe()

    def _describe(self) -> None:
        from memframe.tui.forget_calls import boundary, described

        if self.preview is None or (goes := self.preview.goes) is None:
            return
        conversations = self.query_one("#conversations", Switch).value
        self._say(described(goes, conversations=conversations))
        self.query_one("#conversations-label", Static).update("Destroy the stored conversations too")
        self.query_one("#forget-boundary", Static).update(boundary())

    def on_switch_changed(self, event: Switch.Changed) -> None:
        event.stop()
        self._describe()

    def _say(self, text: str) -> None:
        self.query_one("#forget-what", Static).update(text)

    def _note(self, text: str) -> None:
        """A line above what goes: progress, or why the last try changed nothing."""
        note = self.query_one("#forget-note", Static)
        note.update(text)
        note.display = bool(text)

    # --- go, and the outcome ------------------------------------------------------------------------

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()  # enter in the passphrase goes to the button, never straight to a rotation
        self.query_one("#go", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "go":
            self.action_go()
        else:
            self.action_close()

    def action_go(self) -> None:
        if self.phase == "running":
            self.notify("The rotation is running: its receipt shows here when it is done.", timeout=3)
            return
        if self.phase != "asking":
            return
        box = self.query_one("#passphrase", Input)
        if box.display and not box.value:
            self._note("Type the key file's passphrase first: the new key is wrapped with it.")
            box.focus()
            return
        self.phase, self.tried = "running", True
        self.state.rotating = True
        for selector in ("#go", "#conversations", "#passphrase"):
            self.query_one(selector).disabled = True
        conversations = self.query_one("#conversations", Switch).value
        self._note("Re-sealing on this machine and swapping it in… (the frame stays usable; this cannot be "
                   "stopped halfway)")  # fmt: skip
        passphrase, box.value = box.value, ""
        self._rotate(conversations, passphrase, self.clock())

    @work(thread=True, group="io-forget", exit_on_error=False)
    def _rotate(self, conversations: bool, passphrase: str, now: float) -> None:
        from memframe.tui import forget_calls

        outcome = forget_calls.rotate(
            self.backend, self.forget_before, conversations=conversations, passphrase=passphrase, now=now
        )
        self.post_message(ForgetFinished(0, outcome))

    def on_forget_finished(self, message: ForgetFinished) -> None:
        self.state.rotating = False
        outcome = message.outcome
        for selector in ("#go", "#conversations", "#passphrase"):
            self.query_one(selector).disabled = False
        if outcome.done is None and outcome.landed is None:  # refused: nothing changed; what goes, read again
            from memframe.core.errors import Unavailable

            error = str(outcome.error)
            note = error if "nothing was changed" in error.lower() else f"Nothing was changed: {error}"
            if isinstance(outcome.error, Unavailable):  # it may have landed: the pending key is kept
                note = (f"{error} If the server took the rotation before the connection failed, its new "
                        "key is kept beside the key file and is found on reading again; if not, nothing was "
                        "changed.")  # fmt: skip
            self._note(note)
            self._read()
            return
        if outcome.done is not None:
            self._done(f"Done — the receipt, kept at {outcome.done.kept_at}", outcome.done.receipt)
        else:
            self._landed(outcome.landed)

    def _landed(self, key_file: Path | None) -> None:
        self.tried = False  # this frame's key is the old one: Changes would read nothing with it
        self._done("An earlier rotation had landed", f"A rotation cut short earlier had reached the server; "
                   f"{key_file} now holds its key. Quit and open the frame again to use it; nothing else was "
                   "changed.")  # fmt: skip

    def _done(self, title: str, text: str, *, keep_note: bool = False) -> None:
        """The end: the receipt (or why nothing can be done) and one Close button; `keep_note`: the
        note says why the last try changed nothing, and stays."""
        self.phase = "done"
        if not keep_note:
            self._note("")
        for selector in ("#forget-switch", "#forget-boundary", "#passphrase", "#go"):
            self.query_one(selector).display = False
        close = self.query_one("#cancel", Button)
        close.label = "Close"
        close.focus()
        self.refresh_bindings()
        self.query_one("#forget-title", Static).update(title)
        self._say(text)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Once the receipt is shown there is nothing left to go ahead with: the footer drops `y`."""
        return not (action == "go" and self.phase == "done")

    def action_close(self) -> None:
        if self.phase == "running":
            self.notify(f"The rotation cannot be stopped halfway; {key_of(self.app, 'forget.cancel')} closes "
                        "this once its receipt is shown.", timeout=3)  # fmt: skip
            return
        self.dismiss(self.tried)


class ForgetKeys:
    """Changes' `f` (forget the history before the highlighted revision) and `k` (rotate the key).

    Refused while the editor holds a draft that is not saved (or a Save is in flight): a rotation
    re-seals what the server holds, so the draft is settled first."""

    if TYPE_CHECKING:
        app: App[Any]
        backend: Backend
        state: DocumentState
        clock: Callable[[], float]

        pages: Tickets
        search: RevisionSearch

        @property
        def table(self) -> RevisionTable: ...

        def _fresh(self) -> None: ...

        def cancel_search(self) -> None: ...

        def on_mount(self) -> None: ...

    def action_forget(self) -> None:
        if (version := self.table.highlighted()) is not None:
            self._ask_to_rotate(version)

    def action_rotate_key(self) -> None:
        self._ask_to_rotate(None)

    def _ask_to_rotate(self, forget_before: int | None) -> None:
        if self.state.dirty or self.state.in_flight:
            what = "is being saved" if self.state.in_flight else "is not saved"
            back = key_of(self.app, "changes.back")
            self.app.notify(f"Your draft in the editor {what}: save or discard it first ({back} goes back to it). "
                        "Nothing was forgotten.", severity="warning", timeout=6)  # fmt: skip
            return
        dialog = ForgetDialog(self.backend, self.state, forget_before, clock=self.clock)
        self.app.push_screen(dialog, self._rotated)

    def _rotated(self, tried: bool | None) -> None:
        """After a rotation was tried, Changes reads its history afresh from the newest revision."""
        if tried:
            self.pages.issue()  # a page still on its way is dropped
            self._fresh()
            if self.search.running:
                self.cancel_search()
            self.search = RevisionSearch()  # its matches were versions of the history before
            self.table.clear()
            self.on_mount()
