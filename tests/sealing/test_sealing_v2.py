"""Sealing v2 over every backend kind: the review's tamperings, each refused in one line.

A copied row, a swapped transcript message, a deleted newest row with `current_version`
lowered, a foreign workspace's ciphertext, a wrong key on an empty workspace, a 3-byte or a
60-byte Clear: each is refused with one clear error, nothing is written, and recall withholds.
The same bodies run over the local backend, the in-process remote and a real uvicorn server.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memframe import sealing
from memframe.backend.sealed import SealedBackend
from memframe.core.errors import ChainBroken, DecryptionFailed, InvalidInput, RolledBack, WrongKey
from memframe.core.types import MEMORY_PATH, Mode, RecallStatus
from memframe.sealing import keyfiles
from memframe.service import MemoryService
from tests.conftest import World
from tests.reliability.support import dump, raw


def _db(world: World) -> Path | str:
    """The database file, or the PostgreSQL URL, that the world's service runs on."""
    db = world.service.db
    return Path(db.path) if db.path is not None else db.url  # type: ignore[attr-defined]


def _rows(world: World) -> dict[int, tuple[int, str, bytes]]:
    with raw(_db(world)) as conn:
        return {
            int(v): (int(size), str(digest), bytes(blob))
            for v, size, digest, blob in conn.execute(
                "SELECT version, size, content_hash, ciphertext FROM file_versions WHERE workspace_id = ? AND path = ?",
                (world.workspace_id, MEMORY_PATH),
            )
        }


def _overwrite(world: World, version: int, row: tuple[int, str, bytes]) -> None:
    """What a server (or anyone who can write its database) might do: replace a version's row."""
    size, digest, blob = row
    with raw(_db(world)) as conn:
        conn.execute(
            "UPDATE file_versions SET size = ?, content_hash = ?, ciphertext = ?"
            " WHERE workspace_id = ? AND path = ? AND version = ?",
            (size, digest, blob, world.workspace_id, MEMORY_PATH, version),
        )


def _one_line(exc: BaseException, *secrets: str) -> None:
    message = str(exc)
    assert message and "\n" not in message and "Traceback" not in message
    for secret in secrets:
        assert secret not in message


def _recall_status(world: World, client: SealedBackend) -> RecallStatus:
    client.set_ai(True)
    return client.send("conv-recall", "what do you remember?").calls[0].status


def test_a_clean_history_verifies(world: World) -> None:
    b = world.client()
    v = 0
    for text in ["one\n", "two\n", "three\n" * 40]:
        v = b.save(text, v).version
    v = b.clear(v).version
    b.undo(2, v)
    b.write_file("notes/a.md", "a note\n", 0)
    assert dict(b.verify()) == {MEMORY_PATH: 5, "notes/a.md": 1}
    fresh = world.client()  # another client, the same machine: it verifies too
    assert dict(fresh.verify())[MEMORY_PATH] == 5


def test_a_copied_row_is_refused_everywhere_and_recall_withholds(world: World) -> None:
    b = world.client()
    b.save("# Memory\n- the old plan\n", 0)
    b.save("# Memory\n- the new plan\n", 1)
    b.prove_key()  # the key check was written at init: a key session does not depend on the memory
    rows = _rows(world)
    _overwrite(world, 2, rows[1])  # revision 1's ciphertext, size and hash in revision 2's row
    before = dump(_db(world))
    reader = World(world.kind, world.service, world.workspace_id, world.key, world.user, world.make)
    try:
        other = reader.client()
        with pytest.raises(DecryptionFailed) as err:
            other.load()
        _one_line(err.value, "old plan")
        with pytest.raises(DecryptionFailed):
            other.read_revision(2)
        with pytest.raises(ChainBroken, match="version 2"):
            other.verify()
        assert _recall_status(world, other) is RecallStatus.UNAVAILABLE
    finally:
        reader.close()
    assert dump(_db(world))["file_versions"] == before["file_versions"], "a refused read wrote a version"


