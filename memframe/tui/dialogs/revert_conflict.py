"""The revert conflict: later edits touched the lines a version changed, so reverting it wrote nothing.

Shows the current text, what the revert would remove and put back where it could not, the change
being reverted, and the diff of the result with only the clean parts undone. "Edit the result" makes
that result the person's draft (nothing is written until they Save it); "Keep" leaves the memory as is.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Static

from memframe.core.revert import Conflict
from memframe.tui.blame_calls import RevertOutcome
from memframe.tui.modal import Modal
from memframe.tui.text import diff_text
from memframe.tui.widgets.footer import KeyFooter

RevertChoice = Literal["edit", "keep"]


def conflict_text(conflicts: tuple[Conflict, ...]) -> Text:
    """Each place the revert could not be applied: what it would remove, put back, and what is there now."""
    out = Text()
    for c in conflicts:
        out.append(f"At line {c.line} of the current text:\n", style="bold")
        for label, lines, sign, style in (
            ("the revert would remove", c.removing, "- ", "red"),
            ("and put back", c.restoring, "+ ", "green"),
            ("where the current text has", c.current, "  ", ""),
        ):
            out.append(f"  {label}:\n", style="dim")
            for line in lines or ("(nothing)\n",):
                out.append(f"  {sign}{line.rstrip(chr(10))}\n", style=style)
    return out


class RevertConflict(Modal[RevertChoice]):
    """Dismisses with "edit" (the partly reverted text becomes the draft) or "keep" (nothing changes)."""

    HELP_NAME = "Revert conflict"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "choose('keep')", "Back, writing nothing", show=False, id="memframe.revert.back",
                tooltip="Keep the memory as it is"),
        Binding("e", "choose('edit')", "Edit the result", id="memframe.revert.edit",
                tooltip="The text with the clean parts undone becomes your draft; Save writes it"),
        Binding("d", "choose('keep')", "Keep as is", id="memframe.revert.discard",
                tooltip="Keep the current version; nothing is written"),
    ]  # fmt: skip

    def __init__(self, outcome: RevertOutcome) -> None:
        super().__init__(classes="dialog")
        assert outcome.reverted is not None
        self.revision = outcome.revision
        self.base_version = outcome.base_version
        self.current = outcome.current
        self.draft = outcome.reverted.draft
        self.conflicts = outcome.reverted.conflicts
        self.change = (outcome.before, outcome.after)

    def compose(self) -> ComposeResult:
        base = self.base_version
        with Vertical(classes="dialog-box wide"):
            yield Static(f"Conflict: version {self.revision}'s change cannot be undone cleanly", classes="dialog-title")
            with Vertical(id="conflict-body"):
                yield Static(
                    f"Later edits touched the lines version {self.revision} changed, so nothing was written.",
                    markup=False,
                )
                with Horizontal(id="conflict-panes"):
                    with VerticalScroll(classes="pane"):
                        yield Static(f"The current text (version {base})", classes="pane-title")
                        yield Static(self.current or "(empty)", markup=False)
                    with VerticalScroll(classes="pane"):
                        yield Static("What the revert would change there", classes="pane-title")
                        yield Static(conflict_text(self.conflicts))
                with VerticalScroll(id="conflict-diff", classes="pane"):
                    n = self.revision
                    yield Static(f"The change being reverted (version {n - 1} → {n})", classes="pane-title")
                    yield Static(diff_text(*self.change, f"version {n - 1}" if n > 1 else "nothing", f"version {n}"))
                    if self.draft != self.current:
                        yield Static(f"Version {base} → the result with the clean parts undone", classes="pane-title")
                        yield Static(diff_text(self.current, self.draft, f"version {base}", "result"))
            with Horizontal(classes="dialog-buttons"):
                yield Button("Edit the result", id="edit", variant="primary")
                yield Button(f"Keep version {base}", id="keep")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#edit", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss("edit" if event.button.id == "edit" else "keep")

    def action_choose(self, choice: str) -> None:
        self.dismiss("edit" if choice == "edit" else "keep")
