"""Are you sure? Asked before a one-key action that cannot be undone (discarding a draft, dismissing a proposal)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Static

from memframe.tui.keynames import key_of
from memframe.tui.modal import Modal
from memframe.tui.widgets.footer import KeyFooter


class ConfirmAction(Modal[bool]):
    """Dismisses True only for `y` or the named button; escape (the focused Back button) is False."""

    HELP_NAME = "Are you sure?"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes, do it", id="memframe.confirm.yes"),
        Binding("escape", "answer(False)", "Back", tooltip="Go back; nothing is done", id="memframe.confirm.back"),
    ]

    def __init__(self, title: str, body: str, do: str) -> None:
        super().__init__(classes="dialog")
        self.title_text = title
        self.body = body
        self.do = do

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Static(self.title_text, classes="dialog-title")
            with VerticalScroll(classes="dialog-body"):
                yes, back = key_of(self.app, "confirm.yes"), key_of(self.app, "confirm.back")
                yield Static(f"{self.body}\n\n{yes}: {self.do.lower()}; {back}: go back, nothing is done.")
            with Horizontal(classes="dialog-buttons"):
                yield Button(self.do, id="yes", variant="error")
                yield Button("Back", id="back")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#back", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
