"""`Database.write_soon`: records a read leaves behind commit soon, never after what follows them."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from memframe.core.errors import Unavailable
from memframe.service import db as dbmod
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


def test_a_queued_record_commits_with_the_next_write_and_before_it(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(dbmod, "GATHER_SECONDS", 60.0)  # the background batch never comes in this test
    db = _open(tmp_path / "m.db")
    try:
        db.write_soon((INSERT, ("receipt 1",)), (INSERT, ("receipt 2",)))
        assert _on_disk(tmp_path / "m.db") == []
        with db.write() as conn:
            conn.execute(INSERT, ("answer",))
        assert _on_disk(tmp_path / "m.db") == ["receipt 1", "receipt 2", "answer"]
    finally:
        db.close()


def test_a_rolled_back_write_gives_the_queued_records_back(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(dbmod, "GATHER_SECONDS", 60.0)
    db = _open(tmp_path / "m.db")
    try:
        db.write_soon((INSERT, ("receipt",)))
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
            db.write_soon((INSERT, (f"receipt {n}",)))
        deadline = time.monotonic() + 10
        while len(_on_disk(tmp_path / "m.db")) < 50 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _on_disk(tmp_path / "m.db") == [f"receipt {n}" for n in range(50)]
    finally:
        db.close()


def test_close_commits_what_is_queued_and_then_refuses_more(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(dbmod, "GATHER_SECONDS", 60.0)
    db = _open(tmp_path / "m.db")
    db.write_soon((INSERT, ("last receipt",)))
    db.close()  # does not wait out the gathering
    assert _on_disk(tmp_path / "m.db") == ["last receipt"]
    with pytest.raises(Unavailable):
        db.write_soon((INSERT, ("too late",)))


def test_a_record_that_breaks_a_constraint_is_dropped_not_retried_forever(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(dbmod, "GATHER_SECONDS", 60.0)
    db = _open(tmp_path / "m.db")
    try:
        with db.write() as conn:
            conn.execute(INSERT, ("taken",))
        db.write_soon((INSERT, ("taken",)))
        with db.write() as conn:  # the caller's own batch still commits
            conn.execute(INSERT, ("answer",))
        assert _on_disk(tmp_path / "m.db") == ["taken", "answer"]
        db.flush()
    finally:
        db.close()
