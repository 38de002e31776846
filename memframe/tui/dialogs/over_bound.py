"""The warning before a Save that takes the memory over the recall bound: Save anyway, or Back.

Such a memory is kept intact but withheld from recall until it is shortened, which a person would not
guess from a successful Save; so the frame says so first and writes only when they choose to.
"""

from __future__ import annotations

from memframe.core.types import MEMORY_RECALL_MAX_BYTES
from memframe.tui.dialogs.confirm import ConfirmAction


def over_bound(size: int, budget_key: str) -> ConfirmAction:
    """The question for a draft of `size` bytes; `budget_key` opens the bytes per section."""
    over = size - MEMORY_RECALL_MAX_BYTES
    body = (
        f"This draft is {over:,} bytes over the {MEMORY_RECALL_MAX_BYTES:,}-byte bound. Saved, it is kept intact, "
        f"but withheld from recall (the Assistant is not given it) until it is shortened. {budget_key} shows "
        "the bytes per section."
    )
    return ConfirmAction("Save over the bound?", body, "Save anyway")
