"""The database: durable writes, one writer per process, numbered migrations, two engines.

The engine is chosen by what `memframe.service.engines.open_database(...)` is given: a path or
`sqlite:///path` opens the embedded SQLite file (the default, described below); `postgresql://…` opens a PostgreSQL
server through a psycopg connection pool (`memframe.service.pg`, which says how its batches
serialise). Either way the service sees the same API and writes the same SQL.

A contract "batch" is one SQLite transaction here: `write()` takes the
process's write lock, then `BEGIN IMMEDIATE`, so a transaction never waits
on another writer of this process inside SQLite. Another process's writer
(`serve --workers N` shares the file) is waited for by `_begin_immediate`,
which tries again within a millisecond of the lock's release: SQLite's own
busy handler sleeps 1, 2, 5 … up to 100 ms between tries, and two workers'
group commits, each starting its next batch the moment it commits, kept the
other waiting through those sleeps (p99 of a Save ~106 ms with two processes
against 2 ms with one). Every commit is `synchronous=FULL` in WAL mode: an
acknowledged write survives a crash or a power cut.

Records that merely note what a read saw (recall receipts) go through
`write_soon`: they ride in the next batch of this process, or a background
batch a few milliseconds later, so a read does not wait for an fsync while
nothing that follows it can become durable before it.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from memframe.core.errors import InvalidInput, SchemaTooNew, Unavailable

if TYPE_CHECKING:
    import asyncio

Clock = Callable[[], float]
T = TypeVar("T")
log = logging.getLogger(__name__)

#: How long the background flusher gathers `write_soon` records before committing them
#: together, and how long it waits before trying again after the storage failed.
GATHER_SECONDS = 0.005
RETRY_SECONDS = 0.5
#: How long a batch waits for another process's writer before the storage counts as failing, and the
#: longest pause between two tries at the lock.
LOCK_WAIT_SECONDS = 10.0
_LOCK_RETRY_MAX = 0.0002
#: Rows per multi-row INSERT of queued rows (well under SQLite's limit on bound parameters).
_ROWS_PER_INSERT = 200
#: A `write_soon` row: (table, columns, values).
_SoonRow = tuple[str, tuple[str, ...], Sequence[Any]]
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
    folder = Path(__file__).with_name("migrations")  # installed as files: no importlib.resources (~4 ms at start)
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
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0, factory=_Connection)
    try:
        for pragma in ("busy_timeout = 10000", "foreign_keys = ON", "synchronous = FULL", *pragmas):
            conn.execute(f"PRAGMA {pragma}")
    except BaseException:
        conn.close()
        raise
    return conn


class Database:
    """One SQLite file, opened once: a writer connection and a reader per thread.

    `engines.open_database("postgresql://…")` gives a `memframe.service.pg.PostgresDatabase`
    instead: the same API over a PostgreSQL server.
    """

    #: Which statements of a migration this engine runs (see `memframe.service.migrations`).
    dialect = "sqlite"
    #: Reads are local: a snapshot of a file this process has open, answered in microseconds and never
    #: waiting on a writer (WAL) or a network. The HTTP layer runs such reads on its event loop, where a
    #: trip through the thread pool would cost more than the read; PostgreSQL's reads cross a network.
    local_reads = True
    #: What a constraint refusing a write (the fence's CHECK, a UNIQUE) raises on this engine.
    integrity_errors: tuple[type[Exception], ...] = (sqlite3.IntegrityError,)
    #: Every error of this engine's driver, and those among them that are not the storage failing:
    #: a constraint the caller judges (the fence's CHECK) or a programming mistake.
    _driver_errors: tuple[type[Exception], ...] = (sqlite3.DatabaseError,)
    _not_storage_errors: tuple[type[Exception], ...] = (sqlite3.IntegrityError, sqlite3.ProgrammingError)
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
        self._file.parent.mkdir(parents=True, exist_ok=True)
        self._init_state()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        try:
            self._writer = _connect(self._file, "journal_mode = WAL")
            self._writer.execute("PRAGMA busy_timeout = 0")  # its one wait for a lock is _begin_immediate's
        except sqlite3.DatabaseError as exc:
            raise Unavailable(f"Cannot open the database {self.path}: {exc}.") from exc
        try:
            self._migrate()
        except BaseException:
            self._writer.close()  # a failed open leaves no connection behind
            raise

    def _init_state(self) -> None:
        """What every engine keeps in this process: the write lock, the write_soon queue, the group."""
        self._lock = threading.Lock()
        self._closed = False
        self._soon: list[_SoonRow] = []  # write_soon rows not yet committed
        self._soon_taken = False  # a batch holds write_soon rows it has not committed yet
        self._soon_lock = threading.Lock()
        self._soon_wake = threading.Event()
        self._closing = threading.Event()
        self._flusher: threading.Thread | None = None
        self._together = threading.Lock()  # guards _queue and _leading (write_together)
        self._queue: list[_Ticket] = []
        self._leading = False
        self._committer: threading.Thread | None = None  # leads groups for event loops' batches
        self._committer_lock = threading.Lock()
        self._commit_wanted = threading.Event()
        self._stop_committer = False

    def _is_storage_error(self, exc: BaseException) -> bool:
        """A driver error that is the storage failing (I/O, a full disk, a lost server, a lock held
        too long), as opposed to a constraint or a programming mistake."""
        return isinstance(exc, self._driver_errors) and not isinstance(exc, self._not_storage_errors)

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
            soon: list[_SoonRow] = []
            try:
                try:
                    # BEGIN is inside: whatever fails after it started (even BEGIN itself) rolls
                    # back here, so no failure can leave the writer inside a transaction.
                    _begin_immediate(conn)
                    soon = self._take_soon(conn)
                    yield conn
                    conn.execute("COMMIT")
                    self._settle_soon()
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    self._give_back_soon(soon)
                    raise
            except sqlite3.DatabaseError as exc:
                if not self._is_storage_error(exc):
                    raise
                raise Unavailable(
                    "The memory store could not save (the disk may be full or failing); nothing was written."
                ) from exc

    def write_together(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work(conn)` as one atomic batch that may share its transaction, and its fsync, with
        other threads' batches (group commit).

        Whoever finds no batch being committed commits everything queued at that moment in one
        `write()`, each batch inside its own savepoint: a batch that raises rolls back alone and
        its caller gets the error; a storage failure fails them all. Every caller returns only
        after the shared COMMIT, so an acknowledged batch is exactly as durable as with `write()`;
        the writer lock is held for one fsync per group instead of one per batch.
        """
        wake = _Wake()  # set when done, or when it is this ticket's turn to lead
        ticket = _Ticket(work, wake=wake)
        if self._enqueue(ticket):
            self._lead()
        else:
            wake.wait()  # until a leader committed it, or handed the lead to it
            if not ticket.done:
                self._lead()
        if ticket.error is not None:
            raise ticket.error
        return ticket.result  # type: ignore[return-value]

    async def write_together_async(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`write_together(work)` for a caller on an event loop, without a thread of its own.

        The batch joins the same queue and the same groups as the threads' batches; when no one
        is committing, this database's committer thread leads in its place. The caller's task
        waits on a future the group settles after its COMMIT, and one wake-up of the loop
        settles every batch of that group that loop is waiting for: a burst of Saves from one
        event loop costs no thread hand-off per Save. Cancelling the wait does not withdraw the
        batch (like a thread's, it commits or fails whole; its answer goes nowhere).
        """
        import asyncio  # only a server awaits batches: a command that reads and exits never loads it

        future = asyncio.get_running_loop().create_future()
        ticket = _Ticket(work, future)
        if self._enqueue(ticket):
            self._hand_to_committer()
        await future
        if ticket.error is not None:
            raise ticket.error
        return ticket.result  # type: ignore[return-value]

    def _enqueue(self, ticket: _Ticket) -> bool:
        """Queue `ticket`; True when no one is committing, so its caller must lead."""
        with self._together:
            self._queue.append(ticket)
            lead = not self._leading
            self._leading = True
        return lead

    def _lead(self) -> None:
        """Commit everything queued now as one group, settle each batch, then hand the lead on."""
        with self._together:
            group, self._queue = self._queue, []
        try:
            self._commit_together(group)
        except BaseException:  # interrupted (Ctrl-C, exit): the others must not mistake silence for success
            for each in group:
                if each.error is None:
                    each.result = None
                    each.error = Unavailable("The memory store was interrupted; this may not have been saved.")
            raise
        finally:
            settle: dict[asyncio.AbstractEventLoop, list[_Ticket]] = {}
            woken: list[_Wake] = []
            with self._together:
                for each in group:
                    each.done = True
                    if each.wake is not None:
                        woken.append(each.wake)
                    elif each.future is not None:
                        settle.setdefault(each.future.get_loop(), []).append(each)
                after = self._queue[0] if self._queue else None
                if after is None:
                    self._leading = False
            # The next in line commits whatever queued meanwhile: its own thread, or the committer.
            # Woken first: its group is the next fsync, and every wake-up after it is one more on
            # two busy cores (each caller's answer is already settled above; it only reads it).
            try:
                if after is not None and after.wake is not None:
                    after.wake.set()
                elif after is not None:
                    self._hand_to_committer()  # can raise (no thread to start): the group is still woken
            finally:
                for wake in woken:
                    wake.set()
            for loop, tickets in settle.items():
                with contextlib.suppress(RuntimeError):  # a loop already closed has no one waiting
                    loop.call_soon_threadsafe(_settle_futures, tickets)

    def _hand_to_committer(self) -> None:
        """Have the committer thread lead the next group (started on first use).

        Once the database is closing there is no committer: the caller leads, and the group
        commits or fails (on a closed database) here."""
        with self._committer_lock:
            closing = self._stop_committer
            if not closing and self._committer is None:
                self._committer = threading.Thread(target=self._commit_loop, name="memframe-commit", daemon=True)
                self._committer.start()
        if closing:
            self._lead()
        else:
            self._commit_wanted.set()

    def _commit_loop(self) -> None:
        """The committer thread: leads a group whenever an event loop's batch found no one leading."""
        while True:
            self._commit_wanted.wait()
            self._commit_wanted.clear()
            with self._committer_lock:
                stopping = self._stop_committer
            with self._together:
                wanted = bool(self._queue)
            if wanted:
                self._lead()
            if stopping:
                return

    def _stop_commit_loop(self) -> None:
        """Let the committer lead what is queued, then end it (closing)."""
        with self._committer_lock:
            self._stop_committer = True
            committer = self._committer
        self._commit_wanted.set()
        if committer is not None:
            committer.join()

    def _commit_together(self, group: list[_Ticket]) -> None:
        try:
            with self.write() as conn:
                if len(group) == 1:  # alone, its failure is its transaction's: no savepoint needed
                    group[0].result = group[0].work(conn)
                    return
                conn.execute("SAVEPOINT together")
                for n, ticket in enumerate(group):
                    if n:
                        self._next_ticket(conn)
                    try:
                        ticket.result = ticket.work(conn)
                    except self._driver_errors as exc:
                        if self._is_storage_error(exc):
                            raise  # the storage is failing: the whole group rolls back
                        conn.execute("ROLLBACK TO together")
                        ticket.error = exc
                    except Exception as exc:
                        conn.execute("ROLLBACK TO together")
                        ticket.error = exc
                conn.execute("RELEASE together")
        except Exception as exc:
            for ticket in group:  # nothing of the group was committed: each caller hears that first
                ticket.result = None
                ticket.error = exc if len(group) == 1 else _same_failure(exc)

    def _next_ticket(self, conn: sqlite3.Connection) -> None:
        """Between two batches of a group: the first's savepoint released, the next one's taken
        (PostgreSQL sends both in one round trip)."""
        conn.execute("RELEASE together")
        conn.execute("SAVEPOINT together")

    def write_soon(self, table: str, columns: tuple[str, ...], row: Sequence[Any]) -> None:
        """Queue one row to insert soon instead of now.

        For records a read leaves behind (a recall's receipt): the caller does not wait for
        an fsync, yet the row is durable before anything that follows it in this process,
        because every `write()` inserts the queue first in its own batch; a background batch
        inserts it within a few milliseconds otherwise, and `flush()` or `close()` on demand.
        Rows queued for one table go in with one multi-row INSERT (one statement for a burst
        of reads, not one each), in the order queued. Only for rows that cannot conflict: a
        batch that fails a constraint is dropped with a warning, not retried forever.
        """
        with self._soon_lock:
            if self._closed:
                raise Unavailable("The memory store is closed.")
            wake = not self._soon
            self._soon.append((table, columns, row))
            if self._flusher is None:
                self._flusher = threading.Thread(target=self._flush_loop, name="memframe-write-soon", daemon=True)
                self._flusher.start()
        if wake:
            self._soon_wake.set()

    def _close_queue(self) -> bool:
        """Stop the background batch and commit what is queued; False if already closed."""
        with self._soon_lock:
            if self._closed:
                return False
            self._closed = True
            flusher = self._flusher
        self._stop_commit_loop()
        self._closing.set()
        self._soon_wake.set()
        if flusher is not None:
            flusher.join()
        try:
            self.flush()
        except Unavailable:
            log.warning("%d queued record(s) could not be committed before closing", len(self._soon))
        return True

    def flush(self) -> None:
        """Commit every queued `write_soon` record now (readers of those records call this first).

        A record already taken by a batch that has not committed yet (the background batch, or
        any write) counts as queued: flush waits for that batch, through the writer lock, and
        commits whatever it gave back. So a read after flush sees every record queued before it.
        """
        with self._soon_lock:
            pending = bool(self._soon) or self._soon_taken
        if pending:
            with self.write():
                pass

    def _take_soon(self, conn: sqlite3.Connection) -> list[_SoonRow]:
        """Run the queued records inside the batch just begun; returned so a rollback can give them back."""
        with self._soon_lock:
            soon, self._soon = self._soon, []
            self._soon_taken = bool(soon)
        if not soon:
            return soon
        conn.execute("SAVEPOINT soon")
        try:
            grouped: dict[tuple[str, tuple[str, ...]], list[Sequence[Any]]] = {}
            for table, columns, row in soon:
                grouped.setdefault((table, columns), []).append(row)
            for (table, columns), rows in grouped.items():
                one = "(" + ", ".join("?" * len(columns)) + ")"
                for start in range(0, len(rows), _ROWS_PER_INSERT):
                    chunk = rows[start : start + _ROWS_PER_INSERT]
                    conn.execute(
                        f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join([one] * len(chunk))}",
                        [value for row in chunk for value in row],
                    )
        except self._not_storage_errors as exc:
            conn.execute("ROLLBACK TO soon")
            log.warning("dropped %d queued record(s) that no longer fit the schema: %s", len(soon), type(exc).__name__)
            soon = []
        conn.execute("RELEASE soon")
        return soon

    def _settle_soon(self) -> None:
        """The batch that took queued records has committed them."""
        with self._soon_lock:
            self._soon_taken = False

    def _give_back_soon(self, soon: list[_SoonRow]) -> None:
        with self._soon_lock:
            self._soon[:0] = soon
            self._soon_taken = False
        if soon:
            self._soon_wake.set()  # the background batch tries them again

    def _flush_loop(self) -> None:
        while True:
            self._soon_wake.wait()
            self._soon_wake.clear()
            # Gather a burst of reads into one fsync; closing interrupts, and close() commits the rest.
            if self._closing.wait(GATHER_SECONDS):
                return
            try:
                self.flush()
            except Exception as exc:  # the storage failing: keep the records and try again later
                log.warning("queued records not yet committed: %s", type(exc).__name__)
                self._soon_wake.set()
                if self._closing.wait(RETRY_SECONDS):
                    return

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
            if not self._is_storage_error(exc):
                raise
            raise Unavailable("The memory store could not be read right now.") from exc

    def read_row(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first row of one statement, or None.

        A single statement is already its own consistent snapshot in SQLite, so this skips
        the BEGIN and COMMIT that `read()` needs to hold one across several statements.
        """
        try:
            return self._reader().execute(sql, params).fetchone()
        except sqlite3.DatabaseError as exc:
            if not self._is_storage_error(exc):
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


def _begin_immediate(conn: sqlite3.Connection) -> None:
    """`BEGIN IMMEDIATE`, waiting for another process's writer by trying again every 50 to 200 µs,
    for at most LOCK_WAIT_SECONDS (then SQLite's "database is locked" is the storage failing)."""
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    pause = 0.00005
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", None) != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, _LOCK_RETRY_MAX)


class _Wake:
    """A thread's wait in `write_together`: one lock, released to wake it. A `threading.Event` is a
    condition whose woken thread must then take the condition's lock, which the leader holds while
    it wakes the rest of the group: on two busy cores, a second wake-up per batch, with the leader
    holding the interpreter meanwhile. Set more than once (its turn to lead, then done) is no error."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def set(self) -> None:
        with contextlib.suppress(RuntimeError):  # already set (and not waited for again)
            self._lock.release()

    def wait(self) -> None:
        self._lock.acquire()


class _Ticket:
    """One caller's batch in `write_together`, and how it ended.

    A thread's ticket has `wake`, set when it is done or its turn to lead; an event loop's has
    `future` instead, settled on its loop once the batch is done (the committer leads for it)."""

    __slots__ = ("done", "error", "future", "result", "wake", "work")

    def __init__(
        self,
        work: Callable[[sqlite3.Connection], Any],
        future: asyncio.Future[None] | None = None,
        *,
        wake: _Wake | None = None,
    ) -> None:
        self.work = work
        self.future = future
        self.wake = wake
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None


def _settle_futures(tickets: list[_Ticket]) -> None:
    """On the loop: wake every task waiting for one of these done batches."""
    for ticket in tickets:
        if ticket.future is not None and not ticket.future.done():
            ticket.future.set_result(None)


def _same_failure(exc: Exception) -> Unavailable:
    """A copy of a group's failure for each caller (one exception object is not raised in many threads)."""
    message = str(exc) if isinstance(exc, Unavailable) else "The memory store could not save; nothing was written."
    copy = Unavailable(message)
    copy.__cause__ = exc
    return copy


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
