"""Fault injection: every statement of every write path fails in turn; each failure changes nothing.

SQLite's own I/O-error tests fail the Nth I/O call for N = 1, 2, … until the
operation completes. We do the same one level up: every connection the service
opens is wrapped so that the Nth `execute` (reads and writes, connection set-up
and COMMIT included) raises a storage error, for N = 1, 2, … until the path
runs to the end. After every failure:

* the database is row for row what it was before the call (a dump of every table);
* the caller got one clear `Unavailable` — never a raw `sqlite3` exception;
* the service still works (the next call, with no fault, succeeds).

A full disk is real, not simulated: `PRAGMA max_page_count` caps the file, the
same paths are run against it, then the cap is lifted and they succeed.
Migrations run in one transaction: failing any of their statements leaves a
database that a later open migrates completely.
"""

from __future__ import annotations

import os
import select
import socket
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

import memframe.service.db as db_module
import memframe.service.pg as pg_module
from memframe import sealing
from memframe.backend.local import LocalBackend
from memframe.core.edits import MemoryChange
from memframe.core.errors import FenceRefused, MemframeError, Unavailable
from memframe.core.types import Mode
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from memframe.service.db import Database, migrations
from tests.conftest import FakeClock
from tests.reliability.support import check_store, diff_dumps, dump, raw, record_figures, tables
from tests.support.pg_server import PostgresServer

pytestmark = pytest.mark.fault

ERRORS: dict[str, Callable[[], sqlite3.Error]] = {
    "io": lambda: sqlite3.OperationalError("disk I/O error"),
    "full": lambda: sqlite3.OperationalError("database or disk is full"),
    "corrupt": lambda: sqlite3.DatabaseError("database disk image is malformed"),
}
#: (error, whether it strikes after the statement ran); COMMIT only ever fails before it runs.
VARIANTS = [("io", False), ("io", True), ("corrupt", False)]


# --- the injector --------------------------------------------------------------------------


@dataclass
class Plan:
    """Fail the Nth statement (counted across every connection) once, while armed."""

    fail_at: int | None = None
    error: str = "io"
    after: bool = False
    max_pages: int | None = None
    count: int = 0
    fired: str | None = None
    seen: list[str] = field(default_factory=list)

    def arm(self, n: int, error: str = "io", after: bool = False) -> None:
        self.fail_at, self.error, self.after, self.count, self.fired, self.seen = n, error, after, 0, None, []

    def disarm(self) -> None:
        self.fail_at = None

    def statement(self, sql: str, *, ran: bool) -> None:
        if self.fail_at is None or self.fired is not None:
            return
        if not ran:
            self.count += 1
            self.seen.append(" ".join(sql.split())[:60])
        if self.count != self.fail_at:
            return
        strike_after = self.after and not sql.lstrip().upper().startswith("COMMIT")
        if ran == strike_after:
            self.fired = self.seen[-1]
            raise ERRORS[self.error]()


class FaultyConnection:
    """A sqlite3.Connection whose execute consults the plan before and after running."""

    def __init__(self, conn: sqlite3.Connection, plan: Plan) -> None:
        self._conn = conn
        self._plan = plan

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql.strip().upper() == "ROLLBACK":  # recovery itself is not under test here
            return self._conn.execute(sql, *args)
        self._plan.statement(sql, ran=False)
        cursor = self._conn.execute(sql, *args)
        self._plan.statement(sql, ran=True)
        return cursor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class FaultySqlite:
    """Stands in for the `sqlite3` module inside memframe.service.db only."""

    def __init__(self, plan: Plan) -> None:
        self._plan = plan

    def connect(self, *args: Any, **kwargs: Any) -> FaultyConnection:
        conn = sqlite3.connect(*args, **kwargs)
        if self._plan.max_pages is not None:
            conn.execute(f"PRAGMA max_page_count = {self._plan.max_pages}")
        return FaultyConnection(conn, self._plan)

    def __getattr__(self, name: str) -> Any:
        return getattr(sqlite3, name)


