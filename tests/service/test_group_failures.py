"""A group commit's batches fail alone, with the answer they would get alone, on both engines.

The failing batch gets the error its statement raised (not a later one of its own, not its
neighbour's), everything it wrote rolls back, and the batches before and after it in the same
transaction commit. The same holds for the queued records (`write_soon`) a batch inserts first.
These pin what any change to how a group reaches the database (pipelining its statements on
PostgreSQL, say, where a failure arrives later than its `execute`) must keep.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from memframe.service import write_soon
from memframe.service.db import Database
from memframe.service.engines import open_database


class _Outcome:
    def __init__(self) -> None:
        self.value: Any = None
        self.error: BaseException | None = None


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = open_database(database_url)
    with database.write() as conn:
        conn.execute("CREATE TABLE scratch (id INTEGER PRIMARY KEY, note TEXT NOT NULL)")
        conn.execute("INSERT INTO scratch (id, note) VALUES (?, ?)", (1, "there before"))
    yield database
    database.close()


def _in_one_group(db: Database, works: list[Callable[[Any], Any]]) -> list[_Outcome]:
    """Every work of `works` committed in one group: queued behind a batch held at the writer."""
    inside, release = threading.Event(), threading.Event()

    def hold(conn: object) -> None:
        inside.set()
        assert release.wait(timeout=60)

    holder = threading.Thread(target=db.write_together, args=(hold,))
    holder.start()
    assert inside.wait(timeout=60)
    outcomes = [_Outcome() for _ in works]
    threads = []
    for work, outcome in zip(works, outcomes, strict=True):

        def run(work: Callable[[Any], Any] = work, outcome: _Outcome = outcome) -> None:
            try:
                outcome.value = db.write_together(work)
            except BaseException as exc:
                outcome.error = exc

        threads.append(threading.Thread(target=run))
        threads[-1].start()
        deadline = time.monotonic() + 60
        while len(db._group._queue) < len(threads) and time.monotonic() < deadline:  # queued in this order
            time.sleep(0.001)
    assert len(db._group._queue) == len(works)
    release.set()
    holder.join(timeout=60)
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


def _notes(db: Database) -> dict[int, str]:
    with db.read() as conn:
        return {int(r[0]): str(r[1]) for r in conn.execute("SELECT id, note FROM scratch ORDER BY id")}


def _insert(conn: Any, row_id: int, note: str) -> None:
    conn.execute("INSERT INTO scratch (id, note) VALUES (?, ?)", (row_id, note))  # result never looked at


def test_a_batch_whose_unread_statement_fails_gets_that_failure_and_its_neighbours_commit(db: Database) -> None:
    def first(conn: Any) -> str:
        _insert(conn, 2, "first")
        return "first"

    def failing(conn: Any) -> str:
        _insert(conn, 3, "written before the failure")
        _insert(conn, 1, "a duplicate id")
        return "not reached as an answer"

    def after(conn: Any) -> int:
        _insert(conn, 4, "after")
        return int(conn.execute("SELECT COUNT(*) FROM scratch").fetchone()[0])

    outcomes = _in_one_group(db, [first, failing, after])
    assert outcomes[0].error is None and outcomes[0].value == "first"
    assert isinstance(outcomes[1].error, db.integrity_errors), outcomes[1].error
    assert outcomes[1].value is None
    assert outcomes[2].error is None and outcomes[2].value == 3  # it sees the first batch, not the failed one
    assert _notes(db) == {1: "there before", 2: "first", 4: "after"}


def test_a_batch_that_raises_after_an_unread_failure_gets_the_earlier_failure(db: Database) -> None:
    def failing(conn: Any) -> None:
        _insert(conn, 1, "a duplicate id")
        raise ValueError("raised after the statement that failed")

    def after(conn: Any) -> str:
        _insert(conn, 5, "after")
        return "after"

    outcomes = _in_one_group(db, [failing, after])
    assert isinstance(outcomes[0].error, db.integrity_errors), outcomes[0].error
    assert outcomes[1].error is None and outcomes[1].value == "after"
    assert _notes(db) == {1: "there before", 5: "after"}


def test_the_last_batch_of_a_group_fails_alone(db: Database) -> None:
    def first(conn: Any) -> str:
        _insert(conn, 6, "first")
        return "first"

    def failing(conn: Any) -> None:
        _insert(conn, 7, "rolled back")
        _insert(conn, 1, "a duplicate id")

    outcomes = _in_one_group(db, [first, failing])
    assert outcomes[0].error is None
    assert isinstance(outcomes[1].error, db.integrity_errors), outcomes[1].error
    assert _notes(db) == {1: "there before", 6: "first"}
    assert db.write_together(lambda conn: _insert(conn, 8, "the writer is usable at once")) is None
    assert 8 in _notes(db)


def test_a_batch_alone_gets_its_unread_failure_and_writes_nothing(db: Database) -> None:
    def failing(conn: Any) -> None:
        _insert(conn, 9, "rolled back")
        _insert(conn, 1, "a duplicate id")
        raise ValueError("raised after the statement that failed")

    with pytest.raises(db.integrity_errors):
        db.write_together(failing)
    assert _notes(db) == {1: "there before"}


def test_a_batch_that_looks_at_a_result_sees_it(db: Database) -> None:
    def reads(conn: Any) -> tuple[int, list[int]]:
        _insert(conn, 10, "ten")
        changed = conn.execute("UPDATE scratch SET note = ? WHERE id IN (?, ?)", ("seen", 1, 10)).rowcount
        return changed, [int(r[0]) for r in conn.execute("SELECT id FROM scratch ORDER BY id")]

    outcomes = _in_one_group(db, [reads, reads])
    assert outcomes[0].value == (2, [1, 10])
    assert isinstance(outcomes[1].error, db.integrity_errors)  # the second inserts id 10 again
    assert _notes(db) == {1: "seen", 10: "seen"}


# --- queued records (`write_soon`), which PostgreSQL inserts pipelined at the start of a batch -------


@pytest.fixture
def quiet_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(write_soon, "GATHER_SECONDS", 60.0)  # the background batch never comes in these tests


def _queue(db: Database, *notes: tuple[int, str]) -> None:
    for row_id, note in notes:
        db.write_soon("scratch", ("id", "note"), (row_id, note))


@pytest.mark.usefixtures("quiet_queue")
def test_queued_records_commit_with_the_next_batch_before_it(db: Database) -> None:
    _queue(db, (20, "receipt 1"), (21, "receipt 2"))
    with db.write() as conn:
        seen = int(conn.execute("SELECT COUNT(*) FROM scratch WHERE id IN (?, ?)", (20, 21)).fetchone()[0])
        _insert(conn, 22, "answer")
    assert seen == 2
    assert _notes(db) == {1: "there before", 20: "receipt 1", 21: "receipt 2", 22: "answer"}


@pytest.mark.usefixtures("quiet_queue")
def test_queued_records_that_break_a_constraint_are_dropped_and_the_batch_commits(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    _queue(db, (23, "fits"), (1, "a duplicate id"))  # one INSERT: both go, or neither
    with db.write() as conn:
        _insert(conn, 24, "answer")
    assert _notes(db) == {1: "there before", 24: "answer"}
    assert "dropped 2 queued record(s)" in caplog.text
    db.flush()  # nothing left to retry
    assert _notes(db) == {1: "there before", 24: "answer"}


@pytest.mark.usefixtures("quiet_queue")
def test_a_rolled_back_batch_gives_its_queued_records_back(db: Database) -> None:
    _queue(db, (25, "receipt"))
    with pytest.raises(RuntimeError), db.write() as conn:
        _insert(conn, 26, "half an answer")
        raise RuntimeError("the caller's batch failed")
    assert _notes(db) == {1: "there before"}
    db.flush()
    assert _notes(db) == {1: "there before", 25: "receipt"}
