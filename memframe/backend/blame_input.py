"""Blame's input, read through the Backend seam: every revision up to one, decrypted on this machine.

The frame's blame and `memframe blame` read it the same way, so it lives here once: a page of
history and its texts at a time, so a long history's texts are never all held at once.
"""

from __future__ import annotations

from collections.abc import Iterator

from memframe.backend.base import Backend
from memframe.core.blame import CaptureMessage, Revision
from memframe.core.types import Author

#: The largest history page a server gives: the history and its texts are read this many at a time.
PAGE = 1000


def revisions(backend: Backend, at: int, captures: dict[int, CaptureMessage]) -> Iterator[Revision]:
    """Versions 1..`at`, oldest first, each with who wrote it as blame names them (an Assistant
    capture by its conversation, when its origin is known) and, for an import, the file it came
    from (its source note opened here; one that does not open stops blame as the tampering it is)."""
    infos = []
    before: int | None = at + 1
    while before is not None and before > 1:
        page = backend.history(limit=PAGE, before=before)
        infos.extend(page)
        before = page[-1].version if len(page) == PAGE else None
    infos.reverse()
    for start in range(0, len(infos), PAGE):
        chunk = infos[start : start + PAGE]
        texts = backend.read_revisions([i.version for i in chunk])
        for i in chunk:
            origin = captures.get(i.version)
            who = origin.conversation_id if i.author is Author.ASSISTANT and origin is not None else i.actor
            source = None if i.source_note is None else backend.source_of(i)
            yield Revision(
                i.version, i.author, who, i.created_at, i.operation, texts[i.version], i.restored_from, source
            )