@pytest.fixture
def plan(monkeypatch: pytest.MonkeyPatch) -> Plan:
    p = Plan()
    monkeypatch.setattr(db_module, "sqlite3", FaultySqlite(p))
    return p


def in_fresh_thread(action: Callable[[], object]) -> BaseException | None:
    """Run on a new thread, so the per-thread reader connection is opened under the fault too."""
    outcome: list[BaseException | None] = [None]

    def target() -> None:
        try:
            action()
        except BaseException as exc:
            outcome[0] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join()
    return outcome[0]


def assert_clear_error(exc: BaseException | None, plan: Plan) -> None:
    assert isinstance(exc, MemframeError), f"{plan.fired!r} failed with {type(exc).__name__}: {exc}"
    assert isinstance(exc, Unavailable), f"{plan.fired!r}: a storage failure became {type(exc).__name__}: {exc}"
    message = str(exc)
    assert "\n" not in message and "sqlite" not in message.lower() and "Traceback" not in message


# --- the paths -------------------------------------------------------------------------------


@dataclass
class Scene:
    service: MemoryService
    person: LocalBackend
    key: bytes
    clock: FakeClock
    path: Path
    session: str = ""

    @property
    def assistant(self):  # type: ignore[no-untyped-def]
        return self.service.assistant

    def head(self) -> int:
        return self.person.load().version

    def admit(self, conversation: str = "conv") -> str:
        self.clock.advance(1)
        a = self.assistant.admit(
            LOCAL_USER,
            "ws",
            conversation,
            idempotency_key=f"send-{self.clock.now}",
            key_session_id=self.session,
            memory_state=None,
        )
        return a.credential

    def capture(self, credential: str, line: str) -> Any:
        admission = credential.removeprefix("cred_").partition(".")[0]
        return self.assistant.commit_capture(
            "ws",
            credential,
            idempotency_key=f"memory:{admission}",
            key_session_id=self.session,
            changes=[MemoryChange("add", line)],
            expected_version=self.head(),
        )


@pytest.fixture
def scene(fast_tmp: Path, plan: Plan) -> Iterator[Scene]:
    yield from make_scene(fast_tmp / "faults.db")


def make_scene(target: str | Path) -> Iterator[Scene]:
    clock = FakeClock()
    service = MemoryService(target, clock=clock)
    service.accounts.add_user(LOCAL_USER)
    service.accounts.create_workspace("ws", LOCAL_USER)
    service.accounts.create_workspace("ws2", LOCAL_USER)
    key = sealing.new_key()
    person = LocalBackend(service, "ws", key)
    person.save("# Memory\n- keeps tea in the left cupboard\n", 0)
    person.save("# Memory\n- keeps tea in the left cupboard\n- walks at noon\n", 1)
    person.set_ai(True)
    person.set_policy(Mode.AUTO, 0)
    s = Scene(service, person, key, clock, target)  # type: ignore[arg-type]
    s.session = service.assistant.open_key_session(LOCAL_USER, "ws", key).id
    yield s
    service.close()


# Each path: (prepare, which may write and returns the action; the action under the fault).
Prepare = Callable[[Scene], Callable[[], object]]


def _fenced_capture(s: Scene) -> Callable[[], object]:
    credential = s.admit()
    s.person.set_policy(Mode.READ_ONLY, s.person.get_policy().revision)
    s.person.set_policy(Mode.AUTO, s.person.get_policy().revision)
    return lambda: s.capture(credential, "- never lands")


