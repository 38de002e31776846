"""Import with its source: the file's name is sealed with the version, on every backend and engine.

The server stores the note as ciphertext it cannot read or move: a note swapped between versions, or
sealed under another key, does not open and is reported as tampering; a key rotation re-seals it
with its version, and the old-key bytes leave the disk.
"""

from __future__ import annotations

import pytest

from memframe import sealing
from memframe.backend.blame_input import revisions
from memframe.backend.heads import SeenHeads
from memframe.backend.local import LocalBackend
from memframe.core.blame import blame
from memframe.core.errors import ChainBroken, DecryptionFailed, InvalidInput
from memframe.core.types import MEMORY_PATH
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from tests.conftest import World
from tests.service.test_forgetting import disk_bytes

#: A name no other byte of a test database holds, so finding it on disk means it was stored in clear.
NAME = "zebra-notes-7Q.md"
FIRST = "# Prefs\n- tea\n"
IMPORTED = FIRST + "\n- use uv\n"


def notes(service: MemoryService) -> dict[int, bytes | None]:
    """version -> the sealed source note the database holds."""
    with service.db.read() as conn:
        rows = conn.execute(
            "SELECT version, source_note FROM file_versions WHERE workspace_id = 'ws' AND path = ?", (MEMORY_PATH,)
        ).fetchall()
    return {int(v): None if n is None else bytes(n) for v, n in rows}


def set_note(service: MemoryService, version: int, note: bytes | None) -> None:
    """What a server could do to the notes it stores."""
    with service.db.write() as conn:
        conn.execute(
            "UPDATE file_versions SET source_note = ? WHERE workspace_id = 'ws' AND path = ? AND version = ?",
            (note, MEMORY_PATH, version),
        )


def test_the_name_travels_sealed_and_comes_back_with_the_versions_metadata(world: World) -> None:
    backend = world.client()
    backend.save(FIRST, 0)
    info = backend.save(IMPORTED, 1, source=NAME)
    assert info.version == 2 and info.source_note is not None and NAME.encode() not in info.source_note
    reader = world.client()
    page = reader.history()
    assert [i.source_note is not None for i in page] == [True, False]
    assert [reader.source_of(i) for i in page] == [NAME, None]
    stored = reader.store.get_versions(MEMORY_PATH, [1, 2])
    assert stored[1].info.source_note == page[0].source_note and stored[0].info.source_note is None
    lines = blame(revisions(reader, 2, {}))
    assert [(b.version, b.source, b.imported_from) for b in lines][-1] == (2, NAME, f"imported from {NAME}")
    assert {b.source for b in lines if b.version == 1} == {None}


def test_a_name_blame_cannot_print_is_refused_before_anything_is_sent(world: World) -> None:
    backend = world.client()
    backend.save(FIRST, 0)
    for bad in ("", "a\tb.md", "line\nbreak.md", "é" * 101):
        with pytest.raises(InvalidInput, match="nothing was saved"):
            backend.save(IMPORTED, 1, source=bad)
    assert backend.load().version == 1


def test_the_database_holds_no_plaintext_name(engine_service: MemoryService, request: pytest.FixtureRequest) -> None:
    backend = LocalBackend(engine_service, "ws", sealing.new_key(), seen=SeenHeads(None))
    backend.save(FIRST, 0)
    backend.save(IMPORTED, 1, source=NAME)
    assert backend.source_of(backend.history(limit=1)[0]) == NAME
    disk = disk_bytes(engine_service, request)
    sealed = notes(engine_service)[2]
    assert sealed is not None and sealed[-40:] in disk  # the sealed note is there, and only it
    assert NAME.encode() not in disk and NAME.encode("utf-16-le") not in disk


def test_a_note_swapped_between_versions_or_forged_is_refused(service: MemoryService) -> None:
    key = sealing.new_key()
    backend = LocalBackend(service, "ws", key, seen=SeenHeads(None))
    backend.save(FIRST, 0)
    backend.save(IMPORTED, 1, source="CLAUDE.md")
    backend.save(IMPORTED + "- two\n", 2, source="AGENTS.md")
    held = notes(service)
    set_note(service, 2, held[3])
    set_note(service, 3, held[2])
    with pytest.raises(DecryptionFailed, match=r"version 2 .*tampering"):
        list(revisions(backend, 3, {}))
    set_note(service, 2, None)
    set_note(service, 3, None)
    set_note(service, 1, held[2])  # moved onto a version that had none
    with pytest.raises(DecryptionFailed, match=r"version 1 .*tampering"):
        blame(revisions(backend, 3, {}))
    forged = sealing.seal_source(sealing.new_key(), "evil.md", workspace_id="ws", path=MEMORY_PATH, version=1)
    set_note(service, 1, forged)  # well formed, under another key
    with pytest.raises(DecryptionFailed, match="tampering") as caught:
        backend.source_of(backend.history(limit=1, before=2)[0])
    assert "evil" not in str(caught.value)
    with pytest.raises(ChainBroken, match=r"version 1 of .*source note does not open"):
        backend.verify()  # `memframe verify` opens every note too, not only blame
    set_note(service, 1, held[1])  # None: the untouched history reads again
    set_note(service, 2, held[2])
    set_note(service, 3, held[3])
    assert [b.source for b in blame(revisions(backend, 3, {}))][-2:] == ["CLAUDE.md", "AGENTS.md"]
    assert backend.verify() == [(MEMORY_PATH, 3)]


