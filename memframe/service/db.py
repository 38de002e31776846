"""The SQLite database: durable writes, one writer per process, numbered migrations.

A contract "batch" is one SQLite transaction here: `write()` takes the
process's write lock, then `BEGIN IMMEDIATE`, so a transaction never waits
on another writer of this process inside SQLite and `busy_timeout` is only a
backstop against other processes. Every commit is `synchronous=FULL` in WAL
mode: an acknowledged write survives a crash or a power cut.
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

        A storage failure (a full disk, an I/O error, a lock held too long) rolls the
        whole batch back and becomes one clear Unavailable; nothing is half-written.
        """
        with self._lock:
            conn = self._writer
            try:
                try:
                    # BEGIN is inside: whatever fails after it started (even BEGIN itself) rolls
                    # back here, so no failure can leave the writer inside a transaction.
                    conn.execute("BEGIN IMMEDIATE")
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.DatabaseError as exc:
                if not _is_storage_error(exc):
                    raise
                raise Unavailable(
                    "The memory store could not save (the disk may be full or failing); nothing was written."
                ) from exc

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


def _statements(sql: str) -> list[str]:
    """Split a migration file on `;` line ends; our migrations hold no triggers."""
    return [s.strip() for s in sql.split(";\n") if s.strip() and not _only_comments(s)]


def _only_comments(chunk: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in chunk.splitlines())