PATHS: dict[str, Prepare] = {
    "save": lambda s: lambda: s.person.save(f"# Memory\n- saved at {s.clock.now}\n", s.head()),
    "first save of a document": lambda s: lambda: LocalBackend(s.service, "ws2", s.key).save("first\n", 0),
    "clear": lambda s: lambda: s.person.clear(s.head()),
    "undo": lambda s: lambda: s.person.undo(1, s.head()),
    "mode change": lambda s: (
        lambda: s.person.set_policy(
            Mode.READ_ONLY if s.person.get_policy().mode is Mode.AUTO else Mode.AUTO, s.person.get_policy().revision
        )
    ),
    "admission": lambda s: lambda: s.admit(),
    "fence commit": lambda s: (lambda credential: lambda: s.capture(credential, "- likes green tea"))(s.admit()),
    "fenced capture": _fenced_capture,
    "key-session revocation": lambda s: (lambda sid: lambda: s.assistant.revoke_key_session(LOCAL_USER, sid))(
        s.assistant.open_key_session(LOCAL_USER, "ws", s.key).id
    ),
}


@pytest.mark.parametrize("variant", VARIANTS, ids=[f"{e}-{'after' if a else 'before'}" for e, a in VARIANTS])
@pytest.mark.parametrize("name", list(PATHS))
def test_each_statement_fails_in_turn_and_changes_nothing(
    scene: Scene, plan: Plan, name: str, variant: tuple[str, bool]
) -> None:
    error, after = variant
    failures = 0
    for n in range(1, 200):
        if name == "mode change" and scene.person.get_policy().mode is not Mode.AUTO:
            scene.person.set_policy(Mode.AUTO, scene.person.get_policy().revision)
        action = PATHS[name](scene)
        before = dump(scene.path)
        plan.arm(n, error, after)
        exc = in_fresh_thread(action)
        plan.disarm()
        if plan.fired is None:  # the path ran to the end with fewer than n statements
            if name == "fenced capture":
                assert isinstance(exc, FenceRefused), exc
                assert dump(scene.path) == before, "a refused capture changed the database"
            else:
                assert exc is None, f"{name} failed with no fault injected: {exc!r}"
            break
        assert_clear_error(exc, plan)
        after_dump = dump(scene.path)
        assert after_dump == before, f"{plan.fired!r} ({error}) left changes: {diff_dumps(before, after_dump)}"
        failures += 1
    else:
        pytest.fail("the path never completed")
    assert failures >= 3, f"only {failures} statements were failed; the injector is not reaching the path"
    check_store(scene.path)


# --- PostgreSQL: a lost connection at every statement, a server that stops and returns -------------


class PgPlan:
    """Break the Nth statement (counted across every connection of the service) once, while armed:
    `terminate` kills the server process behind the connection just before the statement (a real
    lost connection); `lost-reply` raises OperationalError after the statement ran (its answer lost)."""

    def __init__(self, server: PostgresServer) -> None:
        self.server = server
        self.fail_at: int | None = None
        self.how = "terminate"
        self.count = 0
        self.fired: str | None = None

    def arm(self, n: int, how: str) -> None:
        self.fail_at, self.how, self.count, self.fired = n, how, 0, None

    def disarm(self) -> None:
        self.fail_at = None

    def wrap(self, execute: Callable[..., Any]) -> Callable[..., Any]:
        plan = self

        def faulty(conn: Any, sql: str, params: Any = None) -> Any:
            if plan.fail_at is None or plan.fired is not None or sql.strip().upper() == "ROLLBACK":
                return execute(conn, sql, params)
            plan.count += 1
            if plan.count != plan.fail_at:
                return execute(conn, sql, params)
            plan.fired = " ".join(sql.split())[:60]
            if plan.how == "terminate":
                pid = conn.raw.info.backend_pid
                with psycopg.connect(plan.server.url(), autocommit=True) as side:
                    side.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
                return execute(conn, sql, params)
            try:
                execute(conn, sql, params)
            except Exception:
                plan.fired = None  # the statement failed by itself (the fence's CHECK): not our fault
                raise
            raise psycopg.OperationalError("server closed the connection unexpectedly")

        return faulty