def test_the_server_takes_only_a_sealed_name_and_only_on_a_save(service: MemoryService) -> None:
    key = sealing.new_key()
    LocalBackend(service, "ws", key).save(FIRST, 0)
    body = sealing.seal(key, IMPORTED, workspace_id="ws", path=MEMORY_PATH, version=2)
    good = sealing.seal_source(key, NAME, workspace_id="ws", path=MEMORY_PATH, version=2)
    too_long = sealing.seal_source(key, "x" * 201, workspace_id="ws", path=MEMORY_PATH, version=2)
    for bad in (b"CLAUDE.md", b"\x00" * 80, too_long, body):
        with pytest.raises(InvalidInput, match="source note"):
            service.put_file(LOCAL_USER, "ws", MEMORY_PATH, body, 1, source_note=bad)
    empty = sealing.seal(key, "", workspace_id="ws", path=MEMORY_PATH, version=2)
    with pytest.raises(InvalidInput, match="Only a Save"):
        service.put_file(LOCAL_USER, "ws", MEMORY_PATH, empty, 1, clear=True, source_note=good)
    with pytest.raises(InvalidInput, match="Only a Save"):
        service.put_file(LOCAL_USER, "ws", MEMORY_PATH, body, 1, restored_from=1, source_note=good)
    assert service.list_versions(LOCAL_USER, "ws", MEMORY_PATH)[0].version == 1
    assert service.put_file(LOCAL_USER, "ws", MEMORY_PATH, body, 1, source_note=good).source_note == good


def test_a_rotation_keeps_the_note_readable_with_the_new_key_and_the_old_bytes_go(
    engine_service: MemoryService, request: pytest.FixtureRequest
) -> None:
    old_key, new_key = sealing.new_key(), sealing.new_key()
    backend = LocalBackend(engine_service, "ws", old_key, seen=SeenHeads(None))
    backend.prove_key()
    backend.save(FIRST, 0)
    backend.save(IMPORTED, 1, source="CLAUDE.md")
    backend.save(IMPORTED + "- two\n", 2)
    backend.save(IMPORTED + "- two\n- three\n", 3, source=NAME)
    before = notes(engine_service)
    assert before[4] is not None and before[4][-40:] in disk_bytes(engine_service, request)
    backend.rotate_key(new_key, who="alice", forget_before=3)
    after = notes(engine_service)
    assert sorted(after) == [3, 4] and after[3] is None and after[4] is not None and after[4] != before[4]
    disk = disk_bytes(engine_service, request)
    for old in (before[2], before[4]):
        assert old is not None and old[-40:] not in disk
    with pytest.raises(DecryptionFailed):
        sealing.open_source(old_key, after[4], workspace_id="ws", path=MEMORY_PATH, version=4)
    fresh = LocalBackend(engine_service, "ws", new_key, seen=SeenHeads(None))
    assert [fresh.source_of(i) for i in fresh.history()] == [NAME, None]
    assert [b.source for b in blame(revisions(fresh, 4, {}))][-1] == NAME


def test_a_rotation_through_every_backend_kind_reseals_the_notes(world: World) -> None:
    first = world.client()
    first.prove_key()
    first.save(FIRST, 0)
    first.save(IMPORTED, 1, source="CLAUDE.md")
    new = sealing.new_key()
    done = first.rotate_key(new, who="alice")
    assert done.resealed_versions == 2
    assert [first.source_of(i) for i in first.history()] == ["CLAUDE.md", None]
    world.key = new
    member = world.client()
    assert member.source_of(member.history(limit=1)[0]) == "CLAUDE.md"


def test_a_rotation_that_leaves_a_note_under_the_old_key_changes_nothing(service: MemoryService) -> None:
    old_key = sealing.new_key()
    backend = LocalBackend(service, "ws", old_key, seen=SeenHeads(None))
    backend.prove_key()
    backend.save(FIRST, 0)
    backend.save(IMPORTED, 1, source="CLAUDE.md")
    real = backend.store.rotate_key

    def without_notes(plan):  # type: ignore[no-untyped-def]
        import dataclasses

        return real(dataclasses.replace(plan, notes=[]))

    backend.store.rotate_key = without_notes  # type: ignore[method-assign]
    before = notes(service)
    with pytest.raises(InvalidInput, match="source notes"):
        backend.rotate_key(sealing.new_key(), who="alice")
    assert notes(service) == before  # still the old key's note, which the old key still opens
    reader = LocalBackend(service, "ws", old_key, seen=SeenHeads(None))
    assert reader.source_of(reader.history(limit=1)[0]) == "CLAUDE.md"


def test_a_note_opens_only_at_its_own_workspace_path_and_version() -> None:
    key = sealing.new_key()
    note = sealing.seal_source(key, NAME, workspace_id="ws", path=MEMORY_PATH, version=2)
    assert sealing.open_source(key, note, workspace_id="ws", path=MEMORY_PATH, version=2) == NAME
    for workspace, path, version in (("other", MEMORY_PATH, 2), ("ws", "notes/a.md", 2), ("ws", MEMORY_PATH, 3)):
        with pytest.raises(DecryptionFailed):
            sealing.open_source(key, note, workspace_id=workspace, path=path, version=version)
    text = sealing.seal(key, NAME, workspace_id="ws", path=MEMORY_PATH, version=2)
    with pytest.raises(DecryptionFailed):  # a version's text is no note, nor a note a text
        sealing.open_source(key, text, workspace_id="ws", path=MEMORY_PATH, version=2)
    with pytest.raises(DecryptionFailed):
        sealing.open_sealed(key, note, workspace_id="ws", path=MEMORY_PATH, version=2)
