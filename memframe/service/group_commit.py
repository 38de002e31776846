"""Group commit: the batches waiting at the writer share one transaction and one fsync.

A durable commit costs an fsync, so a burst of Saves committed one by one waits in line for one
fsync each; committed together, each in its own savepoint so a failing batch rolls back alone, the
server answers far more Saves per second under load (the figure is in bench/results.md).

A caller on an event loop (the HTTP Save) awaits its batch instead of holding a thread for it: a
thread of the group's own leads the groups such batches start, and each group wakes each loop once.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from memframe.core.errors import Unavailable

if TYPE_CHECKING:
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

T = TypeVar("T")


class Writer(Protocol):
    """What a group commits through: the database's one writer (`memframe.service.db.Database`)."""

    def write(self) -> AbstractContextManager[Any]: ...
    def next_savepoint(self, conn: Any) -> None: ...
    def is_storage_error(self, exc: BaseException) -> bool: ...


class _Ticket(Generic[T]):
    """One caller's batch, and how it ended. A thread's `turn` is set when the batch is done or it is
    the thread's turn to lead; an event loop's caller never leads, and its `future` is set when done."""

    __slots__ = ("done", "error", "future", "result", "turn", "work")

    def __init__(self, work: Callable[[Any], T], future: asyncio.Future[None] | None = None) -> None:
        self.work = work
        self.future = future
        self.turn = threading.Event() if future is None else None
        self.done = False
        self.result: T | None = None
        self.error: BaseException | None = None


class GroupCommit:
    """Whoever finds no group being committed leads: it commits every batch queued at that moment in
    one `db.write()`, settles each, and hands the lead to the first batch queued meanwhile."""

    def __init__(self, db: Writer) -> None:
        self._db = db
        self._lock = threading.Lock()  # guards _queue, _leading, _leader and _closed
        self._queue: list[_Ticket[Any]] = []
        self._leading = False
        self._leader: ThreadPoolExecutor | None = None  # leads for event loops' batches, from the first
        self._closed = False

    def run(self, work: Callable[[Any], T]) -> T:
        """`work(conn)` committed in a group; returns only after the group's COMMIT, or raises
        `work`'s own error (its savepoint rolled back) or the storage's (the whole group's)."""
        ticket: _Ticket[T] = _Ticket(work)
        assert ticket.turn is not None
        if not self._enqueue(ticket):
            ticket.turn.wait()
        if not ticket.done:
            self._lead()
        return _outcome(ticket)

    async def run_async(self, work: Callable[[Any], T]) -> T:
        """`run(work)` for a caller on an event loop: the same queue and groups, with no thread of
        the caller's waiting for the COMMIT. Cancelling the wait does not withdraw the batch: like a
        thread's, it commits or fails whole, and its outcome goes unheard."""
        import asyncio  # here: `history -p` reads through this module, and starts without asyncio

        ticket: _Ticket[T] = _Ticket(work, asyncio.get_running_loop().create_future())
        assert ticket.future is not None
        if self._enqueue(ticket) and not self._lead_elsewhere():
            self._lead()  # closed: the caller leads, as a thread would
        await ticket.future
        return _outcome(ticket)

    def close(self) -> None:
        """Let the groups already handed to the leading thread commit, then end that thread; a batch
        from an event loop after this is led by its own caller."""
        with self._lock:
            self._closed, leader = True, self._leader
        if leader is not None:
            leader.shutdown(wait=True)

    def _enqueue(self, ticket: _Ticket[Any]) -> bool:
        """Queue `ticket`; True when no group is being committed, so someone must lead."""
        with self._lock:
            self._queue.append(ticket)
            lead = not self._leading
            self._leading = True
        return lead

    def _lead_elsewhere(self) -> bool:
        """Hand the next group to the group's own thread; False once closed (no thread to lead on)."""
        with self._lock:
            if self._closed:
                return False
            if self._leader is None:
                from concurrent.futures import ThreadPoolExecutor  # here: `history -p` starts without it

                self._leader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memframe-group-commit")
            leader = self._leader
        try:
            leader.submit(self._lead)
        except RuntimeError:  # closed since
            return False
        return True

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
            # The next group's leader first: its fsync is the next one.
            lead_here = False
            if after is not None and after.turn is not None:
                after.turn.set()
            elif after is not None:
                lead_here = not self._lead_elsewhere()
            _wake(group)
            if lead_here:
                self._lead()

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


def _outcome(ticket: _Ticket[T]) -> T:
    if ticket.error is not None:
        raise ticket.error
    return ticket.result  # type: ignore[return-value]


def _wake(group: list[_Ticket[Any]]) -> None:
    """Tell every caller of a settled group: each thread by its event, each event loop once."""
    loops: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
    for each in group:
        if each.turn is not None:
            each.turn.set()
        elif each.future is not None:
            loops.setdefault(each.future.get_loop(), []).append(each.future)
    for loop, futures in loops.items():
        with contextlib.suppress(RuntimeError):  # a loop already closed has no one waiting
            loop.call_soon_threadsafe(_settle, futures)


def _settle(futures: list[asyncio.Future[None]]) -> None:
    for future in futures:
        if not future.done():  # a cancelled wait
            future.set_result(None)


def _same_failure(exc: Exception) -> Unavailable:
    """A copy of a group's failure for each caller (one exception object is not raised in many threads)."""
    message = str(exc) if isinstance(exc, Unavailable) else "The memory store could not save; nothing was written."
    copy = Unavailable(message)
    copy.__cause__ = exc
    return copy