@pytest.fixture
def pg_scene(postgres_server: PostgresServer) -> Iterator[Scene]:
    url = postgres_server.fresh_url()
    try:
        yield from make_scene(url)
    finally:
        postgres_server.drop(url)


@pytest.mark.parametrize("how", ["terminate", "lost-reply"])
@pytest.mark.parametrize("name", list(PATHS))
def test_each_statement_loses_its_postgresql_connection_in_turn_and_changes_nothing(
    pg_scene: Scene, postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch, name: str, how: str
) -> None:
    """The PostgreSQL form of the test above: the Nth statement's connection dies (for N = 1, 2, …);
    the caller gets one Unavailable, nothing is half-written, and the pool's next connection works."""
    scene = pg_scene
    plan = PgPlan(postgres_server)
    monkeypatch.setattr(pg_module._PgConnection, "execute", plan.wrap(pg_module._PgConnection.execute))
    failures = 0
    for n in range(1, 200):
        if name == "mode change" and scene.person.get_policy().mode is not Mode.AUTO:
            scene.person.set_policy(Mode.AUTO, scene.person.get_policy().revision)
        action = PATHS[name](scene)
        before = dump(scene.path)
        plan.arm(n, how)
        exc = in_fresh_thread(action)
        plan.disarm()
        if plan.fired is None:
            if name == "fenced capture":
                assert isinstance(exc, FenceRefused), exc
            else:
                assert exc is None, f"{name} failed with no fault injected: {exc!r}"
            break
        if how == "lost-reply" and plan.fired.upper().startswith("COMMIT"):
            # The COMMIT ran and only its answer was lost: the caller hears Unavailable (it cannot
            # know), and the database holds the whole batch or nothing: never part of it.
            assert isinstance(exc, Unavailable), exc
            check_store(scene.path)
            failures += 1
            break  # COMMIT is the path's last statement
        assert isinstance(exc, Unavailable), f"{plan.fired!r} ({how}) failed with {type(exc).__name__}: {exc}"
        assert "\n" not in str(exc) and "psycopg" not in str(exc).lower()
        after_dump = dump(scene.path)
        assert after_dump == before, f"{plan.fired!r} ({how}) left changes: {diff_dumps(before, after_dump)}"
        failures += 1
    else:
        pytest.fail("the path never completed")
    assert failures >= 3, f"only {failures} statements were failed; the injector is not reaching the path"
    check_store(scene.path)


def test_a_stopped_postgresql_is_unavailable_everywhere_and_the_pool_recovers(
    pg_scene: Scene, postgres_server: PostgresServer
) -> None:
    """Every call while the server is down is the one Unavailable; once it is back, every call works."""
    scene = pg_scene
    credential = scene.admit()
    before = dump(scene.path)
    scene.service.db.connect_timeout = 1.0  # type: ignore[attr-defined]
    calls: dict[str, Callable[[], object]] = {
        "load": scene.person.load,
        "save": lambda: scene.person.save("# Memory\n- while down\n", 2),
        "mode change": lambda: scene.person.set_policy(Mode.READ_ONLY, 1),
        "admission": scene.admit,
        "recall": lambda: scene.assistant.recall("ws", credential),
        "capture": lambda: scene.capture(credential, "- while down"),
    }
    postgres_server.stop()
    try:
        for what, call in calls.items():
            exc = in_fresh_thread(call)
            assert isinstance(exc, Unavailable), f"{what} with the server down: {exc!r}"
            assert "\n" not in str(exc) and "psycopg" not in str(exc).lower()
    finally:
        postgres_server.pg_ctl_start()
    postgres_server.wait_ready()
    assert dump(scene.path) == before, "a call made while the server was down left changes"
    # The same calls once it is back (the capture before the writes that would retire its turn).
    again: dict[str, Callable[[], object]] = {
        "load": scene.person.load,
        "recall": lambda: scene.assistant.recall("ws", credential),
        "capture": lambda: scene.capture(credential, "- after the restart"),
        "save": lambda: scene.person.save("# Memory\n- after the restart\n", 3),
        "mode change": lambda: scene.person.set_policy(Mode.READ_ONLY, 1),
        "admission": scene.admit,
    }
    for what, call in again.items():
        exc = in_fresh_thread(call)
        assert exc is None, f"{what} after the server returned: {exc!r}"
    check_store(scene.path)


