"""The footer, with Help and Quit first: a narrow terminal has no room for every key, and these two
must stay visible at 80 columns (and 60). The keys that do not fit whole are left out rather than cut
mid-word ("f2 Assis"); everything a screen offers is in help (F1) and the command palette as well.
"""

from __future__ import annotations

from collections.abc import Hashable

from textual.app import ComposeResult
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey  # Textual's own footer item; not exported publicly

from memframe.tui.widgets.status import show

#: Actions shown before the screen's own keys, in this order.
FIRST = ("app.help", "help", "app.quit", "quit")


class KeyFooter(Footer):
    """Textual's Footer, with the frame's Help and Quit keys moved to the front."""

    _composed: Hashable = None  # what the keys shown were made from (`_keys_shown`)
    _recompose_pending = False  # a recompose is asked for and has not run yet

    def compose(self) -> ComposeResult:
        # Textual's footer composes empty until its screen first publishes the bindings, then makes its
        # keys after the next paint: the first paint had no keys, and the memory's paint waited for a
        # restyle of every key. The screen's bindings are known once the footer mounts; `bindings_changed`
        # makes the keys again only if what they show differs.
        self._bindings_ready = True
        self._recompose_pending = False
        self._widths: dict[FooterKey, int] = {}  # each key's width, measured while it was shown
        self._unmeasured_fits = 0
        self._composed = self._keys_shown() if self._bindings_ready else None
        widgets = list(super().compose())
        help_binding = getattr(self.app, "help_binding", None)
        if self._bindings_ready and help_binding and not any(getattr(w, "action", None) in FIRST for w in widgets):
            # A dialog's footer lists only its own keys; Help (a priority binding) works there too, so say so.
            binding = help_binding()
            key = FooterKey(binding.key, self.app.get_key_display(binding), binding.description, "app.help",
                            tooltip=binding.tooltip)  # fmt: skip
            widgets.insert(0, key.data_bind(compact=Footer.compact))
        for widget in widgets:
            if isinstance(widget, FooterKey):
                _settle_compact(widget, True if widget.has_class("-command-palette") else self.compact)

        def rank(widget: object) -> int:
            action = getattr(widget, "action", None)  # a FooterKey (not public API) names its action
            if action in FIRST:
                return FIRST.index(action) // 2
            return len(FIRST)

        yield from sorted(widgets, key=rank)  # stable: the screen's own keys keep their order
        self.call_after_refresh(self._fit)

    def on_resize(self, event: Resize) -> None:
        self.call_after_refresh(self._fit)

    def _fit(self) -> None:
        """Show the keys, in order, that fit whole beside the palette key; hide the rest."""
        keys = [w for w in self.query_children(FooterKey) if not w.has_class("-command-palette")]
        docked = sum(w.outer_size.width for w in self.query_children(FooterKey) if w not in keys)
        room, used = self.size.width - docked, 0
        for key in keys:
            if key.display and key.outer_size.width:  # measured while shown; kept while hidden
                self._widths[key] = key.outer_size.width
            width = self._widths.get(key, 0)
            used += width
            show(key, used <= room or not width)  # unchanged: no layout pass after the first paint
        if any(not self._widths.get(key) for key in keys) and self._unmeasured_fits < 20:
            self._unmeasured_fits += 1  # not laid out yet: fit again once they are
            self.call_after_refresh(self._fit)

    def bindings_changed(self, screen: Screen) -> None:
        """Make the keys again only when what they show changed. Textual's footer makes every key
        anew whenever the bindings are refreshed (a focus change, a widget made read-only or
        editable), a restyle of each key that cost the frame a good part of its memory's first
        paint, and gave the same footer."""
        if self._bindings_ready and self._composed is not None and self._keys_shown() == self._composed:
            if self.is_attached and screen is self.screen:
                self.call_after_refresh(self._fit)  # as after a recompose: the keys may be measured only now
            return
        if self._recompose_pending:  # the recompose asked for reads the bindings when it runs
            return
        self._recompose_pending = screen.app.app_focus and self.is_attached and screen is self.screen
        super().bindings_changed(screen)

    def _keys_shown(self) -> Hashable:
        """Everything `compose` makes the keys from: each shown binding as displayed, enabled or
        not, its group, the command palette's key, and the Help key a dialog's footer adds."""
        app = self.app
        active = self.screen.active_bindings
        shown = tuple(
            (binding.key, app.get_key_display(binding), binding.description, binding.action, enabled, tooltip,
             None if binding.group is None else (binding.group.description, binding.group.compact))
            for (_node, binding, enabled, tooltip) in active.values()
            if binding.show
        )  # fmt: skip
        palette = active.get(app.COMMAND_PALETTE_BINDING)
        help_binding = getattr(app, "help_binding", None)
        helper = help_binding() if help_binding else None
        return (
            shown,
            self.show_command_palette and app.ENABLE_COMMAND_PALETTE,
            None if palette is None else (palette[1].key, app.get_key_display(palette[1]), palette[1].description,
                                          palette[1].tooltip, palette[2]),
            None if helper is None else (helper.key, app.get_key_display(helper), helper.description, helper.tooltip),
        )  # fmt: skip


def _settle_compact(key: FooterKey, compact: bool) -> None:
    """Give a key, before it mounts, the `compact` value (and its -compact class) it ends up with.

    A FooterKey starts compact (Textual's default), takes the -compact class and is restyled when it
    mounts, then is bound to the footer's `compact` (False) and restyled again without it: two
    restyles of every key before the first paint, for the look it had when made. The palette key is
    not bound and stays compact."""
    key.set_reactive(FooterKey.compact, compact)
    key.set_class(compact, "-compact", update=False)
