"""Every key of the frame, read from the screens' own BINDINGS, so the help and the README cannot drift.

Each binding has an id (`memframe.…`); a person remaps it in the settings file's `[keymap]` table,
by its full id or without the `memframe.` prefix (`save = "ctrl+w"`). The help screen and the README's
key table are both made here from the same bindings, with that keymap applied, and so is the check
that refuses a keymap which would leave an action with no key (`keymap_problem`).

No widgets are made here; the screens' modules are imported only when the whole table is asked for
(the help screen, the README test), not before the first paint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from textual.binding import Binding, BindingType
from textual.keys import REPLACED_KEYS, Keys, key_to_character

from memframe.tui.keynames import PREFIX, full_keymap, show_keys
from memframe.tui.modal import HELP

#: The keys that work on every screen (the App's BINDINGS). Help is a priority binding so it works in dialogs.
APP_BINDINGS: list[BindingType] = [
    replace(HELP, action="help", priority=True),
    Binding("ctrl+q", "quit", "Quit", tooltip="Quit (asks about an unsaved draft)", priority=True,
            id="memframe.quit"),
]  # fmt: skip

#: The help screen's own keys (F1 again closes it too, through the App's binding).
HELP_BINDINGS: list[BindingType] = [Binding("escape", "close", "Close help", id="memframe.help.close")]


@dataclass(frozen=True)
class KeyRow:
    """One key (or keys) and what it does, in the words of its binding."""

    keys: str
    description: str
    tooltip: str
    id: str


def rows(bindings: Iterable[BindingType], keymap: Mapping[str, str] | None = None) -> list[KeyRow]:
    """The memframe bindings among `bindings` (one row per id and description), keymap applied."""
    remapped = full_keymap(keymap or {})
    out: dict[tuple[str, str], KeyRow] = {}
    keys_of: dict[tuple[str, str], list[str]] = {}
    for binding in Binding.make_bindings(bindings):
        if not (binding.id or "").startswith(PREFIX):
            continue
        assert binding.id is not None
        row_id = (binding.id, binding.description)
        keys = remapped.get(binding.id, binding.key)
        keys_of.setdefault(row_id, [])
        for key in keys.split(","):
            if key.strip() and key.strip() not in keys_of[row_id]:
                keys_of[row_id].append(key.strip())
        out[row_id] = KeyRow("", binding.description, binding.tooltip, binding.id)
    return [KeyRow(show_keys(",".join(keys_of[k])), r.description, r.tooltip, r.id) for k, r in out.items()]


def screens() -> list[tuple[str, list[BindingType]]]:
    """Every screen and dialog of the frame with its bindings, in the order a person meets them."""
    from memframe.tui.dialogs import ClearConflict, ConfirmClear, ConflictScreen, SaveDiscardCancel
    from memframe.tui.dialogs.confirm import ConfirmAction
    from memframe.tui.dialogs.forget import ForgetDialog
    from memframe.tui.dialogs.revert_conflict import RevertConflict
    from memframe.tui.screens.assistant import AssistantScreen
    from memframe.tui.screens.blame import BlameScreen
    from memframe.tui.screens.budget import BudgetScreen
    from memframe.tui.screens.changes import ChangesScreen
    from memframe.tui.screens.memory import MemoryScreen
    from memframe.tui.screens.mode import ModeSwitcher
    from memframe.tui.screens.proposals import ProposalsScreen
    from memframe.tui.widgets.editor import MemoryEditor

    return [
        ("Everywhere", list(APP_BINDINGS)),
        ("Memory (the editor)", [*MemoryScreen.BINDINGS, *MemoryEditor.BINDINGS]),
        ("Changes", list(ChangesScreen.BINDINGS)),
        ("Blame", list(BlameScreen.BINDINGS)),
        ("Budget", list(BudgetScreen.BINDINGS)),
        ("Assistant", list(AssistantScreen.BINDINGS)),
        ("Proposals", list(ProposalsScreen.BINDINGS)),
        ("Mode", list(ModeSwitcher.BINDINGS)),
        ("Unsaved changes", list(SaveDiscardCancel.BINDINGS)),
        *(
            (f"Conflict ({what})", _variant(ConflictScreen.BINDINGS, variant))
            for variant, what in (
                ("save", "a Save lost the race"),
                ("undo", "an Undo lost the race"),
                ("apply", "applying a proposal lost the race"),
            )
        ),
        ("Revert conflict", list(RevertConflict.BINDINGS)),
        ("Clear", list(ConfirmClear.BINDINGS)),
        ("Clear conflict", list(ClearConflict.BINDINGS)),
        ("Are you sure?", list(ConfirmAction.BINDINGS)),
        ("Forget / rotate the key", list(ForgetDialog.BINDINGS)),
        ("Help", list(HELP_BINDINGS)),
    ]


def _variant(bindings: Iterable[BindingType], variant: str) -> list[BindingType]:
    """The conflict view's keys for one variant (its bindings name their variant, see `check_action`)."""
    return [b for b in Binding.make_bindings(bindings) if "', '" not in b.action or f"'{variant}')" in b.action]


