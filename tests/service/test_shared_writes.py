"""Writes shared between threads: `write_soon` records, and `write_together` group commits."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from memframe.core.errors import Unavailable
from memframe.service import db as dbmod
from memframe.service import write_soon
from memframe.service.db import Database


def _open(path: Path) -> Database:
    db = Database(path)
    with db.write() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL UNIQUE)")
    return db


def _on_disk(path: Path) -> list[str]:
    """What another process would see: a fresh connection to the file."""
    conn = sqlite3.connect(path)
    try:
        return [r[0] for r in conn.execute("SELECT body FROM notes ORDER BY id")]
    finally:
        conn.close()


INSERT = "INSERT INTO notes (body) VALUES (?)"
NOTE = ("notes", ("body",))  # a write_soon row's table and columns


def test_a_queued_record_commits_with_the_next_write_and_before_it(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(write_soon, "GATHER_SECONDS", 60.0)  # the background batch never comes in this test
    db = _open(tmp_path / "m.db")
    try:
        db.write_soon(*NOTE, ("receipt 1",))
        db.write_soon(*NOTE, ("receipt 2",))
        assert _on_disk(tmp_path / "m.db") == []
        with db.write() as conn:
            conn.execute(INSERT, ("answer",))
        assert _on_disk(tmp_path / "m.db") == ["receipt 1", "receipt 2", "answer"]
    finally:
        db.close()


def test_a_rolled_back_write_gives_the_queued_records_back(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(write_soon, "GATHER_SECONDS", 60.0)
    db = _open(tmp_path / "m.db")
    try:
        db.write_soon(*NOTE, ("receipt",))
        with pytest.raises(RuntimeError), db.write() as conn:
            conn.execute(INSERT, ("half an answer",))
            raise RuntimeError("the caller's batch failed")
        assert _on_disk(tmp_path / "m.db") == []
        db.flush()
        assert _on_disk(tmp_path / "m.db") == ["receipt"]
    finally:
        db.close()


def test_the_background_batch_commits_within_moments(tmp_path: Path) -> None:
    db = _open(tmp_path / "m.db")
    try:
        for n in range(50):
            db.write_soon(*NOTE, (f"receipt {n}",))
        deadline = time.monotonic() + 10
        while len(_on_disk(tmp_path / "m.db")) < 50 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _on_disk(tmp_path / "m.db") == [f"receipt {n}" for n in range(50)]
    finally:
        db.close()


def test_close_commits_what_is_queued_and_then_refuses_more(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(write_soon, "GATHER_SECONDS", 60.0)
    db = _open(tmp_path / "m.db")
    db.write_soon(*NOTE, ("last receipt",))
    db.close()  # does not wait out the gathering
    assert _on_disk(tmp_path / "m.db") == ["last receipt"]
    with pytest.raises(Unavailable):
        db.write_soon(*NOTE, ("too late",))


def test_a_record_that_breaks_a_constraint_is_dropped_not_retried_forever(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(write_soon, "GATHER_SECONDS", 60.0)
    db = _open(tmp_path / "m.db")
    try:
        with db.write() as conn:
            conn.execute(INSERT, ("taken",))
        db.write_soon(*NOTE, ("taken",))
        with db.write() as conn:  # the caller's own batch still commits
            conn.execute(INSERT, ("answer",))
        assert _on_disk(tmp_path / "m.db") == ["taken", "answer"]
        db.flush()
    finally:
        db.close()


def test_batches_committed_together_each_get_their_own_outcome(tmp_path: Path) -> None:
    """Many threads at once: each batch lands or fails alone, and every success is on disk on return."""
    db = _open(tmp_path / "m.db")
    start = threading.Barrier(8)
    landed: list[str] = []
    refused: list[str] = []

    def writer(n: int) -> None:
        start.wait()
        for r in range(20):
            body = f"note {n}.{r}"

            def batch(conn: sqlite3.Connection, body: str = body, refuse: bool = r % 3 == 0) -> str:
                conn.execute(INSERT, (body,))
                if refuse:
                    conn.execute(INSERT, (body,))  # breaks UNIQUE: this batch alone rolls back
                return body

            try:
                assert db.write_together(batch) == body
            except sqlite3.IntegrityError:
                refused.append(body)
                continue
            assert body in _on_disk(tmp_path / "m.db")  # acknowledged means committed
            landed.append(body)

    try:
        threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(landed) + len(refused) == 160 and len(refused) == 8 * 7
        assert sorted(_on_disk(tmp_path / "m.db")) == sorted(landed)
    finally:
        db.close()


def test_a_storage_failure_fails_the_whole_group_cleanly(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    db = _open(tmp_path / "m.db")
    try:

        def failing(conn: sqlite3.Connection) -> None:
            conn.execute(INSERT, ("half",))
            raise sqlite3.OperationalError("disk I/O error")

        with pytest.raises(Unavailable):
            db.write_together(failing)
        assert _on_disk(tmp_path / "m.db") == []
        assert db.write_together(lambda conn: conn.execute(INSERT, ("next",)).rowcount) == 1
        assert _on_disk(tmp_path / "m.db") == ["next"]
    finally:
        db.close()


def test_a_long_queue_goes_in_by_chunks_in_order(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(write_soon, "GATHER_SECONDS", 60.0)
    db = _open(tmp_path / "m.db")
    try:
        for n in range(450):  # more than two multi-row INSERTs' worth
            db.write_soon(*NOTE, (f"receipt {n:03d}",))
        db.flush()
        assert _on_disk(tmp_path / "m.db") == [f"receipt {n:03d}" for n in range(450)]
    finally:
        db.close()


class _SignallingLock:
    """The writer lock, telling the test when a second thread starts waiting for it."""

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self.contended = threading.Event()

    def __enter__(self) -> None:
        if not self._lock.acquire(blocking=False):
            self.contended.set()
            self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def test_flush_waits_for_a_batch_that_took_the_queue_but_has_not_committed(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A read after flush sees every record queued before it, even one the background batch holds.

    Issue 17: a failed turn's receipt was missing after the send returned because flush found
    the queue empty while the batch that had taken it was still uncommitted.
    """
    monkeypatch.setattr(write_soon, "GATHER_SECONDS", 60.0)
    db = _open(tmp_path / "m.db")
    lock = _SignallingLock(db._lock)
    db._lock = lock  # type: ignore[assignment]
    taken = threading.Event()
    seen: list[list[str]] = []

    def slow_batch() -> None:  # stands in for the background batch: it takes the queue, then stalls
        with db.write():
            taken.set()
            lock.contended.wait(timeout=30)

    def reader() -> None:
        db.flush()
        seen.append(_on_disk(tmp_path / "m.db"))

    try:
        db.write_soon(*NOTE, ("receipt",))
        batch = threading.Thread(target=slow_batch)
        batch.start()
        assert taken.wait(timeout=30)
        read = threading.Thread(target=reader)
        read.start()
        read.join(timeout=30)
        lock.contended.set()  # releases the batch whichever way the reader went
        batch.join(timeout=30)
        read.join(timeout=30)
        assert seen == [["receipt"]]
    finally:
        db.close()


