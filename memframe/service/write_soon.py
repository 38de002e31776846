"""Records written soon: what a read leaves behind (a recall's receipt) rides in the next write.

A recall answers in a fraction of the time an fsync takes, so a receipt committed on its own would
make every recall wait for the disk many times over; queued instead, it is inserted first in the
next batch of this process (or a background batch moments later), so nothing that follows the read
can become durable before its receipt.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Protocol

from memframe.core.errors import Unavailable


def warn(message: str, *args: object) -> None:
    """A warning in this module's log; `logging` is imported here, when one is due, as reading
    commands (`history -p`) never warn and would otherwise pay for it at start-up."""
    import logging

    logging.getLogger(__name__).warning(message, *args)


#: How long the background batch gathers queued records before committing them together, and how
#: long it waits before trying again after the storage failed.
GATHER_SECONDS = 0.005
RETRY_SECONDS = 0.5
#: Rows per multi-row INSERT of queued rows (well under SQLite's limit on bound parameters).
_ROWS_PER_INSERT = 200
#: A queued row: (table, columns, values).
SoonRow = tuple[str, tuple[str, ...], Sequence[Any]]


class Flushing(Protocol):
    """The database whose records these are (`memframe.service.db.Database`)."""

    not_storage_errors: tuple[type[Exception], ...]

    def flush(self) -> None: ...


class WriteSoon:
    """The queue of one database's records, the background batch that commits them, and what
    every `db.write()` does with them (`take` them first, then `settle` or `give_back`)."""

    def __init__(self, db: Flushing) -> None:
        self._db = db
        self._rows: list[SoonRow] = []  # queued, not yet taken by a batch
        self._taken = False  # a batch holds rows it has not committed yet
        self._closed = False
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._flusher: threading.Thread | None = None

    def add(self, table: str, columns: tuple[str, ...], row: Sequence[Any]) -> None:
        """Queue one row (only rows that cannot conflict: a batch failing a constraint is dropped)."""
        with self._lock:
            if self._closed:
                raise Unavailable("The memory store is closed.")
            wake = not self._rows
            self._rows.append((table, columns, row))
            if self._flusher is None:
                self._flusher = threading.Thread(target=self._flush_loop, name="memframe-write-soon", daemon=True)
                self._flusher.start()
        if wake:
            self._wake.set()

    def pending(self) -> bool:
        """Rows queued, or taken by a batch that has not committed them yet."""
        with self._lock:
            return bool(self._rows) or self._taken

    def take(self, conn: Any) -> list[SoonRow]:
        """Insert the queued rows inside the batch just begun; returned so a rollback can give them back.
        Rows of one table go in with one multi-row INSERT, in the order queued."""
        with self._lock:
            rows, self._rows = self._rows, []
            self._taken = bool(rows)
        if not rows:
            return rows
        conn.execute("SAVEPOINT soon")
        try:
            grouped: dict[tuple[str, tuple[str, ...]], list[Sequence[Any]]] = {}
            for table, columns, row in rows:
                grouped.setdefault((table, columns), []).append(row)
            for (table, columns), values in grouped.items():
                one = "(" + ", ".join("?" * len(columns)) + ")"
                for start in range(0, len(values), _ROWS_PER_INSERT):
                    chunk = values[start : start + _ROWS_PER_INSERT]
                    conn.execute(
                        f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join([one] * len(chunk))}",
                        [value for row in chunk for value in row],
                    )
        except self._db.not_storage_errors as exc:
            conn.execute("ROLLBACK TO soon")
            warn("dropped %d queued record(s) that no longer fit the schema: %s", len(rows), type(exc).__name__)
            rows = []
        conn.execute("RELEASE soon")
        return rows

    def settle(self) -> None:
        """The batch that took the rows has committed them."""
        with self._lock:
            self._taken = False

    def give_back(self, rows: list[SoonRow]) -> None:
        """The batch that took `rows` rolled back: they are queued again, first."""
        with self._lock:
            self._rows[:0] = rows
            self._taken = False
        if rows:
            self._wake.set()  # the background batch tries them again

    def close(self) -> bool:
        """Stop the background batch (what is queued stays for the caller's last flush); False if
        already closed."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
            flusher = self._flusher
        self._closing.set()
        self._wake.set()
        if flusher is not None:
            flusher.join()
        return True

    def queued(self) -> int:
        with self._lock:
            return len(self._rows)

    def _flush_loop(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            # Gather a burst of reads into one fsync; closing interrupts, and close() commits the rest.
            if self._closing.wait(GATHER_SECONDS):
                return
            try:
                self._db.flush()
            except Exception as exc:  # the storage failing: keep the records and try again later
                warn("queued records not yet committed: %s", type(exc).__name__)
                self._wake.set()
                if self._closing.wait(RETRY_SECONDS):
                    return
