"""Save / Discard / Cancel: asked whenever leaving would drop an unsaved draft.

Quit, reload, Clear and Undo all ask this one question the same way. The
flow that asks has already waited for any in-flight save, so the answer is
about a draft whose fate is still open.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Static

from memframe.tui.keynames import key_of
from memframe.tui.modal import Modal
from memframe.tui.text import human_size
from memframe.tui.widgets.footer import KeyFooter

DraftChoice = Literal["save", "discard", "cancel", "file"]


class SaveDiscardCancel(Modal[DraftChoice]):
    """Dismisses with "save", "discard" or "cancel", or "file" when `offer_file` (a Save has failed):
    the way out for a draft the server will not take."""

    HELP_NAME = "Unsaved changes"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "choose('save')", "Save", tooltip="Save the draft first, then go on", id="memframe.draft.save"),
        Binding("d", "choose('discard')", "Discard", tooltip="Drop the draft, then go on", id="memframe.draft.discard"),
        Binding("escape", "choose('cancel')", "Cancel", tooltip="Keep editing; nothing happens",
                id="memframe.draft.cancel"),
        Binding("w", "choose('file')", "Write to a file", tooltip="Keep the draft in a file of its own (mode 0600)",
                id="memframe.draft.file"),
    ]  # fmt: skip

    def __init__(self, purpose: str, base_version: int, size: int, *, offer_file: bool = False) -> None:
        super().__init__(classes="dialog")
        self.offer_file = offer_file
        self.purpose = purpose
        self.base_version = base_version
        self.draft_size = size

    def compose(self) -> ComposeResult:
        base = f"version {self.base_version}" if self.base_version else "an empty, never-saved memory"
        save, discard, cancel = (key_of(self.app, f"draft.{name}") for name in ("save", "discard", "cancel"))
        with Vertical(classes="dialog-box"):
            yield Static("Unsaved changes", classes="dialog-title")
            with VerticalScroll(classes="dialog-body"):
                yield Static(
                    f"Your draft ({human_size(self.draft_size)}, based on {base}) is not saved. "
                    f"Save it {self.purpose}, discard it, or cancel and keep editing? ({save}, {discard} or {cancel})"
                )
                if self.offer_file:
                    from memframe.backend.drafts import drafts_dir

                    to_file = key_of(self.app, "draft.file")
                    yield Static(f"The server is not taking Saves now. Write to file ({to_file}) keeps the draft in "
                                 f"{drafts_dir()} (mode 0600).")  # fmt: skip
            with Horizontal(classes="dialog-buttons"):
                yield Button("Save", id="save", variant="primary")
                yield Button("Discard", id="discard", variant="error")
                yield Button("Cancel", id="cancel")
                if self.offer_file:
                    yield Button("Write to file", id="file")

        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#save", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_choose(event.button.id or "cancel")

    def action_choose(self, choice: str) -> None:
        allowed = ("save", "discard", "file") if self.offer_file else ("save", "discard")
        self.dismiss(choice if choice in allowed else "cancel")  # type: ignore[arg-type]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The file key shows (and works) only when the file is offered."""
        return self.offer_file or parameters != ("file",)