def test_a_deleted_newest_row_is_a_rollback_naming_both_versions(world: World) -> None:
    b = world.client()
    for v in range(5):
        b.save(f"- fact {v}\n", v)
    assert b.load().version == 5
    with raw(_db(world)) as conn:  # drop revisions 4 and 5 and lower current_version
        conn.execute(
            "DELETE FROM file_versions WHERE workspace_id = ? AND path = ? AND version > 3",
            (world.workspace_id, MEMORY_PATH),
        )
        conn.execute(
            "UPDATE files SET current_version = 3 WHERE workspace_id = ? AND path = ?",
            (world.workspace_id, MEMORY_PATH),
        )
    before = dump(_db(world))["file_versions"]
    again = world.client()  # a new client on the same machine remembers what was seen
    with pytest.raises(RolledBack) as err:
        again.load()
    assert "version 3" in str(err.value) and "version 5" in str(err.value)
    _one_line(err.value, "fact")
    with pytest.raises(RolledBack):
        again.save("- a draft that must not land\n", 3)
    with pytest.raises(RolledBack):
        again.history()
    with pytest.raises(RolledBack):
        again.verify()
    assert dump(_db(world))["file_versions"] == before, "nothing is written over a rolled-back history"


def test_another_text_at_a_seen_version_is_refused(world: World) -> None:
    b = world.client()
    b.save("- first\n", 0)
    b.save("- second\n", 1)
    # A genuine, well-sealed version 2 that this machine did not see (a fork of the history).
    fork = sealing.seal(world.key, "- forked\n", workspace_id=world.workspace_id, path=MEMORY_PATH, version=2)
    _overwrite(world, 2, (len(b"- forked\n"), sealing.content_hash(fork), fork))
    with pytest.raises(RolledBack, match="another text as version 2"):
        world.client().load()


def test_a_foreign_workspaces_ciphertext_is_refused(world: World) -> None:
    b = world.client()
    b.save("- ours\n", 0)
    foreign = sealing.seal(world.key, "- theirs\n", workspace_id="elsewhere", path=MEMORY_PATH, version=1)
    _overwrite(world, 1, (9, sealing.content_hash(foreign), foreign))
    reader = World(world.kind, world.service, world.workspace_id, world.key, world.user, world.make)
    try:
        with pytest.raises(DecryptionFailed) as err:
            reader.client().load()
        _one_line(err.value, "theirs")
    finally:
        reader.close()


def test_a_v1_text_is_refused_once_the_chain_began(world: World) -> None:
    b = world.client()
    b.save("- one\n", 0)
    b.save("- two\n", 1)
    old = sealing.seal_v1(world.key, "- planted\n", workspace_id=world.workspace_id, path=MEMORY_PATH)
    _overwrite(world, 2, (10, sealing.content_hash(old), old))
    with pytest.raises(DecryptionFailed, match="format due here"):
        world.client().load()
    with pytest.raises(ChainBroken, match="version 2"):
        world.client().verify()


def test_old_v1_versions_keep_opening_and_the_chain_starts_after_them(world: World) -> None:
    """A document sealed before v2: its v1 versions open; the first new save starts the chain."""
    b = world.client()
    b.save("placeholder\n", 0)  # makes the document exist; then make it what an old memframe stored
    old = sealing.seal_v1(world.key, "- from before\n", workspace_id=world.workspace_id, path=MEMORY_PATH)
    _overwrite(world, 1, (14, sealing.content_hash(old), old))
    fresh = World(world.kind, world.service, world.workspace_id, world.key, world.user, world.make)
    try:
        c = fresh.client()
        c.seen._docs.clear()  # a machine that never saw the placeholder
        doc = c.load()
        assert doc.text == "- from before\n" and doc.version == 1
        c.save("- after\n", 1)
        head = sealing.header(_rows(world)[2][2])
        assert head is not None and head.since == 2
        assert c.read_revision(1) == "- from before\n"
        assert dict(c.verify())[MEMORY_PATH] == 2
    finally:
        fresh.close()


def test_a_wrong_key_is_refused_on_an_empty_workspace(world: World) -> None:
    owner = world.client()
    owner.prove_key()  # the first key holder writes the key check (what `init` does)
    owner.key_session()
    stranger = World(world.kind, world.service, world.workspace_id, sealing.new_key(), world.user, world.make)
    try:
        client = stranger.client()
        with pytest.raises(WrongKey) as err:
            client.key_session()
        _one_line(err.value)
        with pytest.raises(WrongKey):
            client.prove_key()
    finally:
        stranger.close()
    assert owner.load().version == 0, "nothing was written under the wrong key"


def test_the_first_verified_open_writes_the_key_check(world: World) -> None:
    """An existing workspace without a key check gets one the first time a key opens its memory."""
    b = world.client()
    b.save("- tea\n", 0)
    assert b.store.get_key_check() is None
    b.key_session()
    assert b.store.get_key_check() == sealing.key_check(world.key, world.workspace_id)


