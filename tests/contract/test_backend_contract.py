"""The backend contract, one body per promise, run against every backend kind."""

from __future__ import annotations

import pytest

from memframe.core.errors import (
    DocumentDeleted,
    InvalidInput,
    NotFound,
    PolicyConflict,
    VersionConflict,
)
from memframe.core.types import MEMORY_PATH, MEMORY_RECALL_MAX_BYTES, Author, Mode, Operation, Policy
from tests.conftest import World


def test_never_created_memory_loads_empty_at_version_zero(world: World) -> None:
    doc = world.client().load()
    assert (doc.text, doc.version, doc.deleted) == ("", 0, False)


def test_create_only_then_exact_acknowledged_versions(world: World) -> None:
    b = world.client()
    assert b.save("# Memory\n- one\n", 0).version == 1
    assert b.save("# Memory\n- two\n", 1).version == 2
    doc = world.client().load()
    assert (doc.text, doc.version) == ("# Memory\n- two\n", 2)


def test_create_only_conflicts_when_document_exists(world: World) -> None:
    world.client().save("first\n", 0)
    with pytest.raises(VersionConflict) as err:
        world.client().save("second\n", 0)
    assert err.value.current_version == 1
    assert world.client().load().text == "first\n"


def test_stale_base_is_a_conflict_that_changes_nothing(world: World) -> None:
    alice, bob = world.client(), world.client()
    alice.save("v1\n", 0)
    alice.save("alice\n", 1)
    with pytest.raises(VersionConflict) as err:
        bob.save("bob\n", 1)
    assert err.value.current_version == 2
    assert [r.version for r in alice.history()] == [2, 1]
    assert alice.load().text == "alice\n"


def test_base_ahead_of_server_is_a_conflict(world: World) -> None:
    world.client().save("v1\n", 0)
    with pytest.raises(VersionConflict) as err:
        world.client().save("x\n", 7)
    assert err.value.current_version == 1


def test_history_newest_first_with_metadata(world: World) -> None:
    b = world.client()
    b.save("héllo\n", 0)
    b.save("two\n", 1)
    b.clear(2)
    b.undo(1, 3)
    rows = b.history()
    assert [r.version for r in rows] == [4, 3, 2, 1]
    assert [r.operation for r in rows] == [Operation.UNDO, Operation.CLEAR, Operation.SAVE, Operation.SAVE]
    assert rows[0].restored_from == 1
    assert rows[-1].size == len("héllo\n".encode())
    assert all(r.author is Author.PERSON for r in rows)
    assert all(len(r.content_hash) == 64 for r in rows)


def test_history_pages(world: World) -> None:
    b = world.client()
    for v in range(12):
        b.save(f"text {v}\n", v)
    first = b.history(limit=5)
    second = b.history(limit=5, before=first[-1].version)
    assert [r.version for r in first] == [12, 11, 10, 9, 8]
    assert [r.version for r in second] == [7, 6, 5, 4, 3]


def test_read_revision_decrypts_any_version(world: World) -> None:
    b = world.client()
    b.save("one\n", 0)
    b.save("two\n", 1)
    assert world.client().read_revision(1) == "one\n"
    with pytest.raises(NotFound):
        b.read_revision(9)


def test_clear_writes_empty_revision_and_advances_generation_keeping_mode(world: World) -> None:
    b = world.client()
    b.save("secret plans\n", 0)
    b.set_policy(Mode.AUTO, 0)
    info = b.clear(1)
    assert (info.version, info.operation, info.size) == (2, Operation.CLEAR, 0)
    assert b.load().text == ""
    assert b.get_policy() == Policy(Mode.AUTO, 1, 1)


def test_clear_that_loses_the_race_writes_nothing_and_keeps_generation(world: World) -> None:
    alice, bob = world.client(), world.client()
    alice.save("v1\n", 0)
    bob.save("newer text from bob\n", 1)
    with pytest.raises(VersionConflict) as err:
        alice.clear(1)
    assert err.value.current_version == 2
    assert alice.load().text == "newer text from bob\n"
    assert alice.get_policy().clear_generation == 0
    # the explicit retry against the newer version succeeds
    alice.clear(2)
    assert alice.get_policy().clear_generation == 1


def test_clear_of_never_created_memory(world: World) -> None:
    b = world.client()
    assert b.clear(0).version == 1
    assert b.get_policy().clear_generation == 1


def test_undo_restores_as_new_revision_without_rewinding(world: World) -> None:
    b = world.client()
    b.save("keep me\n", 0)
    b.set_policy(Mode.AUTO, 0)
    b.clear(1)
    policy = b.get_policy()
    info = b.undo(1, 2)
    assert info.version == 3 and info.restored_from == 1
    assert b.load().text == "keep me\n"
    assert b.get_policy() == policy  # generation and policy revision untouched


