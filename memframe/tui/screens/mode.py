"""The mode switcher: Off / Read only / Auto, each with its one-line meaning.

Choosing is a compare-and-set on the policy revision this dialog was opened
with. If someone changed the mode first, the dialog says so, shows the mode
that is now in force, and changes nothing; choosing again then compares
against the revision it just learned. Human editing works in every mode.
"""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from memframe.backend.base import Backend
from memframe.core.errors import PolicyConflict
from memframe.core.types import Mode, Policy
from memframe.tui import calls
from memframe.tui.keynames import key_of
from memframe.tui.messages import ModeSet, Tickets
from memframe.tui.modal import Modal
from memframe.tui.widgets.footer import KeyFooter


class ModeSwitcher(Modal[Policy | None]):
    """Dismisses with the policy now in force if it changed (here or elsewhere), else None."""

    HELP_NAME = "Mode"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close", id="memframe.mode.close")]

    def __init__(self, backend: Backend, policy: Policy) -> None:
        super().__init__(classes="dialog")
        self.backend = backend
        self.policy = policy
        self.learned = False  # the policy changed while this dialog was open
        self.tickets = Tickets()
        self.busy = False

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Static("Memory mode", classes="dialog-title")
            yield Static(id="mode-intro")
            yield OptionList(id="modes")
            yield Static(id="mode-message")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._show()

    def _show(self, message: str = "", *, error: bool = False) -> None:
        self.query_one("#mode-intro", Static).update(
            f"Now {self.policy.mode.label} (policy revision {self.policy.revision}). "
            f"You can edit the memory in every mode. Enter chooses; {key_of(self.app, 'mode.close')} closes."
        )
        options = self.query_one("#modes", OptionList)
        options.clear_options()
        for mode in Mode:
            current = mode is self.policy.mode
            prompt = Table.grid(padding=(0, 1))
            prompt.add_column(width=1)
            prompt.add_column()
            prompt.add_row(
                Text("●" if current else "○", style="bold" if current else "dim"),
                Text.assemble((mode.label, "bold"), (" (current)" if current else "", "dim"), "\n",
                              (mode.explanation, "dim")),
            )  # fmt: skip
            options.add_option(Option(prompt, id=mode.value))
        options.highlighted = list(Mode).index(self.policy.mode)
        note = self.query_one("#mode-message", Static)
        note.update(message)
        note.set_class(error, "-error")
        note.display = bool(message)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if self.busy:
            return
        mode = Mode(event.option.id or self.policy.mode.value)
        if mode is self.policy.mode:
            self.action_close()
            return
        self.busy = True
        self.query_one("#mode-message", Static).update(f"Changing the mode to {mode.label}…")
        self.query_one("#mode-message", Static).display = True
        self._set_mode(self.tickets.issue(), mode, self.policy.revision)

    @work(thread=True, group="io", exit_on_error=False)
    def _set_mode(self, ticket: int, mode: Mode, expected_revision: int) -> None:
        self.post_message(ModeSet(ticket, calls.set_mode(self.backend, mode, expected_revision)))

    def on_mode_set(self, message: ModeSet) -> None:
        self.busy = False
        outcome = message.outcome
        if outcome.policy is not None:
            self.dismiss(outcome.policy)
            return
        error = outcome.error
        if isinstance(error, PolicyConflict):
            try:
                current = Mode(error.current_mode)
            except ValueError:
                current = self.policy.mode
            self.policy = Policy(current, error.current_revision, self.policy.clear_generation)
            self.learned = True
            self._show(
                f"Someone changed the mode first: it is now {current.label} "
                f"(policy revision {error.current_revision}). Nothing was changed. "
                f"Choose {outcome.requested.label} again to change it from here.",
                error=True,
            )
        else:
            self._show(f"The mode was not changed: {error}", error=True)

    def action_close(self) -> None:
        self.dismiss(self.policy if self.learned else None)