# --- another process's writer (serve --workers N shares the file) -------------------------------------


def _hold_the_write_lock(path: Path) -> sqlite3.Connection:
    """Another process's writer in the middle of its transaction: a second connection holding the lock."""
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    other.execute(INSERT, ("theirs",))
    return other


def test_a_batch_waits_for_another_processes_writer_and_then_commits(tmp_path: Path) -> None:
    db = _open(tmp_path / "m.db")
    other = _hold_the_write_lock(tmp_path / "m.db")
    committed = threading.Event()

    def mine() -> None:
        db.write_together(lambda conn: conn.execute(INSERT, ("mine",)))
        committed.set()

    writer = threading.Thread(target=mine)
    try:
        writer.start()
        assert not committed.wait(0.3)  # still waiting: their transaction holds the lock
        other.execute("COMMIT")
        writer.join(timeout=10)
        assert committed.is_set() and _on_disk(tmp_path / "m.db") == ["theirs", "mine"]
    finally:
        other.close()
        writer.join(timeout=10)
        db.close()


def test_a_writer_that_holds_the_lock_too_long_is_one_clear_unavailable(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(dbmod, "LOCK_WAIT_SECONDS", 0.2)
    db = _open(tmp_path / "m.db")
    other = _hold_the_write_lock(tmp_path / "m.db")
    try:
        with pytest.raises(Unavailable, match="could not save"):
            db.write_together(lambda conn: conn.execute(INSERT, ("mine",)))
        other.execute("ROLLBACK")
        db.write_together(lambda conn: conn.execute(INSERT, ("mine, later",)))  # the writer is whole again
        assert _on_disk(tmp_path / "m.db") == ["mine, later"]
    finally:
        other.close()
        db.close()
