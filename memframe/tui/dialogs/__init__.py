"""Typed modal dialogs: each dismisses with the person's decision, never with a side effect.

The screen that pushed a dialog acts on its answer, so the dialogs stay small
and every write still goes through the one flow that owns it.
"""

from memframe.tui.dialogs.clear_conflict import ClearConflict
from memframe.tui.dialogs.confirm_clear import ConfirmClear
from memframe.tui.dialogs.conflict import ConflictChoice, ConflictScreen
from memframe.tui.dialogs.save_discard_cancel import DraftChoice, SaveDiscardCancel

__all__ = [
    "ClearConflict",
    "ConfirmClear",
    "ConflictChoice",
    "ConflictScreen",
    "DraftChoice",
    "SaveDiscardCancel",
]
