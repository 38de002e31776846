"""Blame, revert and a conversation's receipts as the frame's worker threads compute them: outcomes, never raises.

Blame and revert are computed here, on this machine, from the decrypted versions (`core.blame`,
`core.revert`); the server is asked for versions and ids only. Like `calls`, a failure comes back as
data, so no backend error can take the frame down.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memframe.backend.base import Backend
from memframe.backend.blame_input import revisions
from memframe.core.blame import BlameLine, CaptureMessage, blame
from memframe.core.errors import MemframeError
from memframe.core.revert import Reverted, revert
from memframe.core.turns import Receipt
from memframe.tui.calls import as_error
from memframe.tui.changes_calls import RevisionTexts


@dataclass(frozen=True)
class BlameOutcome:
    """Revision `at` line by line, with why the Assistant wrote each capture, or why it could not be read."""

    at: int
    lines: list[BlameLine] = field(default_factory=list)
    captures: dict[int, CaptureMessage] = field(default_factory=dict)
    error: MemframeError | None = None


def blame_at(backend: Backend, at: int) -> BlameOutcome:
    """Blame revision `at` (the whole history up to it is read and decrypted here)."""
    try:
        captures = backend.capture_messages()
        return BlameOutcome(at, blame(revisions(backend, at, captures)), captures)
    except Exception as exc:
        return BlameOutcome(at, error=as_error(exc))


@dataclass(frozen=True)
class RevertOutcome:
    """Version `revision`'s change undone on the text of `base_version`, or why it could not be computed."""

    revision: int
    base_version: int
    current: str
    reverted: Reverted | None = None
    error: MemframeError | None = None
    #: The change being reverted: the text before `revision` and its own.
    before: str = ""
    after: str = ""


def revert_on(texts: RevisionTexts, revision: int, current: str, base_version: int) -> RevertOutcome:
    """The inverse of `revision`'s change (its text against the one before it) applied onto `current`."""
    try:
        before, after = texts.get(revision - 1), texts.get(revision)
        reverted = revert(before, after, current)
    except Exception as exc:
        return RevertOutcome(revision, base_version, current, error=as_error(exc))
    return RevertOutcome(revision, base_version, current, reverted, before=before, after=after)


@dataclass(frozen=True)
class ReceiptsOutcome:
    """A conversation's receipts (ids and versions only), or why they could not be read."""

    conversation_id: str
    receipts: list[Receipt] = field(default_factory=list)
    error: MemframeError | None = None


def receipts(backend: Backend, conversation_id: str) -> ReceiptsOutcome:
    try:
        return ReceiptsOutcome(conversation_id, backend.receipts(conversation_id))
    except Exception as exc:
        return ReceiptsOutcome(conversation_id, error=as_error(exc))
