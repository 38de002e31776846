"""The frame's modal screens (dialogs, help, the mode switcher, the budget) and the Help key they show.

A modal screen's footer lists only the screen's own bindings, yet the App's Help (F1) is a priority
binding that works there too; binding Help again on every modal screen, under the App's binding id,
lets Textual's footer show it with whatever key the settings' `[keymap]` gives Help.
"""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.screen import ModalScreen, ScreenResultType

#: Help, as the App binds it (`keys.APP_BINDINGS`) and as every modal screen shows it.
HELP = Binding("f1", "app.help", "Help", tooltip="Every key of this screen and what it does; escape closes it",
               id="memframe.help")  # fmt: skip


class Modal(ModalScreen[ScreenResultType]):
    """A modal screen whose footer shows Help. F1 itself is answered by the App's priority binding."""

    #: Every modal screen's rules (dialogs, help, the mode switcher, forget, the budget): parsed when the
    #: first one opens, so the frame's first paint does not parse them; no restyle of what is open.
    DEFAULT_CSS = """
    /* dialogs */
    .dialog { align: center middle; background: $background 60%; }
    .dialog-box {
        width: 72;
        max-width: 100%;
        height: auto;
        max-height: 100%;
        padding: 1 2;
        border: thick $primary;
        background: $surface;
    }

    /* A dialog's words scroll when the terminal is small; its title and buttons stay in view. */
    .dialog-body { height: auto; max-height: 60vh; }
    .dialog.-low .dialog-body { max-height: 50vh; }
    .dialog-body .pane { max-height: 1000; }
    .dialog-box.wide { width: 100%; height: 1fr; max-height: 100%; padding: 0 1; border: thick $warning; }
    .dialog-box.wide .dialog-title { margin-bottom: 0; }
    .dialog-box.wide .dialog-buttons { margin-top: 0; }
    .dialog-title { text-style: bold; margin-bottom: 1; }
    .dialog-buttons { height: auto; margin-top: 1; align-horizontal: right; }

    /* Narrow and low terminals (80×24, 60×20): less padding, buttons that wrap instead of vanishing. */
    .dialog.-narrow .dialog-box, .dialog.-low .dialog-box { padding: 0 1; }
    .dialog.-narrow .dialog-buttons, .dialog.-low .dialog-buttons { layout: vertical; margin-top: 0; }
    .dialog.-narrow .dialog-buttons Button,
    .dialog.-low .dialog-buttons Button {
        width: 100%;
        height: 1;
        min-width: 8;
        border: none;
        margin: 0;
    }
    .dialog-buttons Button { margin-left: 1; }
    .pane { height: auto; max-height: 12; border: round $primary 50%; padding: 0 1; }
    .pane-title { text-style: bold; color: $accent; }
    #conflict-panes { height: 1fr; }
    #conflict-panes .pane { width: 1fr; height: 1fr; max-height: 100%; }
    #conflict-diff { height: 1fr; max-height: 100%; }

    /* Narrow: the whole conflict view scrolls as one column (texts, then the diff), buttons below. */
    #conflict-body { height: 1fr; }
    ConflictScreen.-narrow #conflict-body,
    ConflictScreen.-low #conflict-body {
        overflow-y: auto;
        scrollbar-size-vertical: 1;
    }
    ConflictScreen.-narrow #conflict-panes,
    ConflictScreen.-low #conflict-panes {
        layout: vertical;
        height: auto;
    }
    ConflictScreen.-narrow #conflict-panes .pane,
    ConflictScreen.-low #conflict-panes .pane,
    ConflictScreen.-narrow #conflict-diff,
    ConflictScreen.-low #conflict-diff {
        width: 100%;
        height: auto;
        max-height: 1000;
    }

    /* Help */
    .help-box { width: 100; height: 1fr; }
    #help-body { height: 1fr; }
    .help-intro, .help-section { margin-bottom: 1; }
    .help-section { margin-top: 1; }
    .help-screen-name { margin-top: 1; color: $accent; }
    #modes { height: auto; max-height: 12; margin: 1 0; }
    #mode-message { padding: 0 1; }
    #mode-message.-error { background: $error 35%; }

    /* Forget / rotate the key (f, k in Changes): the conversations switch beside its words */
    #forget-switch { height: auto; margin-top: 1; }
    #forget-switch Switch { margin-right: 1; }
    #conversations-label { width: 1fr; padding-top: 1; }
    .dialog.-low #forget-switch { margin-top: 0; }
    .dialog.-low #forget-switch Switch { border: none; height: 1; padding: 0; }
    .dialog.-low #forget-switch Switch:focus { background: $accent 40%; }
    .dialog.-low #conversations-label { padding-top: 0; }
    #passphrase { margin-top: 1; }

    /* The budget per section (ctrl+b) */
    #budget-body { height: auto; max-height: 18; }

    /* Low terminals (under 26 rows): dialogs spend no rows on margins. */
    .dialog.-low .dialog-title { margin-bottom: 0; }
    .dialog.-low #modes { margin: 0; max-height: 8; }
    #forget-note { color: $text-warning; margin-bottom: 1; }
    """
    SCOPED_CSS = False  # the selectors as written: they name this screen's own ids and classes

    BINDINGS: ClassVar[list[BindingType]] = [HELP]
