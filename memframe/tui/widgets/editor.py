"""The Markdown editor, with a rendered preview one key away.

The editor owns no document state: the screen reads `text` and mirrors it
into `DocumentState`. Highlighting needs Textual's tree-sitter extras; when
they are missing the editor is plain text rather than failing. The preview's
Markdown widget (and its parser) is made the first time the preview is shown,
so opening the frame does not load it before the first paint.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.reactive import reactive
from textual.widgets import ContentSwitcher, TextArea

from memframe.tui.keynames import key_of

if TYPE_CHECKING:
    from textual.widgets import Markdown


def placeholder(save_key: str) -> str:
    """What the empty editor says, naming the Save key as the keymap has it."""
    return (f"The memory is empty. Write what the Assistant should keep in mind across conversations, in "
            f"Markdown; {save_key} saves.")  # fmt: skip


def markdown_highlighting_available() -> bool:
    """Tree-sitter's Markdown grammar is an optional extra (textual[syntax])."""
    return find_spec("tree_sitter") is not None and find_spec("tree_sitter_markdown") is not None


class MemoryEditor(Vertical):
    """A soft-wrapping Markdown TextArea and a Markdown preview, switched by `preview`."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+home", "document_start", "Start of memory", show=False, id="memframe.editor.start"),
        Binding("ctrl+end", "document_end", "End of memory", show=False, id="memframe.editor.end"),
    ]

    preview: reactive[bool] = reactive(False)

    def __init__(
        self, *, text: str = "", syntax: bool | None = None, cursor_blink: bool = True, id: str | None = None
    ) -> None:
        """`text`: what the editor shows from the start (a memory read before the screen was made)."""
        super().__init__(id=id)
        self._text = text
        self._syntax = markdown_highlighting_available() if syntax is None else syntax
        self._cursor_blink = cursor_blink

    def compose(self) -> ComposeResult:
        with ContentSwitcher(initial="editor-text"):
            area = TextArea(
                self._text,
                soft_wrap=True,
                tab_behavior="indent",
                placeholder=placeholder(key_of(self.app, "save")),
                read_only=True,  # until the memory has been loaded
                id="editor-text",
            )
            if self._syntax:  # set after: TextArea(language=…) parses and compiles its highlighting twice
                area.language = "markdown"
            yield area
            yield VerticalScroll(id="editor-preview")  # the Markdown widget arrives with the first preview

    def on_mount(self) -> None:
        self.area.cursor_blink = self._cursor_blink
        self.area.border_title = "Memory · Markdown"
        self.query_one("#editor-preview").border_title = f"Preview · {key_of(self.app, 'preview')} to edit"

    @property
    def area(self) -> TextArea:
        return self.query_one("#editor-text", TextArea)

    @property
    def text(self) -> str:
        return self.area.text

    def load(self, text: str) -> None:
        """Replace the text (a load, a discard, a Clear): the undo history starts afresh."""
        if self.area.text != text:
            self.area.load_text(text)
        if self.preview:
            self._render_preview()

    def set_editable(self, editable: bool) -> None:
        self.area.read_only = not editable

    def focus_text(self) -> None:
        if not self.preview:
            self.area.focus()

    def action_document_start(self) -> None:
        self.area.move_cursor((0, 0))

    def action_document_end(self) -> None:
        self.area.move_cursor(self.area.document.end)

    def watch_preview(self, preview: bool) -> None:
        self.query_one(ContentSwitcher).current = "editor-preview" if preview else "editor-text"
        if preview:
            self._render_preview()
            self.query_one("#editor-preview").focus()
        else:
            self.area.focus()

    def _render_preview(self) -> None:
        text = self.area.text or "*The memory is empty.*"
        pane = self.query_one("#editor-preview", VerticalScroll)
        shown: list[Markdown] = list(pane.query("Markdown"))  # type: ignore[arg-type]
        if shown:
            shown[0].update(text)
            return
        from textual.widgets import Markdown

        pane.mount(Markdown(text, open_links=False))
