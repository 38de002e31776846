"""The footer, with Help and Quit first: a narrow terminal cuts the footer from the right, and these two
must stay visible at 80 columns (and 60). Everything else a screen offers is in help (F1) and the
command palette (ctrl+p) as well.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey  # Textual's own footer item; not exported publicly

#: Actions shown before the screen's own keys, in this order.
FIRST = ("app.help", "help", "app.quit", "quit")


class KeyFooter(Footer):
    """Textual's Footer, with the frame's Help and Quit keys moved to the front."""

    def compose(self) -> ComposeResult:
        widgets = list(super().compose())
        help_binding = getattr(self.app, "help_binding", None)
        if self._bindings_ready and help_binding and not any(getattr(w, "action", None) in FIRST for w in widgets):
            # A dialog's footer lists only its own keys; Help (a priority binding) works there too, so say so.
            binding = help_binding()
            key = FooterKey(binding.key, self.app.get_key_display(binding), binding.description, "app.help",
                            tooltip=binding.tooltip)  # fmt: skip
            widgets.insert(0, key.data_bind(compact=Footer.compact))

        def rank(widget: object) -> int:
            action = getattr(widget, "action", None)  # a FooterKey (not public API) names its action
            if action in FIRST:
                return FIRST.index(action) // 2
            return len(FIRST)

        yield from sorted(widgets, key=rank)  # stable: the screen's own keys keep their order
