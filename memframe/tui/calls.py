"""Backend calls as the frame's worker threads run them: never raising, always an outcome.

Each function here runs off the UI thread and returns a plain value that a
message carries back. A failure is data, not an exception, so no backend
error (offline, auth, conflict, a bug in a backend) can take the frame down
and the draft always survives. Nothing here retries: a refused write comes
back refused, with the newer server text for the person to look at.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from memframe.backend.base import Backend
from memframe.core.errors import MemframeError, ProposalNotMarked, Unavailable, VersionConflict
from memframe.core.types import MemoryDocument, MemoryHead, Mode, Policy, VersionInfo
from memframe.tui.state import WriteKind, WriteOutcome, WriteRequest

T = TypeVar("T")


def as_error(exc: BaseException) -> MemframeError:
    """Every failure becomes one of ours; an unknown one is reported, never raised."""
    if isinstance(exc, MemframeError):
        return exc
    return Unavailable(f"The backend failed unexpectedly ({type(exc).__name__}: {exc}); nothing was changed.")


def attempt(call: Callable[[], T]) -> tuple[T | None, MemframeError | None]:
    try:
        return call(), None
    except Exception as exc:
        return None, as_error(exc)


@dataclass(frozen=True)
class LoadOutcome:
    """The current document and policy, or why they could not be read."""

    doc: MemoryDocument | None
    policy: Policy | None
    error: MemframeError | None = None


def load(backend: Backend) -> LoadOutcome:
    doc, error = attempt(backend.load)
    if doc is None:
        return LoadOutcome(None, None, error)
    policy, error = attempt(backend.get_policy)
    return LoadOutcome(doc, policy, error)


@dataclass(frozen=True)
class HeadOutcome:
    """The server's head revision and policy (the frame's poll), or why they could not be read."""

    head: MemoryHead | None
    error: MemframeError | None = None


def head(backend: Backend) -> HeadOutcome:
    found, error = attempt(backend.head)
    return HeadOutcome(found, error)


def write(backend: Backend, request: WriteRequest) -> WriteOutcome:
    """One direct upload. On a conflict, also read the newer document so it can be shown."""
    text = request.text
    warning = ""
    try:
        if request.kind is WriteKind.SAVE:
            info = backend.save(text, request.base_version, revive=request.revive)
        elif request.kind is WriteKind.CLEAR:
            text = ""
            info = backend.clear(request.base_version)
        elif request.kind is WriteKind.APPLY:
            assert request.proposal is not None
            try:
                info = backend.apply_proposal(request.proposal.id, request.base_version)
            except ProposalNotMarked as exc:  # the Save landed: an outcome with its version and a warning
                info, warning = exc.info, str(exc)
            # The backend applied the edits to exactly `base_version`'s text, as `text` was computed;
            # reading the revision back makes the editor show what the server holds even so.
            applied = attempt(lambda: backend.read_revision(info.version))[0]
            text = text if applied is None else applied
        else:
            assert request.revision is not None
            text = backend.read_revision(request.revision)
            info = backend.undo(request.revision, request.base_version)
    except VersionConflict as exc:
        server, _ = attempt(backend.load)
        policy, _ = attempt(backend.get_policy)
        return WriteOutcome(request, text, error=exc, server=server, policy=policy)
    except Exception as exc:
        return WriteOutcome(request, text, error=as_error(exc))
    policy = attempt(backend.get_policy)[0] if request.kind is WriteKind.CLEAR else None
    return WriteOutcome(request, text, info=info, policy=policy, warning=warning)


@dataclass(frozen=True)
class ModeOutcome:
    """The policy after a compare-and-set, or the error (a PolicyConflict names the current mode)."""

    requested: Mode
    policy: Policy | None
    error: MemframeError | None = None


def set_mode(backend: Backend, mode: Mode, expected_revision: int) -> ModeOutcome:
    policy, error = attempt(lambda: backend.set_policy(mode, expected_revision))
    return ModeOutcome(mode, policy, error)


@dataclass(frozen=True)
class HistoryPage:
    """One page of revisions, newest first; `before` is the cursor it was asked with."""

    rows: list[VersionInfo]
    before: int | None
    limit: int
    error: MemframeError | None = None
    #: On the page that reaches the start of a history whose older versions were forgotten: the line
    #: saying so ("versions 1–(N−1) were forgotten on DATE by WHO").
    forgotten: str | None = None

    @property
    def last_page(self) -> bool:
        return self.error is None and len(self.rows) < self.limit


def history_page(backend: Backend, limit: int, before: int | None) -> HistoryPage:
    rows, error = attempt(lambda: backend.history(limit=limit, before=before))
    page = HistoryPage(rows or [], before, limit, error)
    if page.last_page and page.rows and page.rows[-1].version > 1:
        line, _ = attempt(backend.forgotten_line)
        return HistoryPage(page.rows, before, limit, None, line)
    return page


class RevisionTexts:
    """Decrypted revision texts, read once each; shared by the Changes screen's workers."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._lock = threading.Lock()
        self._texts: dict[int, str] = {}

    def get(self, version: int) -> str:
        """The text of `version`; version 0 (before the first revision) is empty."""
        if version < 1:
            return ""
        with self._lock:
            if version in self._texts:
                return self._texts[version]
        text = self._backend.read_revision(version)
        with self._lock:
            self._texts[version] = text
        return text


@dataclass(frozen=True)
class RevisionDiff:
    """Two texts to diff, labelled, or why one could not be read."""

    version: int
    against: str  # "previous" or "current"
    old_label: str
    new_label: str
    old: str = ""
    new: str = ""
    error: MemframeError | None = None


def revision_diff(
    texts: RevisionTexts, version: int, against: str, current_text: str, current_version: int
) -> RevisionDiff:
    """Revision `version` against the one before it, or the current saved text against it."""
    if against == "current":
        old_label, new_label = f"revision {version}", f"current (version {current_version})"
    else:
        old_label, new_label = f"revision {version - 1}" if version > 1 else "nothing", f"revision {version}"
    try:
        if against == "current":
            old, new = texts.get(version), current_text
        else:
            old, new = texts.get(version - 1), texts.get(version)
    except Exception as exc:
        return RevisionDiff(version, against, old_label, new_label, error=as_error(exc))
    return RevisionDiff(version, against, old_label, new_label, old, new)


def revision_text(texts: RevisionTexts, version: int) -> RevisionDiff:
    """Revision `version`'s whole text (in `new`), or why it could not be read."""
    try:
        return RevisionDiff(version, "text", "", f"revision {version}", "", texts.get(version))
    except Exception as exc:
        return RevisionDiff(version, "text", "", f"revision {version}", error=as_error(exc))
