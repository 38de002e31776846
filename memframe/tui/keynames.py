"""The key a binding id is on now, as a person reads it: what every message and hint that names a key says.

Messages never spell a key themselves ("press ctrl+r"): they ask `key_of(app, "reload")`, which reads the
keymap the settings file gave `App.set_keymap`, else the binding's own key. The default is found among
the classes already loaded (the App, the screens, dialogs and widgets whose BINDINGS carry the id), so
naming a key imports nothing: a message can only name a key of something the person can reach, whose
class is loaded by then. This module imports no screen, so every screen can import it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from textual.binding import Binding
from textual.dom import DOMNode

if TYPE_CHECKING:
    from textual.app import App

PREFIX = "memframe."

#: Textual's names for keys a person reads as a character.
_READ_AS = {"slash": "/", "question_mark": "?", "full_stop": ".", "comma": ","}

#: Each binding id's own key, once found (a class's BINDINGS do not change).
_defaults: dict[str, str] = {}


def full_keymap(keymap: Mapping[str, str]) -> dict[str, str]:
    """The settings' keymap with every id spelled in full (`save` -> `memframe.save`)."""
    return {(name if name.startswith(PREFIX) else PREFIX + name): keys for name, keys in keymap.items()}


def show_keys(keys: str) -> str:
    """`escape,e` -> `escape / e`, `slash` -> `/`: the way a person reads a list of keys."""
    return " / ".join(_READ_AS.get(part.strip(), part.strip()) for part in keys.split(",") if part.strip())


def key_label(binding_id: str, keymap: Mapping[str, str] | None = None) -> str:
    """The first key that runs `binding_id` (`save` or `memframe.save`): the keymap's, else the binding's.

    An id no loaded class binds is a mistake in the code that names it (KeyError), not a key to guess.
    """
    full = binding_id if binding_id.startswith(PREFIX) else PREFIX + binding_id
    keys = full_keymap(keymap or {}).get(full) or _default(full)
    return show_keys(keys.split(",")[0])


def key_of(app: App[Any], binding_id: str) -> str:
    """`key_label` with `app`'s keymap (`App.set_keymap`, which the settings file's `[keymap]` feeds)."""
    return key_label(binding_id, app._keymap)


def _default(full_id: str) -> str:
    if full_id not in _defaults:
        for cls in _loaded(DOMNode):
            for binding in Binding.make_bindings(cls.__dict__.get("BINDINGS", ())):
                if binding.id and binding.id.startswith(PREFIX):
                    _defaults.setdefault(binding.id, binding.key)
    return _defaults[full_id]


def _loaded(cls: type) -> Iterator[type]:
    """`cls` and every subclass defined so far (the App, screens, dialogs and widgets)."""
    yield cls
    subclass: type
    for subclass in cls.__subclasses__():
        yield from _loaded(subclass)
