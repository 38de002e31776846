"""The database: durable writes, one writer per process, numbered migrations, two engines.

The engine is chosen by what `memframe.service.engines.open_database(...)` is given: a path or
`sqlite:///path` opens the embedded SQLite file (the default, described below); `postgresql://…`
opens a PostgreSQL server through a psycopg connection pool (`memframe.service.pg`, which says how
its batches serialise). Either way the service sees the same API and writes the same SQL.

A contract "batch" is one SQLite transaction here: `write()` takes the process's write lock, then
`BEGIN IMMEDIATE`, so a transaction never waits on another writer of this process inside SQLite;
another process's writer (`serve --workers N` shares the file) is waited for by SQLite's own
busy handler. Every commit is `synchronous=FULL` in WAL mode: an acknowledged write survives a
crash or a power cut. The file and its `-wal` and `-shm` are readable by their owner only.
Batches from many threads share their commit (`group_commit`); records a read leaves behind are
written with the next batch (`write_soon`).
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from memframe.core.errors import InvalidInput, SchemaTooNew, Unavailable
from memframe.service import write_soon
from memframe.service.group_commit import GroupCommit
from memframe.service.write_soon import SoonRow, WriteSoon

Clock = Callable[[], float]
T = TypeVar("T")

#: How long a batch waits for another process's writer before the storage counts as failing.
LOCK_WAIT_SECONDS = 10.0
_MIGRATION_RE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(target: object) -> bool:
    """Whether `target` names a PostgreSQL server rather than a SQLite file."""
    return isinstance(target, str) and target.startswith(_POSTGRES_SCHEMES)


def sqlite_path(target: str | Path) -> Path:
    """The file a path or a SQLite URL names: `sqlite:///relative/path`, `sqlite:////absolute/path`."""
    if isinstance(target, str) and target.startswith("sqlite:"):
        if not target.startswith("sqlite:///") or target == "sqlite:///":
            raise InvalidInput("A SQLite URL is sqlite:///relative/path or sqlite:////absolute/path.")
        return Path(target.removeprefix("sqlite:///"))
    return Path(target)


def migrations() -> list[tuple[int, str, str]]:
    """The numbered migrations shipped with this memframe, in order (their neutral source text;
    `statements(sql, dialect)` turns one into the statements an engine runs)."""
    found = []
    folder = Path(__file__).with_name("migrations")  # installed as files beside this module
    if not folder.is_dir():
        from importlib import resources

        folder = resources.files("memframe.service.migrations")  # type: ignore[assignment]  # a Traversable
    for entry in folder.iterdir():
        match = _MIGRATION_RE.match(entry.name)
        if match:
            found.append((int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    return sorted(found)


#: What a NUL character in text gets, on every engine: PostgreSQL cannot store one in a TEXT column
#: (SQLite can), so both refuse it before the statement runs and behave alike.
NUL_IN_TEXT = "Text sent to memframe cannot contain a NUL character (\\x00); nothing was read or written."


def refuse_nul(params: Sequence[Any] | dict[str, Any]) -> None:
    """InvalidInput if any text among a statement's parameters holds a NUL character.

    Every name, id, label, key or path a person or a client sends reaches the database as a
    parameter, so this one check covers them all, on both engines, before either sees the value:
    a lookup by such a value and a write of one fail alike with one clear line, and nothing is
    written (the batch it was part of rolls back). Ciphertext is bytes and may hold any byte.
    """
    for value in params.values() if isinstance(params, dict) else params:
        if type(value) is str and "\x00" in value:
            raise InvalidInput(NUL_IN_TEXT)


class _Connection(sqlite3.Connection):
    """A SQLite connection that refuses NUL in text parameters, as the PostgreSQL engine does."""

    def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] = (), /) -> sqlite3.Cursor:  # type: ignore[override]
        if parameters:
            refuse_nul(parameters)
        return super().execute(sql, parameters)


def _connect(path: Path, *pragmas: str) -> sqlite3.Connection:
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=LOCK_WAIT_SECONDS, factory=_Connection
    )
    try:
        for pragma in ("foreign_keys = ON", "synchronous = FULL", *pragmas):
            conn.execute(f"PRAGMA {pragma}")
    except BaseException:
        conn.close()
        raise
    return conn


def create_private(path: Path) -> None:
    """Create the database file readable and writable by its owner only, if it does not exist yet.

    It holds every ciphertext, and SQLite gives the `-wal` and `-shm` files it makes beside it the
    database file's own permissions, so all three are private. An existing file keeps its mode.
    """
    with contextlib.suppress(FileExistsError):  # an existing file is opened as its owner left it
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


class Database:
    """One SQLite file, opened once: a writer connection and a reader per thread.

    `engines.open_database("postgresql://…")` gives a `memframe.service.pg.PostgresDatabase`
    instead: the same API over a PostgreSQL server.
    """

    #: Which statements of a migration this engine runs (see `memframe.service.migrations`).
    dialect = "sqlite"
    #: Reads are local: a snapshot of a file this process has open, never waiting on a writer (WAL)
    #: or a network. The HTTP layer runs such reads on its event loop, where a trip through the
    #: thread pool would cost more than the read; PostgreSQL's reads cross a network.
    local_reads = True
    #: What a constraint refusing a write (the fence's CHECK, a UNIQUE) raises on this engine.
    integrity_errors: tuple[type[Exception], ...] = (sqlite3.IntegrityError,)
    #: Every error of this engine's driver, and those among them that are not the storage failing:
    #: a constraint the caller judges (the fence's CHECK) or a programming mistake.
    driver_errors: tuple[type[Exception], ...] = (sqlite3.DatabaseError,)
    not_storage_errors: tuple[type[Exception], ...] = (sqlite3.IntegrityError, sqlite3.ProgrammingError)
    _SCHEMA_MIGRATIONS = (
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )

    def __init__(self, path: str | Path, *, clock: Clock = time.time) -> None:
        self._file = sqlite_path(path)
        #: The SQLite file (None on PostgreSQL, whose `url` says where it is).
        self.path: Path | None = self._file
        self.url = str(path)
        self.clock = clock
        self._init_state()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        try:
            self._file.parent.mkdir(parents=True, exist_ok=True)
            create_private(self._file)
            self._writer = _connect(self._file, "journal_mode = WAL")
        except (OSError, sqlite3.DatabaseError) as exc:
            raise Unavailable(f"Cannot open the database {self.path}: {exc}.") from exc
        try:
            self._migrate()
        except BaseException:
            self._writer.close()  # a failed open leaves no connection behind
            raise

    def _init_state(self) -> None:
        """What every engine keeps in this process: the write lock, the write_soon queue, the group."""
        self._lock = threading.Lock()
        self._soon = WriteSoon(self)
        self._group = GroupCommit(self)

    def is_storage_error(self, exc: BaseException) -> bool:
        """A driver error that is the storage failing (I/O, a full disk, a lost server, a lock held
        too long), as opposed to a constraint or a programming mistake."""
        return isinstance(exc, self.driver_errors) and not isinstance(exc, self.not_storage_errors)

    # --- schema ------------------------------------------------------------------------

    def _migrate(self) -> None:
        known = migrations()
        newest_known = known[-1][0] if known else 0
        with self.write() as conn:
            conn.execute(self._SCHEMA_MIGRATIONS)
            applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
            if applied and max(applied) > newest_known:
                raise SchemaTooNew(
                    f"The database {self.where()} was written by a newer memframe "
                    f"(schema {max(applied)}, this one knows {newest_known}); upgrade memframe."
                )
            for number, name, sql in known:
                if number in applied:
                    continue
                for statement in statements(sql, self.dialect):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (number, name, self.clock()),
                )

    def where(self) -> str:
        """The database as a person may be shown it (never a password)."""
        return str(self.path)

    def identity(self) -> str:
        """What tells this database from every other one: its file. A client keys what it has seen
        (`backend/heads.py`) on it, so two databases never share a record."""
        return str(self.path)

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
            soon: list[SoonRow] = []
            try:
                try:
                    # BEGIN is inside: whatever fails after it started (even BEGIN itself) rolls
                    # back here, so no failure can leave the writer inside a transaction.
                    conn.execute("BEGIN IMMEDIATE")
                    soon = self._soon.take(conn)
                    yield conn
                    conn.execute("COMMIT")
                    self._soon.settle()
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    self._soon.give_back(soon)
                    raise
            except sqlite3.DatabaseError as exc:
                if not self.is_storage_error(exc):
                    raise
                raise Unavailable(
                    "The memory store could not save (the disk may be full or failing); nothing was written."
                ) from exc

    @contextmanager
    def destroying(self) -> Iterator[None]:
        """Writes inside overwrite what they delete or replace with zeros (`secure_delete`), for a
        rotation that destroys old ciphertext; other writes do not pay for it."""
        with self._lock:
            self._writer.execute("PRAGMA secure_delete = ON")
        try:
            yield
        finally:
            with self._lock:
                self._writer.execute("PRAGMA secure_delete = OFF")

    def scrub(self) -> str:
        """Take bytes deleted or replaced off the disk: every page rewritten (VACUUM), then the WAL
        copied back and emptied (`wal_checkpoint(TRUNCATE)`, waiting for readers); says what was done."""
        with self._lock:
            self._writer.execute("VACUUM")
            busy = self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        if busy:
            return (
                f"The database {self.path} was rewritten, but another process was still reading it, so its"
                " -wal file may hold old pages until that process ends."
            )
        return f"The database {self.path} and its -wal were rewritten: the old bytes are in neither."

    def write_together(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work(conn)` in a group commit (`group_commit`): it commits or fails alone, and returns once committed."""
        return self._group.run(work)

    async def write_together_async(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`write_together(work)` awaited on an event loop, with no thread of its own waiting."""
        return await self._group.run_async(work)

    def next_savepoint(self, conn: Any) -> None:
        """Between two batches of a group: the first's savepoint released, the next one's taken."""
        conn.execute("RELEASE together")
        conn.execute("SAVEPOINT together")

    def write_soon(self, table: str, columns: tuple[str, ...], row: Sequence[Any]) -> None:
        """Queue one row to insert with this process's next batch (`write_soon`): the caller does not
        wait for an fsync, yet the row is durable before anything that follows it in this process.
        Only for rows that cannot conflict: a batch that fails a constraint is dropped with a warning."""
        self._soon.add(table, columns, row)

    def flush(self) -> None:
        """Commit every queued `write_soon` record now (readers of those records call this first).

        A record already taken by a batch that has not committed yet counts as queued: flush waits
        for that batch, through the writer lock, and commits whatever it gave back. So a read after
        flush sees every record queued before it.
        """
        if self._soon.pending():
            with self.write():
                pass

    def _close_queue(self) -> bool:
        """Stop the background batch and commit what is queued; False if already closed."""
        if not self._soon.close():
            return False
        self._group.close()
        try:
            self.flush()
        except Unavailable:
            write_soon.warn("%d queued record(s) could not be committed before closing", self._soon.queued())
        return True

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
            if not self.is_storage_error(exc):
                raise
            raise Unavailable("The memory store could not be read right now.") from exc

    def read_row(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first row of one statement (its own consistent snapshot in SQLite), or None."""
        try:
            return self._reader().execute(sql, params).fetchone()
        except sqlite3.DatabaseError as exc:
            if not self.is_storage_error(exc):
                raise
            raise Unavailable("The memory store could not be read right now.") from exc

    def _reader(self) -> sqlite3.Connection:
        """This thread's reader, opened on first use (a failed open is not kept)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = _connect(self._file, "query_only = ON")
            self._local.conn = conn
            with self._lock:
                self._readers.append(conn)
        return conn

    def close(self) -> None:
        if not self._close_queue():
            return
        with self._lock:
            for conn in self._readers:
                with contextlib.suppress(sqlite3.ProgrammingError):
                    conn.close()
            self._writer.close()


_ONLY_RE = re.compile(r"^--\s*only\s+(sqlite|postgresql)\s*$", re.MULTILINE)
#: How a neutral migration's types read on PostgreSQL (see `memframe.service.migrations`).
_POSTGRES_WORDS = [
    (re.compile(r"\bINTEGER PRIMARY KEY(?=\s*,|\s*$)"), "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
    (re.compile(r"\bBLOB\b"), "BYTEA"),
    (re.compile(r"\)\s*WITHOUT ROWID\s*$"), ")"),
]


def statements(sql: str, dialect: str = "sqlite") -> list[str]:
    """The statements of one migration file that `dialect` runs, as it runs them.

    Statements end with `;` at a line end (so a trigger or a function is written on one line).
    A statement headed by a comment line `-- only sqlite` or `-- only postgresql` is run by that
    engine alone; every other statement is neutral and both run it, PostgreSQL with the few
    type words of `_POSTGRES_WORDS` translated on its code lines (comments are left as written).
    """
    out = []
    for chunk in sql.split(";\n"):
        if not chunk.strip() or _only_comments(chunk):
            continue
        only = _ONLY_RE.search(chunk)
        if only is not None and only.group(1) != dialect:
            continue
        if dialect == "postgresql":
            chunk = "\n".join(_postgres_words(line) for line in chunk.splitlines())
        out.append(chunk.strip())
    return out


def _postgres_words(line: str) -> str:
    code, dashes, comment = line.partition("--")  # a trailing comment is left as written
    for pattern, replacement in _POSTGRES_WORDS:
        code = pattern.sub(replacement, code)
    return code + dashes + comment


def _only_comments(chunk: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in chunk.splitlines())
