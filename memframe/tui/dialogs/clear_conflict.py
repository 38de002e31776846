"""A Clear that lost the race: nothing was cleared; offer an explicit Retry Clear, never an automatic one."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Static

from memframe.core.types import MemoryDocument, Policy
from memframe.tui.keynames import key_of
from memframe.tui.modal import Modal
from memframe.tui.text import human_size, when, who
from memframe.tui.widgets.footer import KeyFooter


class ClearConflict(Modal[bool]):
    """Dismisses True for Retry Clear against the newer version, False to keep the newer text."""

    HELP_NAME = "Clear conflict"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+l", "answer(True)", "Retry Clear", tooltip="Clear against the newer version, as you ask",
                id="memframe.clear_conflict.clear"),
        Binding("escape", "answer(False)", "Keep newer text", tooltip="Nothing is cleared",
                id="memframe.clear_conflict.keep"),
    ]  # fmt: skip

    def __init__(self, server: MemoryDocument, policy: Policy | None, *, now: float) -> None:
        super().__init__(classes="dialog")
        self.server = server
        self.policy = policy
        self.now = now

    def compose(self) -> ComposeResult:
        newer = self.server.version
        by = ""
        if self.server.info is not None:
            by = f" by {who(self.server.info)}, {when(self.server.info.created_at, self.now)}"
        generation = "" if self.policy is None else f" The clear generation is still {self.policy.clear_generation}."
        clear, keep = key_of(self.app, "clear_conflict.clear"), key_of(self.app, "clear_conflict.keep")
        with Vertical(classes="dialog-box"):
            yield Static("Nothing was cleared", classes="dialog-title")
            with VerticalScroll(classes="dialog-body"):
                yield Static(
                    f"Version {newer} was written first{by}. Your Clear named an older version, so nothing was "
                    f"written and older automatic work was not fenced.{generation} {clear} clears again, against "
                    f"version {newer}; {keep} keeps it. The newer text, now in the editor "
                    f"({human_size(len(self.server.text.encode()))}):"
                )
                with Vertical(classes="pane"):
                    yield Static(self.server.text or "(empty)", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"Retry Clear against version {newer}", id="retry", variant="error")
                yield Button("Keep the newer text", id="keep", variant="primary")

        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#keep", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "retry")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
