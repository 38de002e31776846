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
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from memframe.tui.text import human_size
from memframe.tui.widgets.footer import KeyFooter

DraftChoice = Literal["save", "discard", "cancel"]


class SaveDiscardCancel(ModalScreen[DraftChoice]):
    """Dismisses with "save", "discard" or "cancel"."""

    HELP_NAME = "Unsaved changes"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "choose('save')", "Save", tooltip="Save the draft first, then go on", id="memframe.draft.save"),
        Binding("d", "choose('discard')", "Discard", tooltip="Drop the draft, then go on", id="memframe.draft.discard"),
        Binding("escape", "choose('cancel')", "Cancel", tooltip="Keep editing; nothing happens",
                id="memframe.draft.cancel"),
    ]  # fmt: skip

    def __init__(self, purpose: str, base_version: int, size: int) -> None:
        super().__init__(classes="dialog")
        self.purpose = purpose
        self.base_version = base_version
        self.draft_size = size

    def compose(self) -> ComposeResult:
        base = f"version {self.base_version}" if self.base_version else "an empty, never-saved memory"
        with Vertical(classes="dialog-box"):
            yield Static("Unsaved changes", classes="dialog-title")
            with VerticalScroll(classes="dialog-body"):
                yield Static(
                    f"Your draft ({human_size(self.draft_size)}, based on {base}) is not saved. "
                    f"Save it {self.purpose}, discard it, or cancel and keep editing? (s, d or escape)"
                )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Save", id="save", variant="primary")
                yield Button("Discard", id="discard", variant="error")
                yield Button("Cancel", id="cancel")

        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#save", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_choose(event.button.id or "cancel")

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice if choice in ("save", "discard") else "cancel")  # type: ignore[arg-type]
