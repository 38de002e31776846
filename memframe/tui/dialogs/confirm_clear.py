"""The Clear confirmation, stating the contract's honest boundary before anything is written."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Static

from memframe.core.wording import CLEAR_BOUNDARY
from memframe.tui.keynames import key_of
from memframe.tui.modal import Modal
from memframe.tui.text import human_size
from memframe.tui.widgets.footer import KeyFooter


class ConfirmClear(Modal[bool]):
    """Dismisses True only when the person chose Clear; Cancel has the focus."""

    HELP_NAME = "Clear"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+l", "answer(True)", "Clear memory", tooltip="Clear now (ctrl+l again)",
                id="memframe.confirm_clear.clear"),
        Binding("y", "answer(True)", "Yes, clear", id="memframe.confirm_clear.yes"),
        Binding("escape", "answer(False)", "Cancel", tooltip="Nothing is written", id="memframe.confirm_clear.cancel"),
    ]  # fmt: skip

    def __init__(self, workspace_id: str, base_version: int, size: int) -> None:
        super().__init__(classes="dialog")
        self.workspace_id = workspace_id
        self.base_version = base_version
        self.saved_size = size

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Static(f"Clear the memory of {self.workspace_id}?", classes="dialog-title")
            if self.base_version:
                first = (
                    f"• Version {self.base_version} ({human_size(self.saved_size)}) is replaced by an empty "
                    "revision. It stays in Changes, where you can restore it.\n"
                )
            else:
                first = "• The memory was never saved; Clear writes an empty first revision.\n"
            clear, yes, cancel = (key_of(self.app, f"confirm_clear.{name}") for name in ("clear", "yes", "cancel"))
            with VerticalScroll(classes="dialog-body"):
                yield Static(
                    first + f"• {CLEAR_BOUNDARY}\n• If someone writes first, nothing is cleared and you are asked "
                    f"again.\n\n{clear} (again) or {yes} clears; {cancel} cancels."
                )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Clear memory", id="clear", variant="error")
                yield Button("Cancel", id="cancel")

        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "clear")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
