"""Search the text of every revision, decrypted on this machine, newest first, a batch at a time.

The server holds only ciphertext, so a search cannot be a query: it reads the history in batches (one
transaction locally, one request remotely) on a worker thread, and reports after each batch so the
person sees it move, can cancel it, and keeps what was found so far.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from textual.message import Message
from textual.worker import get_current_worker

from memframe.backend.base import Backend
from memframe.tui import calls

#: Revisions a search decrypts between two progress reports (and two looks at "cancelled?").
SEARCH_BATCH = 50


class SearchProgress(Message, bubble=False):
    """A search has read `done` of `total` revisions; `found` are the versions (newest first) containing it."""

    def __init__(self, ticket: int, query: str, done: int, total: int, found: list[int], error: str | None = None,
                 finished: bool = False) -> None:  # fmt: skip
        super().__init__()
        self.ticket = ticket
        self.query = query
        self.done = done
        self.total = total
        self.found = found
        self.error = error
        self.finished = finished


def search_revisions(backend: Backend, query: str, newest: int, report: Callable[[int, list[int]], bool]) -> list[int]:
    """The versions (newest first) whose text contains `query`, ignoring case; decrypted here, batch by batch.

    `report(done, found)` runs after each batch; it returns False to stop (the person cancelled).
    Reads a batch at a time (one transaction locally, one request remotely), not a round trip per revision.
    """
    needle = query.casefold()
    found: list[int] = []
    done = 0
    for top in range(newest, 0, -SEARCH_BATCH):
        versions = list(range(top, max(0, top - SEARCH_BATCH), -1))
        texts = backend.read_revisions(versions)
        found.extend(v for v in versions if needle in texts.get(v, "").casefold())
        done += len(versions)
        if not report(done, list(found)):
            break
    return found


def search_job(backend: Backend, ticket: int, query: str, total: int, post: Callable[[Message], object]) -> None:
    """The body of a search's thread worker: posts `SearchProgress` after each batch and once at the end."""
    worker = get_current_worker()

    def report(done: int, found: list[int]) -> bool:
        if worker.is_cancelled:
            return False
        post(SearchProgress(ticket, query, done, total, found))
        return True

    try:
        found = search_revisions(backend, query, total, report)
    except Exception as exc:
        post(SearchProgress(ticket, query, 0, total, [], error=str(calls.as_error(exc)), finished=True))
        return
    if not worker.is_cancelled:
        post(SearchProgress(ticket, query, total, total, found, finished=True))


@dataclass
class RevisionSearch:
    """One search as the Changes title tells it: the query, the matches so far, whether it runs, its note.

    `cancel_key` and `next_key` are the keys the notes name (the keymap may have moved them).
    """

    query: str | None = None
    matches: list[int] = field(default_factory=list)
    running: bool = False
    note: str = ""

    def _next_hint(self, next_key: str) -> str:
        return f" · {next_key}: next" if self.matches else ""

    def start(self, query: str, total: int, cancel_key: str) -> None:
        self.query, self.matches, self.running = query, [], True
        self.note = f"searching “{query}”: 0 of {total:,} read ({cancel_key} cancels)"

    def progress(self, message: SearchProgress, cancel_key: str, next_key: str) -> bool:
        """Apply a report; True when it brings the first match (the cursor goes there)."""
        first = not self.matches and bool(message.found)
        self.matches = message.found
        count = f"{len(self.matches):,} revision" + (" contains it" if len(self.matches) == 1 else "s contain it")
        if message.error is not None:
            self.running = False
            self.note = f"search stopped: {message.error}"
        elif message.finished:
            self.running = False
            self.note = f"“{message.query}”: {count}{self._next_hint(next_key)}"
        else:
            self.note = (f"searching “{message.query}”: {message.done:,} of {message.total:,} read, "
                         f"{count} ({cancel_key} cancels)")  # fmt: skip
        return first

    def cancel(self, next_key: str) -> None:
        self.running = False
        found = f"{len(self.matches):,} found so far{self._next_hint(next_key)}"
        self.note = f"search for “{self.query}” cancelled; {found}"

    def next_match(self, current: int | None) -> int | None:
        """The next older match below `current` (wrapping to the newest), or None without matches."""
        if not self.matches:
            return None
        older = [v for v in self.matches if current is None or v < current]
        return older[0] if older else self.matches[0]
