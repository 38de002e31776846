"""What a person sees at a glance: where the memory lives, which version, unsaved or not, how big.

Three small widgets, each drawn entirely from `DocumentState`, so whatever
the flows do, the screen cannot show a version or a dirty flag the state
does not hold.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

from memframe.core.types import MEMORY_RECALL_MAX_BYTES
from memframe.tui.state import DocumentState, WriteKind
from memframe.tui.text import OVERSIZED_EXPLANATION, short_location, size_meter

_SEP = ("  ·  ", "dim")


class Shown(Static):
    """A Static that repaints only when what it shows changes: the head poll redraws the status every
    tick, and an unchanged `update` would still cost the screen a layout pass (a stall the person feels)."""

    _shown: object = None

    def show_content(self, content: Text | str, *, display: bool = True) -> None:
        if content != self._shown:
            self._shown = content
            self.update(content)
        show(self, display)


def show(widget: Widget, display: bool) -> None:
    """Show or hide `widget`, touching its styles only if that changes anything: setting `display`
    to what it already is still adds an inline rule the first time, and asks the screen for a
    layout pass (one more before the frame's first paint, for every widget so set)."""
    if widget.display != display:
        widget.display = display


def elide(text: str, width: int) -> str:
    """`text` cut to `width` characters, the cut marked with …"""
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def pack(fields: list[Text], room: int) -> list[Text]:
    """`fields` joined by separators into lines of at most `room` cells, broken only between fields.

    A field ("Mode Read only", the size meter) then never wraps inside itself, unless it alone is wider.
    """
    lines: list[Text] = []
    for field in fields:
        if lines and lines[-1].cell_len + len(_SEP[0]) + field.cell_len <= room:
            lines[-1].append_text(Text.assemble(_SEP, field))
        else:
            lines.append(field.copy())
    return lines


class StatusBar(Shown):
    """Workspace and backend; base version, unsaved marker, mode and the size meter.

    Its height follows its text (the .tcss says `height: auto`): on a narrow terminal the lines break
    between fields rather than push the version, unsaved marker and size meter out of sight. A long
    workspace name is elided first, so line one fits where it can.
    """

    _state: DocumentState | None = None
    #: The location and how it is shown: worked out once (it reads the settings, which scans the environment).
    _place: tuple[str, str] | None = None

    def on_resize(self) -> None:
        if self._state is not None:
            self.show(self._state)

    def show(self, state: DocumentState) -> None:
        self._state = state
        mode = state.mode.label if state.mode is not None else "unknown"
        if self._place is None or self._place[0] != state.location:
            self._place = (state.location, short_location(state.location))
        place = self._place[1]
        fixed = len("Workspace ") + 2 * len(_SEP[0]) + len(place) + len("Mode ") + len(mode)
        room = self.content_size.width or 1_000  # before the first layout: as if wide
        name = elide(state.workspace_id, max(8, room - fixed)) if fixed + len(state.workspace_id) > room else (
            state.workspace_id
        )  # fmt: skip
        first = [
            Text.assemble(("Workspace ", "dim"), (name, "bold")),
            Text(place),
            Text.assemble(("Mode ", "dim"), (mode, "bold")),
        ]
        second = [_version(state), _marker(state), size_meter(state.size)]
        if state.newer_version is not None and state.dirty:
            second.append(Text(f"⚠ version {state.newer_version} is newer", style="bold red"))
        lines = pack(first, room) + pack(second, room)
        self.show_content(Text("\n").join(lines))


def _version(state: DocumentState) -> Text:
    if not state.loaded:
        return Text("Not loaded", style="bold red")
    if state.base_version == 0:
        return Text("Never saved (version 0)")
    deleted = " (deleted)" if state.deleted else ""
    return Text.assemble(("Version ", "dim"), (f"{state.base_version}{deleted}", "bold"))


def _marker(state: DocumentState) -> Text:
    if state.writing is not None:
        verb = {WriteKind.SAVE: "Saving", WriteKind.CLEAR: "Clearing", WriteKind.UNDO: "Restoring",
                WriteKind.APPLY: "Applying a proposal"}  # fmt: skip
        return Text(f"{verb[state.writing.kind]}…", style="bold yellow")
    if state.dirty:
        return Text("● Unsaved changes", style="bold yellow")
    if not state.loaded:
        return Text("–", style="dim")
    return Text("✓ Saved", style="green") if state.base_version else Text("Nothing to save yet", style="dim")


class SizeWarning(Shown):
    """Shown only when the draft (or the saved version) is over the recall bound; says what that means."""

    def show(self, state: DocumentState) -> None:
        if state.oversized:
            over = state.size - MEMORY_RECALL_MAX_BYTES
            self.show_content(f"⚠ Oversized by {over:,} bytes. {OVERSIZED_EXPLANATION} Nothing is cut for you.")
        elif state.saved_oversized:
            self.show_content(
                f"⚠ The saved version {state.base_version} is oversized and is not recalled. "
                "Save this shorter draft to fix it."
            )
        show(self, state.oversized or state.saved_oversized)


class MessageLine(Shown):
    """The last success or failure, in words; a failure stays until something else happens."""

    def show(self, state: DocumentState) -> None:
        self.set_class(state.message_is_error, "-error")
        self.show_content(state.message, display=bool(state.message))