def every_key(keymap: Mapping[str, str] | None = None) -> list[tuple[str, list[KeyRow]]]:
    """The whole frame's keys, screen by screen, keymap applied."""
    return [(name, rows(bindings, keymap)) for name, bindings in screens()]


def meanings(keymap: Mapping[str, str] | None = None) -> dict[str, set[str]]:
    """Each key -> the things it does across the frame. One thing per key is the rule (a test holds it).

    `escape` is the one exception by design: it always means "back, changing nothing" (Back, Cancel,
    Close, Keep), which the test names explicitly.
    """
    found: dict[str, set[str]] = {}
    for _, key_rows in every_key(keymap):
        for row in key_rows:
            for key in row.keys.split(" / "):
                found.setdefault(key, set()).add(row.id.rsplit(".", 1)[-1])
    return found


def markdown_table(keymap: Mapping[str, str] | None = None) -> str:
    """The README's key table: one row per key and screen, with the binding id `[keymap]` remaps it by."""
    lines = ["| where | key | binding id | what it does |", "| --- | --- | --- | --- |"]
    for name, key_rows in every_key(keymap):
        for row in key_rows:
            what = row.description if not row.tooltip else f"{row.description}: {row.tooltip}"
            keys = " / ".join(f"`{k}`" for k in row.keys.split(" / "))
            lines.append(f"| {name} | {keys} | `{row.id.removeprefix(PREFIX)}` | {what} |")
    return "\n".join(lines)


#: The modifiers Textual reads in a key (`ctrl+shift+up`).
_MODIFIERS = frozenset({"ctrl", "shift", "alt", "meta", "super", "hyper"})
#: The keys Textual names that are not characters (`f9`, `escape`, `pageup`, ...).
_NAMED_KEYS = frozenset(key.value.rpartition("+")[2] for key in Keys if not key.value.startswith("<"))


def is_key(key: str) -> bool:
    """Whether Textual would ever press `key`: modifiers, then a named key or a character
    (`ctrl+s`, `f9`, `x`, `slash`); `ctrl-s` and `notakey` are not keys."""
    *modifiers, base = key.split("+")
    if not base or not _MODIFIERS.issuperset(modifiers):
        return False
    return base in _NAMED_KEYS or len(base) == 1 or key_to_character(REPLACED_KEYS.get(base, base)) is not None


def keymap_problem(keymap: Mapping[str, str]) -> str | None:
    """What is wrong with the settings file's `[keymap]`, in one line naming the binding id, or None.

    Each id must be a binding's, each key a key, and no key may do two things on one screen (the
    App's keys count on every screen): otherwise an action is left with no key while the hints
    still name one."""
    written = {(name if name.startswith(PREFIX) else PREFIX + name): name for name in keymap}
    remapped = full_keymap(keymap)
    every = screens()
    known = {b.id for _, bindings in every for b in Binding.make_bindings(bindings)}
    for full, name in written.items():
        if full not in known:
            return f"keymap.{name} names no binding (F1 lists every binding id)"
        keys = [key.strip() for key in remapped[full].split(",") if key.strip()]
        bad = next((key for key in keys if not is_key(key)), None) if keys else remapped[full]
        if bad is not None:
            return f'keymap.{name}: "{bad}" is not a key (keys are written like "ctrl+s", "f9" or "x")'
    for screen, bindings in every:
        doing: dict[str, Binding] = {}
        for binding in Binding.make_bindings(bindings if screen == "Everywhere" else [*APP_BINDINGS, *bindings]):
            for key in remapped.get(binding.id or "", binding.key).split(","):
                other = doing.setdefault(key.strip(), binding)
                if other.id != binding.id and (binding.id in written or other.id in written):
                    mine, theirs = (binding, other) if binding.id in written else (other, binding)
                    return (
                        f'keymap.{written[mine.id or ""]}: {key.strip()} already does "{theirs.description}" '
                        f"(binding id {(theirs.id or '').removeprefix(PREFIX)}) in {screen}"
                    )
    return None
