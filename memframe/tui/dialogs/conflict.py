"""The conflict view: the server's newer text beside yours, the diff below, and an explicit choice.

Shown when a Save, an Undo or a proposal's Apply lost the race. Nothing was
written; nothing is retried for you. "Keep editing" leaves the draft and its
old base alone (a later Save conflicts again rather than overwrite silently);
"over" writes against the newer version only because the person said so.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Static

from memframe.core.types import MemoryDocument
from memframe.tui.modal import Modal
from memframe.tui.text import diff_text, human_size, when, who
from memframe.tui.widgets.footer import KeyFooter

ConflictChoice = Literal["edit", "overwrite", "discard"]
#: Which write lost the race: a Save, an Undo (restoring a revision) or applying a proposal.
Variant = Literal["save", "undo", "apply"]


def _keys(variant: Variant, edit: str, overwrite: str, discard: str, discard_tip: str) -> list[BindingType]:
    """The three choices' keys, worded for one variant; `check_action` shows only the dialog's own."""
    return [
        Binding("e", f"choose('edit', '{variant}')", edit, id="memframe.conflict.edit"),
        Binding("o", f"choose('overwrite', '{variant}')", overwrite, id="memframe.conflict.overwrite",
                tooltip="Write over the newer version, because you chose to"),
        Binding("d", f"choose('discard', '{variant}')", discard, tooltip=discard_tip, id="memframe.conflict.discard"),
    ]  # fmt: skip


class ConflictScreen(Modal[ConflictChoice]):
    """Dismisses with "edit" (keep editing), "overwrite" (write over the newer version) or "discard"."""

    HELP_NAME = "Conflict"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "choose('back')", "Back, writing nothing", show=False, id="memframe.conflict.back",
                tooltip="Keep editing after a Save; keep the newer version after an Undo or Apply"),
        *_keys("save", "Keep editing", "Save over newer", "Discard my draft",
               "Take the newer version; asks first, since the draft is lost"),
        *_keys("undo", "Edit its text", "Restore over newer", "Keep newer",
               "Keep the newer version; nothing of yours is written"),
        *_keys("apply", "Edit the result", "Apply to newer", "Keep newer",
               "Keep the newer version; nothing of yours is written"),
    ]  # fmt: skip

    def __init__(
        self, server: MemoryDocument, mine: str, base_version: int, *, now: float, revision: int | None = None,
        proposal: str | None = None,
    ) -> None:  # fmt: skip
        super().__init__(classes="dialog")
        self.server = server
        self.mine = mine
        self.base_version = base_version
        self.now = now
        self.revision = revision  # set when an Undo of this revision lost the race
        self.proposal = proposal  # set when applying this proposal lost the race; `mine` is it applied to `server`
        self.variant: Variant = "apply" if proposal is not None else "save" if revision is None else "undo"

    def compose(self) -> ComposeResult:
        newer = self.server.version
        if self.proposal is not None:
            mine_label = f"Version {newer} with proposal {self.proposal} applied"
            overwrite = f"Apply it to version {newer}"
            edit, discard = "Edit the result", f"Keep version {newer}"
            lead = f"Version {newer} was written first, so the proposal was not applied. Nothing was written."
        elif self.revision is None:
            mine_label = f"Your draft (based on version {self.base_version})"
            overwrite = f"Save my draft over version {newer}"
            edit, discard = "Keep editing", f"Discard my draft, take version {newer}"
            lead = f"Someone else saved version {newer} first. Nothing was written; your draft is kept."
            if self.server.deleted:
                lead = f"The document was deleted (version {newer}). Nothing was written; your draft is kept."
                overwrite = "Save my draft, restoring the document"
        else:
            mine_label = f"Revision {self.revision} (what Undo restores)"
            overwrite = f"Restore revision {self.revision} over version {newer}"
            edit, discard = f"Edit revision {self.revision}'s text", f"Keep version {newer}"
            lead = f"Version {newer} was written first, so revision {self.revision} was not restored."
        by = ""
        if self.server.info is not None:
            by = f" — {who(self.server.info)}, {when(self.server.info.created_at, self.now)}"
        deleted = " (the document was deleted; writing restores it)" if self.server.deleted else ""
        with Vertical(classes="dialog-box wide"):
            yield Static("Conflict: the memory changed on the server", classes="dialog-title")
            with Vertical(id="conflict-body"):  # scrolls as one column when the terminal is small (Modal's CSS)
                yield Static(lead)
                with Horizontal(id="conflict-panes"):  # side by side when wide; stacked when small
                    with VerticalScroll(classes="pane"):
                        yield Static(f"Version {newer} on the server{by}{deleted}", classes="pane-title")
                        yield Static(self.server.text or "(empty)", markup=False)
                    with VerticalScroll(classes="pane"):
                        yield Static(mine_label, classes="pane-title")
                        yield Static(self.mine or "(empty)", markup=False)
                with VerticalScroll(id="conflict-diff", classes="pane"):
                    yield Static(f"What changes if yours is written (version {newer} → yours)", classes="pane-title")
                    yield Static(diff_text(self.server.text, self.mine, f"version {newer}", "yours"))
            with Horizontal(classes="dialog-buttons"):
                yield Button(edit, id="edit", variant="primary")
                yield Button(overwrite, id="overwrite", variant="warning")
                yield Button(discard, id="discard", variant="error")

        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#edit", Button).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Only this dialog's variant of each key is shown and answers (see `_keys`)."""
        return action != "choose" or len(parameters) < 2 or parameters[1] == self.variant

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        choice = event.button.id or "edit"
        self.dismiss(choice if choice in ("overwrite", "discard") else "edit")  # type: ignore[arg-type]

    def action_choose(self, choice: str, variant: str | None = None) -> None:
        if choice == "back":  # nothing is written, and nothing of the person's is lost
            choice = "edit" if self.variant == "save" else "discard"
        if choice == "discard" and self.variant == "save":
            self._confirm_discard()  # one key must not lose a draft: `d` asks first
            return
        self.dismiss(choice if choice in ("overwrite", "discard") else "edit")  # type: ignore[arg-type]

    @work(exclusive=True)
    async def _confirm_discard(self) -> None:
        from memframe.tui.dialogs.confirm import ConfirmAction

        newer = self.server.version
        sure = await self.app.push_screen_wait(
            ConfirmAction(
                "Discard your draft?",
                f"Your draft ({human_size(len(self.mine.encode()))}) is dropped and the editor shows version "
                f"{newer}. The draft is not saved anywhere, so this cannot be undone.",
                f"Discard my draft, take version {newer}",
            )
        )
        if sure:
            self.dismiss("discard")
