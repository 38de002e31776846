"""Where every line of a memory came from: the version that introduced it, who wrote it, and when.

A person reviewing what is remembered needs to see, per line, whether they or the Assistant wrote it,
and in which conversation; the versions already carry that, so blame is a walk over their decrypted
texts on the client, oldest to newest, matching lines with difflib as `git blame` does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from difflib import SequenceMatcher

from memframe.core.types import Author, Operation


@dataclass(frozen=True)
class Revision:
    """One version as blame reads it: its metadata and decrypted text.

    `who` is what a person reads: the user name, the conversation id of a capture, or
    "imported from NAME"; `restored_from` is the version an Undo or a revert took its text from."""

    version: int
    author: Author
    who: str
    time: float
    operation: Operation
    text: str
    restored_from: int | None = None


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


def blame(revisions: Iterable[Revision]) -> list[BlameLine]:
    """The newest revision's lines, each attributed to the revision that introduced it.

    `revisions` run oldest to newest without gaps a person could have written in. A Clear (and a
    deletion) starts every line afresh; an Undo is attributed to the person who made it, with the
    version it restored from, like any other change. Lines keep their ends ("\\n"), so joining the
    texts gives the newest revision's text back."""
    seen: list[Revision] = []
    texts: list[str] = []  # the lines of the revision last read
    owners: list[int] = []  # per line, the index in `seen` of the revision that introduced it
    for rev in revisions:
        me = len(seen)
        seen.append(rev)
        new = rev.text.splitlines(keepends=True)
        if rev.operation in (Operation.CLEAR, Operation.DELETE) or not texts:
            texts, owners = new, [me] * len(new)
            continue
        # Most changes touch one place: the lines before and after it are matched without difflib.
        most = min(len(texts), len(new))
        head = 0
        while head < most and texts[head] == new[head]:
            head += 1
        tail = 0
        while tail < most - head and texts[-1 - tail] == new[-1 - tail]:
            tail += 1
        old_mid, new_mid = texts[head : len(texts) - tail], new[head : len(new) - tail]
        mid: list[int] = []
        if old_mid and new_mid and (len(old_mid) > 1 or len(new_mid) > 1):
            for tag, i1, i2, j1, j2 in SequenceMatcher(None, old_mid, new_mid, autojunk=False).get_opcodes():
                mid.extend(owners[head + i1 : head + i2] if tag == "equal" else [me] * (j2 - j1))
        else:  # a pure insertion, deletion or one line replaced
            mid = [me] * len(new_mid)
        owners = owners[:head] + mid + owners[len(owners) - tail :]
        texts = new
    return [
        BlameLine(r.version, r.author, r.who, r.time, r.operation, text, r.restored_from)
        for text, r in zip(texts, (seen[i] for i in owners), strict=True)
    ]
