"""The footer, with Help and Quit first: a narrow terminal has no room for every key, and these two
must stay visible at 80 columns (and 60). The keys that do not fit whole are left out rather than cut
mid-word ("f2 Assis"); everything a screen offers is in help (F1) and the command palette as well.
"""

from __future__ import annotations

from collections.abc import Hashable

from textual.app import ComposeResult
from textual.events import Resize
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer

from memframe.tui.widgets.status import show

#: Actions shown before the screen's own keys, in this order.
FIRST = ("app.help", "help", "app.quit", "quit")


class KeyFooter(Footer):
    """Textual's Footer, with the frame's Help and Quit keys moved to the front."""

    _composed: Hashable = None  # what the keys shown were made from (`_keys_shown`)
    _recompose_pending = False  # a recompose is asked for and has not run yet

    def compose(self) -> ComposeResult:
        # As Textual's footer: empty until the screen first publishes its bindings, then the keys, made
        # after the next paint, so the first paint is the memory without waiting for them (a person sees
        # the keys one refresh later). After that, `bindings_changed` makes them again only if what they
        # show differs.
        self._recompose_pending = False
        self._widths: dict[Widget, int] = {}  # each key's width, measured while it was shown
        self._unmeasured_fits = 0
        self._composed = self._keys_shown() if self._bindings_ready else None
        widgets = list(super().compose())
        for widget in widgets:
            if _is_key(widget):
                _settle_compact(widget, True if widget.has_class("-command-palette") else self.compact)

        def rank(widget: Widget) -> int:
            action = getattr(widget, "action", None)
            if action in FIRST:
                return FIRST.index(action) // 2
            return len(FIRST)

        yield from sorted(widgets, key=rank)  # stable: the screen's own keys keep their order
        self.call_after_refresh(self._fit)

    def on_resize(self, event: Resize) -> None:
        self.call_after_refresh(self._fit)

    def _fit(self) -> None:
        """Show the keys, in order, that fit whole beside the palette key; hide the rest."""
        every_key = [w for w in self.children if _is_key(w)]
        keys = [w for w in every_key if not w.has_class("-command-palette")]
        docked = sum(w.outer_size.width for w in every_key if w not in keys)
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
        not, its group, and the command palette's key."""
        app = self.app
        active = self.screen.active_bindings
        shown = tuple(
            (binding.key, app.get_key_display(binding), binding.description, binding.action, enabled, tooltip,
             None if binding.group is None else (binding.group.description, binding.group.compact))
            for (_node, binding, enabled, tooltip) in active.values()
            if binding.show
        )  # fmt: skip
        palette = active.get(app.COMMAND_PALETTE_BINDING)
        return (
            shown,
            self.show_command_palette and app.ENABLE_COMMAND_PALETTE,
            None if palette is None else (palette[1].key, app.get_key_display(palette[1]), palette[1].description,
                                          palette[1].tooltip, palette[2]),
        )  # fmt: skip


def _is_key(widget: Widget) -> bool:
    """A key Textual's footer made (its FooterKey, which Textual does not export): the widget that
    runs a binding's action, not a group or its label."""
    return isinstance(getattr(widget, "action", None), str)


def _settle_compact(key: Widget, compact: bool) -> None:
    """Give a key, before it mounts, the `compact` value (and its -compact class) it ends up with.

    A footer key starts compact (Textual's default), takes the -compact class and is restyled when it
    mounts, then is bound to the footer's `compact` (False) and restyled again without it: two
    restyles of every key before the first paint, for the look it had when made. The palette key is
    not bound and stays compact."""
    key.set_reactive(type(key).compact, compact)  # type: ignore[attr-defined]  # declared by FooterKey
    key.set_class(compact, "-compact", update=False)
