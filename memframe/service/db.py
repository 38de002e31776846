"""The SQLite database: durable writes, one writer per process, numbered migrations.

A contract "batch" is one SQLite transaction here: `write()` takes the
process's write lock, then `BEGIN IMMEDIATE`, so a transaction never waits
on another writer of this process inside SQLite and `busy_timeout` is only a
backstop against other processes. Every commit is `synchronous=FULL` in WAL
mode: an acknowledged write survives a crash or a power cut.

Group commit. The fsync at COMMIT is most of a write's cost, so writers that
queue for the lock while one is running share its transaction: each runs
inside its own SAVEPOINT (a failure rolls back that writer's statements
only), the open transaction passes to the next writer in the queue, and the
last one commits for all. Every writer still returns only after the COMMIT
that made its batch durable, so nothing is acknowledged early; a storage
failure anywhere rolls the whole transaction back and every writer in it
gets Unavailable, so nothing is ever half-written. Without contention a
write is exactly BEGIN IMMEDIATE … COMMIT, as before.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from memframe.core.errors import MemframeError, Unavailable

Clock = Callable[[], float]
_MIGRATION_RE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class SchemaTooNew(MemframeError):
    """The database was written by a newer memframe."""

    code = "schema_too_new"
    status = 500


def migrations() -> list[tuple[int, str, str]]:
    """The numbered migrations shipped with this memframe, in order."""
    found = []
    for entry in resources.files("memframe.service.migrations").iterdir():
        match = _MIGRATION_RE.match(entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    return sorted(found)


#: Errors that are not the storage failing: a constraint the caller judges (the fence's
#: CHECK) or a programming mistake. Every other sqlite3.DatabaseError (I/O error, full
#: disk, a lock held too long, a damaged file) is the storage failing.
_NOT_STORAGE_ERRORS = (sqlite3.IntegrityError, sqlite3.ProgrammingError)


def _is_storage_error(exc: sqlite3.DatabaseError) -> bool:
    return not isinstance(exc, _NOT_STORAGE_ERRORS)


def _connect(path: Path, *pragmas: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)
    try:
        for pragma in ("busy_timeout = 10000", "foreign_keys = ON", "synchronous = FULL", *pragmas):
            conn.execute(f"PRAGMA {pragma}")
    except BaseException:
        conn.close()
        raise
    return conn


class Database:
    """One SQLite file, opened once: a writer connection and a reader per thread."""

    def __init__(self, path: str | Path, *, clock: Clock = time.time) -> None:
        self.path = Path(path)
        self.clock = clock
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._queue_lock = threading.Lock()
        self._queued = 0  # writers waiting for `_lock`
        self._batch: _Batch | None = None  # the transaction open on the writer, if handed on
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._closed = False
        try:
            self._writer = _connect(self.path, "journal_mode = WAL")
        except sqlite3.DatabaseError as exc:
            raise Unavailable(f"Cannot open the database {self.path}: {exc}.") from exc
        try:
            self._migrate()
        except BaseException:
            self._writer.close()  # a failed open leaves no connection behind
            raise

    # --- schema ------------------------------------------------------------------------

    def _migrate(self) -> None:
        known = migrations()
        newest_known = known[-1][0] if known else 0
        with self.write() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
            )
            applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
            if applied and max(applied) > newest_known:
                raise SchemaTooNew(
                    f"The database {self.path} was written by a newer memframe "
                    f"(schema {max(applied)}, this one knows {newest_known}); upgrade memframe."
                )
            for number, name, sql in known:
                if number in applied:
                    continue
                for statement in _statements(sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (number, name, self.clock()),
                )

    def schema_versions(self) -> list[tuple[int, str]]:
        with self.read() as conn:
            return [tuple(r) for r in conn.execute("SELECT version, name FROM schema_migrations ORDER BY version")]  # type: ignore[misc]

    # --- transactions ------------------------------------------------------------------

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One atomic batch: everything inside commits together or not at all.

        It may share its transaction with writers queued behind it (see the module
        docstring), but it returns only once that transaction has committed. A storage
        failure (a full disk, an I/O error, a lock held too long) rolls the whole
        transaction back and becomes one clear Unavailable; nothing is half-written.
        """
        with self._queue_lock:
            self._queued += 1
        self._lock.acquire()
        with self._queue_lock:
            self._queued -= 1
        conn = self._writer
        batch = self._batch
        failure: BaseException | None = None
        try:
            if batch is None:
                # BEGIN is inside: whatever fails after it started (even BEGIN itself) rolls
                # back below, so no failure can leave the writer inside a transaction.
                batch = self._batch = _Batch()
                conn.execute("BEGIN IMMEDIATE")
            conn.execute("SAVEPOINT writer")
            try:
                yield conn
            except BaseException as exc:
                if _is_storage(exc):
                    raise
                failure = exc
                conn.execute("ROLLBACK TO writer")  # this writer's statements only
            conn.execute("RELEASE writer")
        except BaseException as exc:
            self._abandon(batch, exc)  # the storage failed: the whole transaction goes
            if _is_storage(exc):
                raise _unavailable() from exc
            raise
        # A writer that saw earlier writers' uncommitted statements answers only once they are
        # durable: even a refusal (a version conflict) may describe them.
        saw_uncommitted = batch.members > 0
        if failure is None:
            batch.members += 1
        if self._queued and batch.members < MAX_BATCH_WRITERS:
            self._lock.release()  # the next writer joins this transaction; the last one commits it
            if failure is None or saw_uncommitted:
                batch.done.wait()
        elif batch.members:
            self._commit(batch)
        else:
            self._abandon(batch, None)  # nothing of anyone's to keep: roll back, no COMMIT
        if batch.error is not None and (failure is None or saw_uncommitted):
            raise _unavailable() from batch.error
        if failure is not None:
            raise failure

    def _commit(self, batch: _Batch) -> None:
        """COMMIT the shared transaction (the lock is held) and wake everyone in it."""
        try:
            self._writer.execute("COMMIT")
        except BaseException as exc:
            self._abandon(batch, exc)
            return
        self._batch = None
        batch.done.set()
        self._lock.release()

    def _abandon(self, batch: _Batch | None, error: BaseException | None) -> None:
        """Roll the whole open transaction back (the lock is held); everyone in it gets `error`."""
        try:
            if self._writer.in_transaction:
                self._writer.execute("ROLLBACK")
        finally:
            self._batch = None
            if batch is not None:
                batch.error = error
                batch.done.set()
            self._lock.release()

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A consistent snapshot on this thread's own connection (WAL readers never block)."""
        try:
            conn = self._reader()
            try:
                conn.execute("BEGIN")
                yield conn
            finally:
                if conn.in_transaction:  # ends the snapshot, even one a failed BEGIN or COMMIT left open
                    conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if not _is_storage_error(exc):
                raise
            raise Unavailable("The memory store could not be read right now.") from exc

    def _reader(self) -> sqlite3.Connection:
        """This thread's reader, opened on first use (a failed open is not kept)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = _connect(self.path, "query_only = ON")
            self._local.conn = conn
            with self._lock:
                self._readers.append(conn)
        return conn

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            for conn in self._readers:
                with contextlib.suppress(sqlite3.ProgrammingError):
                    conn.close()
            self._writer.close()


#: A batch commits once this many writers share it, so a long queue cannot delay the first of them.
MAX_BATCH_WRITERS = 32


class _Batch:
    """The transaction a queue of writers shares, and how its COMMIT went."""

    __slots__ = ("done", "error", "members")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.members = 0  # writers whose statements are in it, waiting for its COMMIT


def _is_storage(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.DatabaseError) and _is_storage_error(exc)


def _unavailable() -> Unavailable:
    return Unavailable("The memory store could not save (the disk may be full or failing); nothing was written.")


def _statements(sql: str) -> list[str]:
    """Split a migration file on `;` line ends; our migrations hold no triggers."""
    return [s.strip() for s in sql.split(";\n") if s.strip() and not _only_comments(s)]


def _only_comments(chunk: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in chunk.splitlines())
