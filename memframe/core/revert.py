"""Revert one change: the inverse of one version's edit applied onto today's text, as `git revert` does.

Undo restores a whole revision and wipes everything written since; reverting only what version N
changed keeps the later work. Where a later edit touched the same lines the result is a conflict
that names them, and nothing is to be written.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher


@dataclass(frozen=True)
class Conflict:
    """One change that cannot be undone cleanly: what the revert would remove (`removing`), what it
    would put back (`restoring`), and the current lines at that place (`current`, from line `line`,
    counting from 1)."""

    line: int
    removing: tuple[str, ...]
    restoring: tuple[str, ...]
    current: tuple[str, ...]


@dataclass(frozen=True)
class Reverted:
    """The text with the change undone, or the conflicts (then `text` is None: nothing to write, and
    `draft` is the current text with only the hunks that apply cleanly undone, for a person to finish)."""

    text: str | None
    conflicts: tuple[Conflict, ...] = ()
    draft: str = ""


def revert(before: str, after: str, current: str) -> Reverted:
    """Undo the change `before` -> `after` (version N-1's text -> version N's) on `current`.

    A three-way merge of (after -> before) onto current: what N wrote is taken out only where each
    of its lines is still there, unchanged and together; what N removed is put back beside a line
    that was its neighbour then and is still there. Any other hunk is a conflict, and then no text
    is returned at all. Unlike git, an edit on the next line is not a conflict: a memory is a list
    of short facts, and one fact edited beside another the revert touches is the usual case."""
    base = after.splitlines(keepends=True)
    theirs = before.splitlines(keepends=True)
    ours = current.splitlines(keepends=True)
    # Where each line of version N stands today, for the lines no later edit touched.
    at: dict[int, int] = {}
    for block in SequenceMatcher(None, base, ours, autojunk=False).get_matching_blocks():
        for k in range(block.size):
            at[block.a + k] = block.b + k
    edits: list[tuple[int, int, list[str]]] = []
    conflicts: list[Conflict] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, base, theirs, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        place = _place(at, i1, i2, len(base), len(ours))
        if place is None:
            start = next((at[k] + 1 for k in range(i1 - 1, -1, -1) if k in at), 0)
            end = next((at[k] for k in range(i2, len(base)) if k in at), len(ours))
            conflicts.append(
                Conflict(
                    line=start + 1,
                    removing=tuple(base[i1:i2]),
                    restoring=tuple(theirs[j1:j2]),
                    current=tuple(ours[start:end]),
                )
            )
            continue
        edits.append((place, place + (i2 - i1), theirs[j1:j2]))
    for start, end, lines in sorted(edits, reverse=True):
        ours[start:end] = lines
    if conflicts:
        return Reverted(None, tuple(conflicts), "".join(ours))
    return Reverted("".join(ours))


def _place(at: dict[int, int], i1: int, i2: int, base_len: int, ours_len: int) -> int | None:
    """Where version N's lines [i1, i2) stand today (all of them, still together), or for lines to
    put back (i1 == i2) the place beside a neighbour that is still there; None: a conflict."""
    if i1 < i2:
        first = at.get(i1)
        if first is None or any(at.get(k) != first + (k - i1) for k in range(i1, i2)):
            return None
        return first
    if i1 > 0 and i1 - 1 in at:
        return at[i1 - 1] + 1
    if i1 < base_len and i1 in at:
        return at[i1]
    return 0 if base_len == 0 and ours_len == 0 else None  # N emptied the memory: back only into an empty one