def test_undo_against_stale_base_never_overwrites_newer_text(world: World) -> None:
    alice, bob = world.client(), world.client()
    alice.save("old\n", 0)
    alice.save("mid\n", 1)
    bob.save("newest\n", 2)
    with pytest.raises(VersionConflict):
        alice.undo(1, 2)
    assert alice.load().text == "newest\n"


def test_undo_of_missing_revision(world: World) -> None:
    b = world.client()
    b.save("x\n", 0)
    with pytest.raises(NotFound):
        b.undo(5, 1)
    assert b.load().version == 1


def test_oversized_text_is_saved_intact(world: World) -> None:
    big = ("- " + "記憶" * 50 + "\n") * 40
    assert len(big.encode()) > MEMORY_RECALL_MAX_BYTES
    b = world.client()
    info = b.save(big, 0)
    doc = world.client().load()
    assert doc.text == big and doc.oversized and info.size == len(big.encode())


def test_policy_default_and_compare_and_set(world: World) -> None:
    alice, bob = world.client(), world.client()
    assert alice.get_policy() == Policy(Mode.READ_ONLY, 0, 0)
    assert alice.set_policy(Mode.OFF, 0) == Policy(Mode.OFF, 1, 0)
    with pytest.raises(PolicyConflict) as err:
        bob.set_policy(Mode.AUTO, 0)
    assert err.value.current_revision == 1 and err.value.current_mode == "off"
    assert bob.get_policy().mode is Mode.OFF
    assert bob.set_policy(Mode.AUTO, 1).revision == 2


def test_setting_the_same_mode_is_not_a_change(world: World) -> None:
    b = world.client()
    assert b.set_policy(Mode.READ_ONLY, 0) == Policy(Mode.READ_ONLY, 0, 0)


@pytest.mark.parametrize("mode", list(Mode))
def test_people_edit_in_every_mode(world: World, mode: Mode) -> None:
    b = world.client()
    b.set_policy(mode, 0)
    if mode is Mode.READ_ONLY:
        assert b.get_policy().revision == 0
    assert b.save("edited\n", 0).version == 1


def test_wrong_key_is_decryption_failed(world: World) -> None:
    from memframe import sealing
    from memframe.core.errors import DecryptionFailed

    world.client().save("private\n", 0)
    other = World(world.kind, world.service, world.workspace_id, sealing.new_key(), world.user, world.make)
    try:
        with pytest.raises(DecryptionFailed):
            other.client().load()
    finally:
        other.close()


def test_save_state_tracks_acknowledgement_and_conflict(world: World) -> None:
    alice, bob = world.client(), world.client()
    assert alice.save_state.last.header() == "none"
    alice.save("a\n", 0)
    assert alice.save_state.last.header() == "saved; version=1"
    bob.save("b\n", 1)
    with pytest.raises(VersionConflict):
        alice.save("a2\n", 1)
    assert alice.save_state.last.header() == "conflict; version=2"


def test_deleted_memory_is_a_tombstone_plain_writes_do_not_revive(world: World) -> None:
    b = world.client()
    b.save("x\n", 0)
    world.service.delete_file(world.user, world.workspace_id, MEMORY_PATH, 1)
    doc = b.load()
    assert doc.deleted and doc.version == 2 and doc.text == ""
    with pytest.raises(DocumentDeleted):
        b.save("again\n", 2)
    assert b.save("again\n", 2, revive=True).version == 3
    assert not b.load().deleted


def test_bad_base_version(world: World) -> None:
    with pytest.raises((InvalidInput, VersionConflict)):
        world.client().save("x", -1)


def test_people_manage_any_file_including_the_memory(world: World) -> None:
    b = world.client()
    assert b.read_file("notes/a.md") == (0, "", False)
    assert b.write_file("notes/a.md", "hello\n", 0).version == 1
    assert b.write_file(MEMORY_PATH, "memory by hand\n", 0).version == 1
    assert world.client().read_file("notes/a.md") == (1, "hello\n", False)
    assert sorted(b.list_files()) == [(MEMORY_PATH, 1, False), ("notes/a.md", 1, False)]
    assert b.load().text == "memory by hand\n"


def test_head_is_the_head_revision_and_the_policy_without_text(world: World) -> None:
    """What the frame's poll reads (issue 21): cheap, never decrypting, the same on every backend."""
    b = world.client()
    empty = b.head()
    assert (empty.version, empty.info, empty.policy.mode) == (0, None, Mode.READ_ONLY)
    b.save("# Memory\n", 0)
    other = world.client()
    other.clear(1)
    other.set_policy(Mode.AUTO, 0)
    head = b.head()
    assert head.version == 2 and head.info is not None and head.info.operation is Operation.CLEAR
    assert (head.policy.mode, head.policy.revision, head.policy.clear_generation) == (Mode.AUTO, 1, 1)