@pytest.mark.parametrize("size", [3, 27, 28, 60, 72, 74])
def test_a_clear_must_be_exactly_a_sealed_empty_text(world: World, size: int) -> None:
    b = world.client()
    b.save("- keep me\n", 0)
    before = dump(_db(world))
    body = sealing.MAGIC + bytes(size - 4) if size >= 4 else b"abc"
    with pytest.raises(InvalidInput) as err:
        b.store.put_file(MEMORY_PATH, body, 1, clear=True)
    _one_line(err.value)
    assert dump(_db(world)) == before
    assert b.load().text == "- keep me\n" and b.get_policy().clear_generation == 0


@pytest.mark.parametrize("body", [b"", b"abc", bytes(27), bytes(28), bytes(100)], ids=["0", "3", "27", "28", "v1"])
def test_a_malformed_put_is_refused_at_the_door(world: World, body: bytes) -> None:
    b = world.client()
    before = dump(_db(world))
    with pytest.raises(InvalidInput):
        b.store.put_file("notes/x.md", body, 0)
    assert dump(_db(world)) == before


def test_a_swapped_transcript_message_is_refused(world: World) -> None:
    b = world.client()
    b.save("- tea\n", 0)
    b.set_ai(True)
    b.set_policy(Mode.READ_ONLY, 0)
    b.send("conv", "first question")
    b.send("conv", "second question")
    assert next(m for _, m in b.transcript("conv")) == "first question"
    with raw(_db(world)) as conn:  # swap the two people's messages (seq 1 and 3)
        rows = dict(
            conn.execute("SELECT seq, sealed_content FROM conversation_messages WHERE conversation_id = 'conv'")
        )
        conn.execute("UPDATE conversation_messages SET sealed_content = ? WHERE seq = 1", (rows[3],))
        conn.execute("UPDATE conversation_messages SET sealed_content = ? WHERE seq = 3", (rows[1],))
    with pytest.raises(DecryptionFailed) as err:
        b.transcript("conv")
    _one_line(err.value, "question")


def test_the_seen_record_holds_no_text_and_lives_beside_the_key(world: World) -> None:
    from memframe import paths

    b = world.client()
    b.save("- the secret plan\n", 0)
    files = list((paths.home() / "keys").rglob("*.seen.json"))
    assert files and all("secret" not in f.read_text() for f in files)
    assert b.seen.get(MEMORY_PATH) is not None and b.seen.get(MEMORY_PATH).version == 1  # type: ignore[union-attr]


def test_init_writes_the_key_check_and_verify_reports_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from memframe import paths
    from memframe.cli import EXIT_ERROR, main

    assert main(["init"]) == 0
    service = MemoryService(paths.local_database())
    try:
        assert service.get_key_check("local", "default") is not None
    finally:
        service.close()
    text = tmp_path / "m.md"
    text.write_text("- one\n", encoding="utf-8")
    assert main(["save", str(text), "--base", "0"]) == 0
    assert main(["save", str(text), "--base", "1"]) == 0
    capsys.readouterr()
    assert main(["verify"]) == 0
    assert "chains" in capsys.readouterr().out
    with raw(paths.local_database()) as conn:
        (blob,) = conn.execute("SELECT ciphertext FROM file_versions WHERE version = 1").fetchone()
        conn.execute("UPDATE file_versions SET ciphertext = ? WHERE version = 2", (blob,))
    code = main(["verify"])
    err = capsys.readouterr().err
    assert code == EXIT_ERROR and err.startswith("memframe: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and "one" not in err.replace("memframe", "")


def test_importing_a_wrong_key_is_refused_and_keeps_the_right_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memframe import paths
    from memframe.cli import EXIT_ERROR, main

    assert main(["init"]) == 0
    right = paths.key_file("default").read_bytes()
    stranger = tmp_path / "stranger.key"
    stranger.write_bytes(keyfiles.encode_key_file(sealing.new_key(), "default", "pass"))
    monkeypatch.setenv("MEMFRAME_EXPORT_PASSPHRASE", "pass")
    capsys.readouterr()
    assert main(["key", "import", str(stranger), "--force"]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith("memframe: ") and err.count("\n") == 1 and "not the key" in err
    assert paths.key_file("default").read_bytes() == right
