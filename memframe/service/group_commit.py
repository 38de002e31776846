"""Group commit: the batches waiting at the writer share one transaction and one fsync.

A durable commit costs an fsync, so a burst of Saves committed one by one waits in line for one
fsync each; committed together, each in its own savepoint so a failing batch rolls back alone, the
server answers far more Saves per second under load (the figure is in bench/results.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Generic, Protocol, TypeVar

from memframe.core.errors import Unavailable

T = TypeVar("T")


class Writer(Protocol):
    """What a group commits through: the database's one writer (`memframe.service.db.Database`)."""

    def write(self) -> AbstractContextManager[Any]: ...
    def next_savepoint(self, conn: Any) -> None: ...
    def is_storage_error(self, exc: BaseException) -> bool: ...


class _Ticket(Generic[T]):
    """One caller's batch, and how it ended; `turn` is set when it is done or its turn to lead."""

    __slots__ = ("done", "error", "result", "turn", "work")

    def __init__(self, work: Callable[[Any], T]) -> None:
        self.work = work
        self.turn = threading.Event()
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None


class GroupCommit:
    """Whoever finds no group being committed leads: it commits every batch queued at that moment in
    one `db.write()`, settles each, and hands the lead to the first batch queued meanwhile."""

    def __init__(self, db: Writer) -> None:
        self._db = db
        self._lock = threading.Lock()  # guards _queue and _leading
        self._queue: list[_Ticket[Any]] = []
        self._leading = False

    def run(self, work: Callable[[Any], T]) -> T:
        """`work(conn)` committed in a group; returns only after the group's COMMIT, or raises
        `work`'s own error (its savepoint rolled back) or the storage's (the whole group's)."""
        ticket: _Ticket[T] = _Ticket(work)
        with self._lock:
            self._queue.append(ticket)
            lead = not self._leading
            self._leading = True
        if not lead:
            ticket.turn.wait()
        if not ticket.done:
            self._lead()
        if ticket.error is not None:
            raise ticket.error
        return ticket.result  # type: ignore[return-value]

    def _lead(self) -> None:
        with self._lock:
            group, self._queue = self._queue, []
        try:
            self._commit(group)
        except BaseException:  # interrupted (Ctrl-C, exit): the others must not mistake silence for success
            for each in group:
                if each.error is None:
                    each.result = None
                    each.error = Unavailable("The memory store was interrupted; this may not have been saved.")
            raise
        finally:
            with self._lock:
                for each in group:
                    each.done = True
                after = self._queue[0] if self._queue else None
                if after is None:
                    self._leading = False
            if after is not None:
                after.turn.set()  # the next group's leader first: its fsync is the next one
            for each in group:
                each.turn.set()

    def _commit(self, group: list[_Ticket[Any]]) -> None:
        db = self._db
        try:
            with db.write() as conn:
                if len(group) == 1:  # alone, its failure is its transaction's: no savepoint needed
                    group[0].result = group[0].work(conn)
                    return
                conn.execute("SAVEPOINT together")
                for n, ticket in enumerate(group):
                    if n:
                        db.next_savepoint(conn)
                    try:
                        ticket.result = ticket.work(conn)
                    except Exception as exc:
                        if db.is_storage_error(exc):
                            raise  # the storage is failing: the whole group rolls back
                        conn.execute("ROLLBACK TO together")
                        ticket.error = exc
                conn.execute("RELEASE together")
        except Exception as exc:
            for ticket in group:  # nothing of the group was committed: each caller hears that first
                ticket.result = None
                ticket.error = exc if len(group) == 1 else _same_failure(exc)


def _same_failure(exc: Exception) -> Unavailable:
    """A copy of a group's failure for each caller (one exception object is not raised in many threads)."""
    message = str(exc) if isinstance(exc, Unavailable) else "The memory store could not save; nothing was written."
    copy = Unavailable(message)
    copy.__cause__ = exc
    return copy