def test_a_postgresql_refusing_connections_is_one_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here
    with pytest.raises(Unavailable) as caught:
        MemoryService(f"postgresql://memframe:s3cret@127.0.0.1:{port}/memframe")
    message = str(caught.value)
    assert "\n" not in message and "s3cret" not in message and str(port) in message


# --- a full disk, for real ---------------------------------------------------------------------


def _fill(scene: Scene) -> None:
    """Cap the file a few pages above its size, then pad it until not even a tiny write fits."""
    writer = scene.service.db._writer
    pages = writer.execute("PRAGMA page_count").fetchone()[0]
    writer.execute(f"PRAGMA max_page_count = {pages + 3}")
    size, i = 3000, 0
    while size >= 8:
        i += 1
        blob = sealing.seal(scene.key, os.urandom(size // 2).hex(), workspace_id="ws", path=f"pad/{i}", version=1)
        try:
            scene.service.put_file(LOCAL_USER, "ws", f"pad/{i}", blob, 0)
        except Unavailable:
            size //= 2


INSERTING = ["save", "clear", "undo", "fence commit", "first save of a document"]


@pytest.mark.parametrize("name", list(PATHS))
def test_a_full_disk_fails_cleanly_and_the_path_works_once_there_is_room(scene: Scene, name: str) -> None:
    action = PATHS[name](scene)
    _fill(scene)
    before = dump(scene.path)
    exc = in_fresh_thread(action)
    if name in INSERTING:
        assert isinstance(exc, Unavailable), f"{name} on a full disk: {exc!r}"
    if isinstance(exc, Unavailable):
        assert "nothing was written" in str(exc)
        assert dump(scene.path) == before, "a write that hit the full disk left changes"
    elif name == "fenced capture":
        assert isinstance(exc, FenceRefused) and dump(scene.path) == before
    else:
        assert exc is None, exc
    check_store(scene.path)
    scene.service.db._writer.execute("PRAGMA max_page_count = 1073741823")
    if isinstance(exc, Unavailable):
        retry = in_fresh_thread(action)
        if name == "fenced capture":
            assert isinstance(retry, FenceRefused), retry
        else:
            assert retry is None, f"{name} still fails once there is room: {retry!r}"
    check_store(scene.path)


# --- migrations ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pristine_schema(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Any, ...]]:
    path = tmp_path_factory.mktemp("pristine") / "p.db"
    Database(path).close()
    return dump(path)["sqlite_master"]


def _assert_complete(path: Path, pristine: list[tuple[Any, ...]]) -> None:
    db = Database(path)
    try:
        assert [n for n, _ in db.schema_versions()] == [n for n, _, _ in migrations()]
    finally:
        db.close()
    assert dump(path)["sqlite_master"] == pristine
    with raw(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.parametrize("variant", VARIANTS, ids=[f"{e}-{'after' if a else 'before'}" for e, a in VARIANTS])
def test_each_migration_statement_fails_in_turn_and_a_later_open_completes(
    fast_tmp: Path, plan: Plan, pristine_schema: list[tuple[Any, ...]], variant: tuple[str, bool]
) -> None:
    error, after = variant
    failures = 0
    for n in range(1, 500):
        path = fast_tmp / f"m{n}.db"
        plan.arm(n, error, after)
        try:
            Database(path).close()
        except MemframeError as exc:
            assert_clear_error(exc, plan)
        except Exception as exc:  # pragma: no cover - the failure this test exists to catch
            pytest.fail(f"{plan.fired!r} escaped as {type(exc).__name__}: {exc}")
        finally:
            plan.disarm()
        if plan.fired is None:
            _assert_complete(path, pristine_schema)
            break
        failures += 1
        if path.exists():
            with raw(path) as conn:
                assert tables(conn) == [], f"{plan.fired!r} left a half-migrated schema: {tables(conn)}"
        _assert_complete(path, pristine_schema)
    else:
        pytest.fail("the migration never completed")
    assert failures > sum(len(db_module.statements(sql)) for _, _, sql in migrations())
    record_figures("fault-migration", variant=f"{error}-{after}", statements_failed=failures)


def test_a_full_disk_during_migration_leaves_nothing_half_done(
    fast_tmp: Path, plan: Plan, pristine_schema: list[tuple[Any, ...]]
) -> None:
    for pages in range(1, 60):
        path = fast_tmp / f"full{pages}.db"
        plan.max_pages = pages
        try:
            Database(path).close()
        except Unavailable:
            pass
        else:
            break
        finally:
            plan.max_pages = None
        with raw(path) as conn:
            assert tables(conn) == []
        _assert_complete(path, pristine_schema)
    else:
        pytest.fail("even 60 pages were not enough for the schema")
    assert pages > 3, "the cap never bit"


# --- what a person sees ----------------------------------------------------------------------------


@pytest.mark.parametrize("error", ["io", "full", "corrupt"])
def test_the_cli_reports_a_storage_failure_in_one_line(
    tmp_path: Path, plan: Plan, capsys: pytest.CaptureFixture[str], error: str
) -> None:
    from memframe.cli import EXIT_ERROR, main

    assert main(["init"]) == 0
    text = tmp_path / "m.md"
    text.write_text("# Memory\n- a private note about the garden\n", encoding="utf-8")
    capsys.readouterr()
    original = plan.statement

    def fail_on_insert(sql: str, *, ran: bool) -> None:
        if not ran and sql.startswith("INSERT INTO file_versions"):
            raise ERRORS[error]()

    plan.statement = fail_on_insert  # type: ignore[method-assign]
    try:
        code = main(["save", str(text), "--base", "0"])
    finally:
        plan.statement = original  # type: ignore[method-assign]
    out, err = capsys.readouterr()
    assert code == EXIT_ERROR, (code, out, err)
    assert err.startswith("memframe: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and "sqlite" not in err.lower() and "garden" not in err + out
    assert main(["save", str(text), "--base", "0"]) == 0


def test_a_lent_connection_costs_a_round_trip_only_once_the_server_has_spoken(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool's check (`check_when_spoken`): an idle, healthy connection is lent on a poll of its
    socket alone; one whose backend the server terminated gets the full check, which refuses it, so
    the pool connects afresh; a closed one is refused outright."""
    url = postgres_server.fresh_url()
    checked: list[object] = []
    full_check = pg_module.psycopg_pool.ConnectionPool.check_connection
    monkeypatch.setattr(
        pg_module.psycopg_pool.ConnectionPool, "check_connection", lambda conn: checked.append(conn) or full_check(conn)
    )
    try:
        with psycopg.connect(url, autocommit=True) as conn, psycopg.connect(url, autocommit=True) as other:
            conn.execute("SELECT 1").fetchone()
            pg_module.check_when_spoken(conn)
            assert checked == [], "a healthy idle connection was checked with a round trip"
            other.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
            poller = select.poll()
            poller.register(conn.fileno(), select.POLLIN)
            assert poller.poll(10_000), "the terminated backend's socket never became readable"
            with pytest.raises(psycopg.OperationalError):
                pg_module.check_when_spoken(conn)
            assert checked == [conn]
        with pytest.raises(psycopg.OperationalError):
            pg_module.check_when_spoken(conn)  # closed now: refused without a word to the server
        assert checked == [conn]
    finally:
        postgres_server.drop(url)
