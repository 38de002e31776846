"""Where every line of a memory came from: the version that introduced it, who wrote it, and when.

A person reviewing what is remembered needs to see, per line, whether they or the Assistant wrote it,
in which conversation, or from which file they imported it; the versions already carry that, so blame
is a walk over their decrypted texts on the client, oldest to newest, matching lines with difflib as
`git blame` does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any, NamedTuple

from memframe.core.types import Author, Operation


class Revision(NamedTuple):
    """One version as blame reads it: its metadata and decrypted text.

    `who` is what a person reads: the user name, or the conversation id of a capture;
    `restored_from` is the version an Undo or a revert took its text from; `source` the name of the
    file a person imported the version from (its sealed source note, opened on this machine).
    A named tuple, as a long history makes one per version and a tuple is the cheapest to make."""

    version: int
    author: Author
    who: str
    time: float
    operation: Operation
    text: str
    restored_from: int | None = None
    source: str | None = None


@dataclass(frozen=True)
class CaptureOrigin:
    """Where a capture came from, in ids only: its version, its admission, the person's conversation
    (as the client names it), and the place of the person's message in that conversation's
    transcript (`message_seq`, from 1; None if it was not stored)."""

    version: int
    admission_id: str
    conversation_id: str
    message_seq: int | None


@dataclass(frozen=True)
class CaptureMessage:
    """Why the Assistant wrote a capture: its conversation and admission, and the person's message
    that led to it, opened on this machine (None when it is not in the transcript)."""

    conversation_id: str
    admission_id: str
    message: str | None


@dataclass(frozen=True)
class BlameLine:
    """One line of the blamed text and the revision that introduced it (its `text` is the line)."""

    version: int
    author: Author
    who: str
    time: float
    operation: Operation
    text: str
    restored_from: int | None = None
    source: str | None = None

    @property
    def imported_from(self) -> str | None:
        """What blame's WHO says of a line a person imported from a file ("imported from NAME"), else None."""
        return None if self.source is None else f"imported from {self.source}"


def blame(revisions: Iterable[Revision]) -> list[BlameLine]:
    """The newest revision's lines, each attributed to the revision that introduced it.

    `revisions` run oldest to newest without gaps a person could have written in. A Clear (and a
    deletion) starts every line afresh; an Undo is attributed to the person who made it, with the
    version it restored from, like any other change. Lines keep their ends ("\\n"), so joining the
    texts gives the newest revision's text back."""
    seen: list[tuple[Any, ...]] = []  # (version, author, who, time, operation, restored_from, source): no texts
    last, last_plain = "", True  # the text of the revision last read, and whether newlines are its only line ends
    owners: list[int] = []  # per line of it, the index in `seen` of the revision that introduced it
    for rev in revisions:
        me = len(seen)
        seen.append(rev[:5] + rev[6:])
        if rev.operation in (Operation.CLEAR, Operation.DELETE) or not last:
            last, last_plain, owners = rev.text, _plain(rev.text), [me] * len(rev.text.splitlines())
            continue
        head, tail, old_mid, new_mid, plain = _changed(last, rev.text, len(owners), last_plain)
        mid: list[int] = []
        if old_mid and new_mid and (len(old_mid) > 1 or len(new_mid) > 1):
            for tag, i1, i2, j1, j2 in SequenceMatcher(None, old_mid, new_mid, autojunk=False).get_opcodes():
                mid.extend(owners[head + i1 : head + i2] if tag == "equal" else [me] * (j2 - j1))
        else:  # a pure insertion, deletion or one line replaced
            mid = [me] * len(new_mid)
        owners[head : len(owners) - tail] = mid
        last, last_plain = rev.text, plain
    texts = last.splitlines(keepends=True)
    return [
        BlameLine(r[0], r[1], r[2], r[3], r[4], text, r[5], r[6])
        for text, r in zip(texts, (seen[i] for i in owners), strict=True)
    ]


#: Line boundaries other than a newline that `str.splitlines` honours: a text with one is split line by line.
_ASCII_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e"
_OTHER_BREAKS = _ASCII_BREAKS + "\x85\u2028\u2029"


