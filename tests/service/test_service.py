"""Service-level promises: schema, migrations, no plaintext at rest, atomic Clear."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from memframe import sealing
from memframe.backend.local import LocalBackend
from memframe.core.errors import InvalidInput, NotFound, SchemaTooNew, Unauthorized, Unavailable
from memframe.core.types import MEMORY_PATH, Mode, Policy
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from memframe.service.db import migrations
from memframe.service.policy import ADVANCE_CLEAR_GENERATION, read_policy


def test_migrations_are_numbered_and_recorded(service: MemoryService) -> None:
    numbers = [n for n, _, _ in migrations()]
    assert numbers == sorted(set(numbers))
    assert (49, "workspace_memory_policy") in service.db.schema_versions()
    with service.db.read() as conn:
        cols = [r[1] for r in conn.execute("PRAGMA table_info(workspace_memory_policy)")]
    assert cols == ["workspace_id", "mode", "policy_revision", "clear_generation"]


def test_reopening_applies_nothing_twice(tmp_path: Path) -> None:
    MemoryService(tmp_path / "a.db").close()
    svc = MemoryService(tmp_path / "a.db")
    assert len(svc.db.schema_versions()) == len(migrations())
    svc.close()


def test_refuses_a_database_from_a_newer_schema(tmp_path: Path) -> None:
    MemoryService(tmp_path / "a.db").close()
    with sqlite3.connect(tmp_path / "a.db") as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (9999, 'future', 0)")
    conn.close()
    with pytest.raises(SchemaTooNew, match="newer memframe"):
        MemoryService(tmp_path / "a.db")


def test_wal_and_full_sync(service: MemoryService) -> None:
    with service.db.read() as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert service.db._writer.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_missing_policy_row_reads_as_read_only_zero_zero(service: MemoryService) -> None:
    with service.db.read() as conn:
        assert read_policy(conn, "ws") == Policy(Mode.READ_ONLY, 0, 0)
        assert conn.execute("SELECT COUNT(*) FROM workspace_memory_policy").fetchone()[0] == 0


def test_generation_statement_is_conditioned_on_the_clear_row(service: MemoryService) -> None:
    """The advance is one statement that does nothing unless the Clear's own row exists."""
    with service.db.write() as conn:
        conn.execute(ADVANCE_CLEAR_GENERATION, {"ws": "ws", "path": MEMORY_PATH, "version": 1})
    assert service.get_policy(LOCAL_USER, "ws").clear_generation == 0


def test_clear_rolls_back_whole_when_the_batch_fails(service: MemoryService, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    key = sealing.new_key()
    b = LocalBackend(service, "ws", key)
    b.save("keep\n", 0)
    import memframe.service.service as svc_mod

    monkeypatch.setattr(svc_mod, "ADVANCE_CLEAR_GENERATION", "SELECT no_such_function()")
    with pytest.raises(Unavailable, match="nothing was written"):
        b.clear(1)
    assert b.load().text == "keep\n" and b.load().version == 1
    assert b.get_policy().clear_generation == 0


def test_clear_must_be_empty_and_only_on_memory(service: MemoryService) -> None:
    key = sealing.new_key()
    blob = sealing.seal(key, "not empty", workspace_id="ws", path=MEMORY_PATH, version=1)
    with pytest.raises(InvalidInput, match="empty"):
        service.put_file(LOCAL_USER, "ws", MEMORY_PATH, blob, 0, clear=True)
    empty = sealing.seal(key, "", workspace_id="ws", path="notes/a.md", version=1)
    with pytest.raises(InvalidInput, match="memory"):
        service.put_file(LOCAL_USER, "ws", "notes/a.md", empty, 0, clear=True)


@pytest.mark.parametrize("path", ["", "../x", "a/../../b", "a\x00b", "/", "a\nb"])
def test_bad_file_paths(service: MemoryService, path: str) -> None:
    with pytest.raises(InvalidInput):
        service.get_file(LOCAL_USER, "ws", path)


def test_non_members_get_not_found_like_missing_workspaces(service: MemoryService) -> None:
    service.accounts.add_user("mallory")
    with pytest.raises(NotFound) as a:
        service.get_policy("mallory", "ws")
    with pytest.raises(NotFound) as b:
        service.get_policy("mallory", "nope")
    assert str(a.value) == str(b.value)


def test_tokens_are_hashed_shown_once_and_revocable(service: MemoryService) -> None:
    token_id, token = service.accounts.create_token(LOCAL_USER, "laptop")
    assert service.accounts.authenticate(token) == LOCAL_USER
    with service.db.read() as conn:
        stored = [r[0] for r in conn.execute("SELECT token_hash FROM tokens")]
    assert token not in stored
    service.accounts.revoke_token(token_id)
    with pytest.raises(Unauthorized):
        service.accounts.authenticate(token)
    with pytest.raises(Unauthorized):
        service.accounts.authenticate("")


def _raw_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))


def test_no_plaintext_diff_or_key_at_rest(tmp_path: Path) -> None:
    """After saves, clears and undos, the database and its WAL hold none of the text."""
    db = tmp_path / "rest.db"
    service = MemoryService(db)
    service.accounts.add_user(LOCAL_USER)
    service.accounts.create_workspace("ws", LOCAL_USER)
    key = sealing.new_key()
    b = LocalBackend(service, "ws", key)
    secrets_ = [
        "Favourite tea: Lapsang souchong",
        "Allergic to peanuts — 絶対に",
        "Project codename ZEBRA-42",
    ]
    b.save("\n".join(secrets_[:2]) + "\n", 0)
    b.save("\n".join(secrets_) + "\n", 1)
    b.clear(2)
    b.undo(2, 3)
    b.save(secrets_[2] + "\n", 4)
    raw = _raw_bytes(db)
    assert len(raw) > 0
    for text in [*secrets_, "Lapsang", "ZEBRA", "絶対"]:
        for encoding in ("utf-8", "utf-16-le", "utf-16-be"):
            assert text.encode(encoding) not in raw, (text, encoding)
    assert key not in raw and key.hex().encode() not in raw
    assert b"+Project" not in raw and b"-Favourite" not in raw  # no diff lines either
    service.close()


@pytest.mark.fault
def test_full_disk_is_a_clear_error_and_changes_nothing(service: MemoryService) -> None:
    b = LocalBackend(service, "ws", sealing.new_key())
    b.save("small\n", 0)
    conn = service.db._writer
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    big = os.urandom(100_000).hex()  # does not compress away inside the seal
    with pytest.raises(Unavailable, match="nothing was written"):
        b.save(big, 1)
    assert b.load().text == "small\n" and [r.version for r in b.history()] == [1]
    assert b.save_state.last.header() == "saved; version=1"
    conn.execute("PRAGMA max_page_count = 1073741823")
    assert b.save(big, 1).version == 2
