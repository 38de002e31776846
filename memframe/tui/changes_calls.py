"""The Changes screen's reads as its worker threads run them: outcomes, never raises.

A page of the revision list, and two revisions' texts to diff, each decrypted once and shared by the
screen's workers. Like `calls`, a failure comes back as data. Apart from `calls` so that the frame's
first paint does not load what only Changes uses (its records are made when first imported).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from memframe.backend.base import Backend
from memframe.core.errors import MemframeError
from memframe.core.types import VersionInfo
from memframe.tui.calls import as_error, attempt


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
