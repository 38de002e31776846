"""The PostgreSQL engine: the same `Database` API, batches and fence over a psycopg pool.

`engines.open_database("postgresql://…")` opens this. The service's SQL is written once, in the
neutral dialect both engines speak (`?` and `:name` placeholders, `ON CONFLICT`,
`IS TRUE`, `CAST`); `_PgConnection` only turns the placeholders into psycopg's.

How a batch serialises. A contract batch is one PostgreSQL transaction (READ
COMMITTED) whose first statement takes one transaction-scoped advisory lock,
`pg_advisory_xact_lock(WRITE_LOCK)`, held until COMMIT or ROLLBACK: the PostgreSQL
form of SQLite's `BEGIN IMMEDIATE`, and it holds across every process and host that
writes to the database. Writers are totally ordered by that lock; because READ
COMMITTED takes a fresh snapshot per statement, every statement after the lock sees
every batch committed before it. So the fence's `INSERT … SELECT` judges the
admission, policy, consent, credential, membership and revocation rows exactly as they
are at the batch's linearisation point (the lock), and nothing can change them before
its COMMIT: a mode change, a Clear, a consent switch, a newer message or a revocation
acknowledged before a capture's batch took the lock is seen by its fence; one that
takes the lock after it is ordered after it. Row locks (`SELECT … FOR UPDATE`) were
not enough: several of the facts the fence relies on are the *absence* of a row (no
revocation, no policy row yet, no newer credential), which no row lock protects;
SERIALIZABLE would order a capture before a mode change it overlapped yet commit it
after (serialisable, not linearisable) and would need retries of whole batches. Reads
take no lock: `read()` is one REPEATABLE READ, READ ONLY snapshot, `read_row` one
statement. The price is one writer at a time per database, as with SQLite; the
group commit (`memframe.service.group_commit`) shares that turn and its fsync among batches.

A PostgreSQL that is down, restarting or refusing connections is the storage failing:
every call gets the one `Unavailable` answer, a batch in flight rolls back whole, and
the pool (which checks a connection before lending it: `check_when_spoken`) reconnects when it
returns.
"""

from __future__ import annotations

import contextlib
import logging
import re
import select
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import psycopg
import psycopg_pool
from psycopg import pq

from memframe.core.errors import Unavailable
from memframe.service.db import Clock, Database, refuse_nul

#: The advisory lock every write batch holds (an arbitrary constant: "memframe" in ASCII).
WRITE_LOCK = 0x6D656D6672616D65
#: Connections the pool keeps at most (readers share them; the writer takes one per batch).
POOL_SIZE = 16
#: How long a call waits for a connection before it is Unavailable (the server down).
CONNECT_TIMEOUT = 5.0

# The pool's own warnings (each failed attempt, several lines with the server's words) would reach a
# person's terminal through logging's last resort; what they are told is the one Unavailable instead.
logging.getLogger("psycopg.pool").addHandler(logging.NullHandler())

_TOKEN = re.compile(r"'(?:[^']|'')*'|\?|(?<!:):([A-Za-z_][A-Za-z0-9_]*)|%")


@lru_cache(maxsize=512)
def to_psycopg(sql: str) -> str:
    """The neutral SQL's placeholders as psycopg's: `?` → `%s`, `:name` → `%(name)s`, `%` → `%%`
    (string literals are left alone)."""

    def one(m: re.Match[str]) -> str:
        token = m.group(0)
        if token.startswith("'"):
            return token
        if token == "?":
            return "%s"
        if token == "%":
            return "%%"
        return f"%({m.group(1)})s"

    return _TOKEN.sub(one, sql)


def check_when_spoken(conn: psycopg.Connection[Any]) -> None:
    """The pool's check before it lends a connection: a round trip only when the server has said
    something since the connection was last used.

    An idle connection the server is done with is one it has written to: a PostgreSQL that is
    stopping or restarting sends its FATAL and closes, and a dead server's kernel closes the
    socket; either makes the socket readable. A healthy idle one has nothing to read. So a zero
    timeout poll of the socket (a system call) stands in for the round trip `check_connection`
    costs on every borrow, which at a burst of Saves was one of each Save's own round trips and,
    on two busy cores, a wake-up of a PostgreSQL backend. A readable socket gets the full check;
    it raises if the connection is gone, and the pool then connects afresh. A server that vanishes
    without a word (a cut cable) is found by the statement itself, which is then `Unavailable`.
    """
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    if poller.poll(0):
        psycopg_pool.ConnectionPool.check_connection(conn)


class _PgConnection:
    """What the service calls `conn`: `execute(sql, params)` with the neutral placeholders."""

    __slots__ = ("raw",)

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> psycopg.Cursor[Any]:
        if not params:
            return self.raw.execute(sql)
        refuse_nul(params)  # PostgreSQL's TEXT cannot hold NUL: the one clear error SQLite gives too
        return self.raw.execute(to_psycopg(sql), params)

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != pq.TransactionStatus.IDLE