def _plain(text: str) -> bool:
    """Whether newlines are the text's only line boundaries."""
    return not any(c in text for c in (_ASCII_BREAKS if text.isascii() else _OTHER_BREAKS))


def _changed(old: str, new: str, lines: int, plain: bool) -> tuple[int, int, list[str], list[str], bool]:
    """(lines alike at the start, lines alike at the end, the old lines between, the new lines between,
    whether newlines are `new`'s only line boundaries); `old` has `lines` lines, and `plain` says the same of it.

    Most changes touch one place: the texts are compared as strings (in C) to find it, and only the
    lines around it are split, so a long history of one-line edits costs little more than reading it."""
    if plain:
        start = _alike_start(old, new)
        same = _alike_end(old, new, min(len(old), len(new)) - start)
        if _plain(new[start : len(new) - same]):  # the rest of `new` is `old`'s
            if start <= len(old) // 2:  # count the lines on the shorter side of the change
                head = old.count("\n", 0, start)
            else:
                head = lines - old.count("\n", start) - (start < len(old) and not old.endswith("\n"))
            old_mid = old[start : len(old) - same].splitlines(keepends=True)
            new_mid = new[start : len(new) - same].splitlines(keepends=True)
            return head, lines - head - len(old_mid), old_mid, new_mid, True
    return (*_changed_lines(old.splitlines(keepends=True), new.splitlines(keepends=True)), _plain(new))


def _changed_lines(old: list[str], new: list[str]) -> tuple[int, int, list[str], list[str]]:
    """`_changed` line by line, for texts with other line boundaries."""
    most = min(len(old), len(new))
    head = 0
    while head < most and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < most - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return head, tail, old[head : len(old) - tail], new[head : len(new) - tail]


#: Narrowed to this many characters with no line end among them, where a change begins or ends is
#: known to the line, which is all blame needs.
_WITHIN_A_LINE = 80


def _alike_start(a: str, b: str) -> int:
    """Where the first line that differs starts: the lines before it are alike, ends and all.

    A binary search of string comparisons for the first character that differs, stopped as soon as
    no line end is left in the range it can be in."""
    lo, hi = 0, min(len(a), len(b))  # the first difference is at lo..hi (hi: none before the shorter ends)
    while hi - lo > _WITHIN_A_LINE:
        mid = (lo + hi + 1) // 2
        if a.startswith(b[lo:mid], lo):
            lo = mid
        else:
            hi = mid - 1
    while (nl := a.rfind("\n", lo, hi)) >= 0:  # the last line end it can be after: is it?
        if a.startswith(b[lo : nl + 1], lo):
            return nl + 1
        hi = nl
    return a.rfind("\n", 0, lo) + 1


def _alike_end(a: str, b: str, most: int) -> int:
    """How many characters at the end of `a` and `b` (at most `most`) are whole lines alike in both.

    An edit usually changes a few dozen characters, so the alike end is looked for just past the
    change first (a gallop), then narrowed as `_alike_start` narrows the start."""
    la, lb = len(a), len(b)
    most = max(0, most)
    lo, hi, step = 0, most - 1, 64  # the alike end's length is lo..hi
    if a.endswith(b[lb - most :]):
        lo = hi = most
    while lo < hi and step < most:
        if a.endswith(b[lb - (most - step) :]):
            lo = most - step
            break
        hi, step = most - step - 1, step * 4
    while lo < hi:
        if hi - lo <= _WITHIN_A_LINE and hi < la and a.find("\n", la - hi - 1, la - lo) < 0:
            break  # it starts mid-line in `a` wherever in lo..hi it is
        mid = (lo + hi + 1) // 2
        if a.endswith(b[lb - mid : lb - lo], 0, la - lo):
            lo = mid
        else:
            hi = mid - 1
    at, other = la - lo, lb - lo
    if lo == hi and (at == 0 or a[at - 1] == "\n") and (other == 0 or b[other - 1] == "\n"):
        return lo
    nl = a.find("\n", at)  # it starts mid-line in one text: from the next line on
    return 0 if nl < 0 else la - nl - 1
