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

    BINDINGS: ClassVar[list[BindingType]] = [HELP]