def safe_location(url: str) -> str:
    """host:port/dbname of a PostgreSQL URL: what messages may show (never the password)."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        return "the PostgreSQL server"
    return f"postgresql://{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"


def identity_of(url: str) -> str:
    """host:port/dbname and the connection options (a schema's search_path) of a PostgreSQL URL:
    what tells one database from another, without the password or the user."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        return url.rpartition("@")[2]
    options = info.get("options", "")
    return f"{safe_location(url)}?options={options}" if options else safe_location(url)


class PostgresDatabase(Database):
    """A PostgreSQL database through a connection pool; see the module docstring for the locking."""

    dialect = "postgresql"
    local_reads = False  # every read is a round trip to the server: the HTTP layer runs it on a thread
    integrity_errors = (psycopg.IntegrityError,)
    driver_errors = (psycopg.Error, psycopg_pool.PoolTimeout, psycopg_pool.PoolClosed)
    #: A constraint, a programming mistake, or a value PostgreSQL cannot hold (a NUL in a text).
    not_storage_errors = (psycopg.IntegrityError, psycopg.ProgrammingError, psycopg.DataError)
    _SCHEMA_MIGRATIONS = (
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
    )

    def __init__(
        self,
        url: str,
        *,
        clock: Clock = time.time,
        pool_size: int = POOL_SIZE,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        self.path = None
        self.url = url
        self.clock = clock
        self.connect_timeout = connect_timeout
        self._init_state()
        self._pool = psycopg_pool.ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, "connect_timeout": max(1, round(connect_timeout))},
            check=check_when_spoken,
            timeout=connect_timeout,
            # A failed connection attempt is not retried in the background with a growing back-off: the
            # next call that needs a connection tries afresh, so the pool is whole again the moment the
            # server is (a call meanwhile waits `connect_timeout`, then is Unavailable).
            reconnect_timeout=0,
            open=False,
            name="memframe",
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            self._pool.close()
            raise Unavailable(f"Cannot reach the database {self.where()}.") from exc
        try:
            self._migrate()
        except BaseException:
            self._pool.close()  # a failed open leaves no connection behind
            raise

    def where(self) -> str:
        return safe_location(self.url)

    def identity(self) -> str:
        return identity_of(self.url)

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        with self._pool.connection(timeout=self.connect_timeout) as raw:
            yield raw

    @contextmanager
    def write(self) -> Iterator[_PgConnection]:  # type: ignore[override]
        """One atomic batch, in one transaction that holds the write lock (module docstring)."""
        with self._lock:
            soon: list[Any] = []
            try:
                with self._connection() as raw:
                    conn = _PgConnection(raw)
                    try:
                        # One round trip: a statement without parameters goes as a simple query,
                        # which may hold several (the lock's key is our constant, not input).
                        conn.execute(f"BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK})")
                        soon = self._soon.take(conn)
                        yield conn
                        conn.execute("COMMIT")
                        self._soon.settle()
                    except BaseException:
                        if not raw.closed and conn.in_transaction:
                            with contextlib.suppress(psycopg.Error):
                                conn.execute("ROLLBACK")
                        self._soon.give_back(soon)
                        raise
            except self.driver_errors as exc:
                if not self.is_storage_error(exc):
                    raise
                raise Unavailable(
                    "The memory store could not save (the database is unreachable or failing); nothing was written."
                ) from exc

    def next_savepoint(self, conn: _PgConnection) -> None:
        conn.execute("RELEASE together; SAVEPOINT together")  # one round trip, as BEGIN's above

    @contextmanager
    def read(self) -> Iterator[_PgConnection]:  # type: ignore[override]
        """One consistent snapshot (REPEATABLE READ, READ ONLY): it never waits for a writer."""
        try:
            with self._connection() as raw:
                conn = _PgConnection(raw)
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                try:
                    yield conn
                finally:
                    if not raw.closed and conn.in_transaction:
                        conn.execute("ROLLBACK")  # a read-only snapshot: ending it is all COMMIT would do
        except self.driver_errors as exc:
            if not self.is_storage_error(exc):
                raise
            raise Unavailable("The memory store could not be read right now.") from exc

    def read_row(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first row of one statement (its own snapshot), or None."""
        try:
            with self._connection() as raw:
                return _PgConnection(raw).execute(sql, params).fetchone()
        except self.driver_errors as exc:
            if not self.is_storage_error(exc):
                raise
            raise Unavailable("The memory store could not be read right now.") from exc

    @contextmanager
    def destroying(self) -> Iterator[None]:
        """PostgreSQL never overwrites a row in place: `scrub` rewrites the tables instead."""
        yield

    def scrub(self) -> str:
        """Rewrite the tables that held sealed texts (VACUUM FULL: new files, the old ones removed)."""
        with self._connection() as raw:
            raw.execute(
                "VACUUM FULL file_versions, conversation_messages, workspace_memory_proposals, workspace_key_rotations"
            )
        return (
            "The server's tables were rewritten (VACUUM FULL); its WAL archives and base backups made before now"
            " still hold the old ciphertext, readable only with the old key."
        )

    def close(self) -> None:
        if self._close_queue():
            self._pool.close()
