"""Forgetting is key rotation: what `forget --before N` destroys, keeps and refuses, on each engine."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from memframe import sealing
from memframe.backend.heads import SeenHeads
from memframe.backend.local import LocalBackend
from memframe.backend.rotation import rotate
from memframe.core.edits import MemoryChange
from memframe.core.errors import (
    ChainBroken,
    DecryptionFailed,
    FenceRefused,
    KeyRotated,
    KeySessionUnavailable,
    NotFound,
    VersionConflict,
)
from memframe.core.turns import CaptureReceipt
from memframe.core.types import MEMORY_PATH, Mode
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from memframe.service.admissions import Admission
from tests.assistant.conftest import Stage
from tests.conftest import FakeClock, World

TEXTS = [f"# Memory\n- secret number {i} of the old days\n" for i in range(1, 7)]


def person(service: MemoryService, key: bytes) -> LocalBackend:
    return LocalBackend(service, "ws", key, seen=SeenHeads(None))


def stored_blobs(service: MemoryService) -> dict[str, list[bytes]]:
    """Every sealed text the database holds, by table."""
    with service.db.read() as conn:
        return {
            "versions": [bytes(r[0]) for r in conn.execute("SELECT ciphertext FROM file_versions") if r[0] is not None],
            "messages": [bytes(r[0]) for r in conn.execute("SELECT sealed_content FROM conversation_messages")],
            "proposals": [bytes(r[0]) for r in conn.execute("SELECT sealed_edits FROM workspace_memory_proposals")],
        }


def seed(service: MemoryService, key: bytes) -> LocalBackend:
    """Six versions, a stored conversation and a proposal, all under `key`."""
    backend = person(service, key)
    for i, text in enumerate(TEXTS):
        backend.save(text, i)
    backend.set_ai(True)
    backend.send("conv", "please remember the secret number 42")
    with service.db.write() as conn:
        admission = conn.execute("SELECT id FROM workspace_memory_admissions").fetchone()[0]
        raw = json.dumps([{"op": "add", "line": "- tea"}])
        edits = sealing.seal_proposal(key, raw, workspace_id="ws", proposal_id="p1")
        conn.execute(
            "INSERT INTO workspace_memory_proposals (id, workspace_id, admission_id, base_version, clear_generation,"
            " reason, sealed_edits, status, created_at) VALUES ('p1', 'ws', ?, 6, 0, 'read_only', ?, 'pending', 0)",
            (admission, edits),
        )
    return backend


def disk_bytes(service: MemoryService, request: pytest.FixtureRequest) -> bytes:
    """Every byte the engine keeps of this database on disk (SQLite: the file and its -wal;
    PostgreSQL: the cluster's table files)."""
    if service.db.path is not None:
        files = [service.db.path, service.db.path.with_name(service.db.path.name + "-wal")]
    else:
        server = request.getfixturevalue("postgres_server")
        import psycopg

        with psycopg.connect(server.url("postgres"), autocommit=True) as conn:
            conn.execute("CHECKPOINT")
        files = [p for p in (Path(server.data) / "base").rglob("*") if p.is_file()]
    return b"".join(p.read_bytes() for p in files if p.exists())


def test_forget_before_n_destroys_older_versions_and_keeps_the_rest(
    engine_service: MemoryService, request: pytest.FixtureRequest
) -> None:
    old_key, new_key = sealing.new_key(), sealing.new_key()
    backend = seed(engine_service, old_key)
    backend.prove_key()
    before = stored_blobs(engine_service)
    destroyed_versions = [s.ciphertext for s in backend.store.get_versions(MEMORY_PATH, [1, 2, 3])]
    current = backend.load()
    assert destroyed_versions[0] is not None and destroyed_versions[0][-40:] in disk_bytes(engine_service, request)

    done = backend.rotate_key(new_key, who="alice", forget_before=4, conversations=True)

    assert done.versions == {MEMORY_PATH: (1, 3, 3)} and done.messages == 2 and done.proposals == 1
    # Gone from the disk: no byte sequence of any destroyed or replaced ciphertext remains.
    disk = disk_bytes(engine_service, request)
    for blob in [*destroyed_versions, *before["versions"], *before["messages"], *before["proposals"]]:
        assert blob is not None and blob[-40:] not in disk
    # The old key opens nothing that remains; the new key opens every kept version.
    after = stored_blobs(engine_service)
    assert after["messages"] == [] and after["proposals"] == [] and len(after["versions"]) == 3
    for version, blob in zip((4, 5, 6), after["versions"], strict=True):
        with pytest.raises(DecryptionFailed):
            sealing.open_sealed(old_key, blob, workspace_id="ws", path=MEMORY_PATH, version=version)
    fresh = person(engine_service, new_key)
    assert fresh.read_revisions([4, 5, 6]) == {4: TEXTS[3], 5: TEXTS[4], 6: TEXTS[5]}
    assert fresh.load().text.encode() == current.text.encode()
    assert [r.version for r in fresh.history()] == [6, 5, 4]
    gone = fresh.forgotten()
    assert gone is not None and gone.before == 4 and gone.by == "alice"
    assert gone.line().startswith("versions 1–3 were forgotten on ")
    assert fresh.verify() == [(MEMORY_PATH, 6)]
    # The chain starts afresh at N, and the next Save chains onto the re-sealed head.
    assert fresh.save(TEXTS[0], 6).version == 7
    assert person(engine_service, new_key).verify() == [(MEMORY_PATH, 7)]
    with pytest.raises(KeyRotated, match=r"rotated on .* by local; ask them for the new key"):
        person(engine_service, old_key).load()


def test_rotation_keeps_conversations_resealed(engine_service: MemoryService) -> None:
    old_key, new_key = sealing.new_key(), sealing.new_key()
    backend = seed(engine_service, old_key)
    backend.prove_key()
    transcript = backend.transcript("conv")
    done = backend.rotate_key(new_key, who="alice")
    assert done.versions == {} and done.resealed_versions == 6 and done.resealed_messages == 2
    fresh = person(engine_service, new_key)
    assert fresh.transcript("conv") == transcript
    assert [p.id for p in fresh.proposals()] == ["p1"]
    assert fresh.read_revision(1) == TEXTS[0] and fresh.verify() == [(MEMORY_PATH, 6)]
    with pytest.raises(DecryptionFailed):
        person(engine_service, old_key).transcript("conv")


def test_a_stale_base_rotation_changes_nothing(engine_service: MemoryService) -> None:
    old_key = sealing.new_key()
    backend = seed(engine_service, old_key)
    backend.prove_key()
    before = stored_blobs(engine_service)
    other = person(engine_service, old_key)
    store = backend.store
    real = store.rotate_key

    def save_first(plan):  # type: ignore[no-untyped-def]
        other.save("a concurrent Save\n", 6)  # lands between the re-seal and the swap
        return real(plan)

    store.rotate_key = save_first  # type: ignore[method-assign]
    with pytest.raises(VersionConflict, match="changed while its key was being rotated"):
        rotate(store, old_key, sealing.new_key(), who="alice", forget_before=3)
    after = stored_blobs(engine_service)
    assert after["versions"][:6] == before["versions"] and after["messages"] == before["messages"]
    assert store.get_key_check() == sealing.key_check(old_key, "ws") and store.rotation() is None
    assert person(engine_service, old_key).load().text == "a concurrent Save\n"


def test_a_client_holding_the_old_key_never_writes(engine_service: MemoryService) -> None:
    old_key, new_key = sealing.new_key(), sealing.new_key()
    rotator = seed(engine_service, old_key)
    rotator.prove_key()
    stale = person(engine_service, old_key)
    stale.load()  # holds the head from before the rotation
    rotator.rotate_key(new_key, who="alice")
    with pytest.raises(KeyRotated):
        stale.save("written with the old key\n", 6)
    with pytest.raises(KeyRotated):
        person(engine_service, old_key).save("written with the old key\n", 6)
    assert person(engine_service, new_key).load().version == 6


def test_a_member_who_saw_the_old_head_accepts_the_resealed_one(engine_service: MemoryService) -> None:
    old_key, new_key = sealing.new_key(), sealing.new_key()
    rotator = seed(engine_service, old_key)
    rotator.prove_key()
    member = person(engine_service, old_key)
    member.load()
    rotator.rotate_key(new_key, who="alice", forget_before=2)
    again = LocalBackend(engine_service, "ws", new_key, seen=member.seen)  # the same record of what was seen
    assert again.load().text == TEXTS[-1]


def test_an_unsealed_gap_is_still_tampering(engine_service: MemoryService) -> None:
    old_key, new_key = sealing.new_key(), sealing.new_key()
    backend = seed(engine_service, old_key)
    backend.prove_key()
    backend.rotate_key(new_key, who="alice", forget_before=4)
    with engine_service.db.write() as conn:  # a server dropping the sealed record of the forgetting
        conn.execute("UPDATE workspace_key_rotations SET sealed_record = NULL")
    with pytest.raises(ChainBroken):
        person(engine_service, new_key).verify()
    other = MemoryService(engine_service.db.url) if engine_service.db.path is None else engine_service
    with other.db.write() as conn:  # or dropping versions with no record at all
        conn.execute("DELETE FROM workspace_key_rotations")
        conn.execute("DELETE FROM file_versions WHERE version = 4")
    with pytest.raises(ChainBroken):
        person(engine_service, new_key).verify()


def test_every_key_session_is_revoked_and_forgotten(engine_service: MemoryService) -> None:
    old_key = sealing.new_key()
    backend = seed(engine_service, old_key)
    backend.prove_key()
    session = backend.key_session()
    spare = engine_service.assistant.open_key_session(LOCAL_USER, "ws", old_key).id
    done = LocalBackend(engine_service, "ws", old_key, seen=SeenHeads(None)).rotate_key(sealing.new_key(), who="a")
    assert done.key_sessions_revoked >= 2
    with engine_service.db.read() as conn:
        revoked = {r[0] for r in conn.execute("SELECT key_session_id FROM key_session_revocations")}
    assert {session, spare} <= revoked
    for sid in (session, spare):
        with pytest.raises(KeySessionUnavailable):
            engine_service.key_sessions.resolve(sid, "ws")
    with pytest.raises(DecryptionFailed):  # the old key opens no session any more
        engine_service.assistant.open_key_session(LOCAL_USER, "ws", old_key)


ROTATED = "the workspace key was not rotated since the key session was opened"


def auto_stage(service: MemoryService, clock: FakeClock) -> Stage:
    """A memory in Auto at version 1, workspace AI on, and one key session under the current key."""
    key = sealing.new_key()
    backend = person(service, key)
    backend.prove_key()
    service.assistant.set_ai(LOCAL_USER, "ws", True)
    session = service.assistant.open_key_session(LOCAL_USER, "ws", key)
    stage = Stage(service, clock, key, backend, session.id)
    backend.save("# Memory\n", 0)
    stage.set_mode(Mode.AUTO)
    return stage


def capture(stage: Stage, admission: Admission, expected: int) -> CaptureReceipt:
    return stage.assistant.commit_capture(
        "ws",
        admission.credential,
        idempotency_key=f"memory:{admission.id}",
        key_session_id=admission.key_session_id,
        changes=[MemoryChange("add", "- prefers tea")],
        expected_version=expected,
    )


def test_an_in_flight_capture_under_the_old_key_is_refused_by_the_fence(
    engine_service: MemoryService, clock: FakeClock
) -> None:
    """A rotation that lands between a capture's key-session check and its batch: the fence
    refuses the capture (the key check it was made under is gone, and its session has a durable
    revocation row), and nothing of it is written. A turn admitted before the rotation and sent
    after is refused too, and a capture committed before the rotation still replays its receipt
    (until `forget` destroys its version, which the replay then says)."""
    stage = auto_stage(engine_service, clock)
    committed = stage.admit("before")
    first = capture(stage, committed, 1)
    in_flight, sent_after = stage.admit("in-flight"), stage.admit("sent-after")
    rotations: list[object] = []

    new_key = sealing.new_key()

    def rotate_once() -> None:
        if not rotations:
            rotations.append(person(engine_service, stage.key).rotate_key(new_key, who="alice"))

    stage.before_fence_batch(rotate_once)
    with pytest.raises(FenceRefused) as refused:
        capture(stage, in_flight, 2)
    assert rotations, "the rotation ran between the key-session check and the batch"
    assert ROTATED in refused.value.details["reasons"]
    assert "the workspace key was not rotated" in str(refused.value)
    with engine_service.db.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM file_versions").fetchone()[0] == 2
        revoked = conn.execute("SELECT 1 FROM key_session_revocations WHERE key_session_id = ?", (stage.key_session,))
        assert revoked.fetchone() is not None
    assert stage.fence_rows() == 1 and not stage.consumed(in_flight)
    with pytest.raises(KeySessionUnavailable, match="rotated by local after this turn began"):
        capture(stage, sent_after, 2)
    assert not stage.consumed(sent_after) and stage.fence_rows() == 1
    again = capture(stage, committed, 1)  # a transport retry of the capture committed before
    assert again.replayed and again.admission_id == first.admission_id
    assert dataclasses.replace(again.version, content_hash=first.version.content_hash) == first.version
    assert again.version.content_hash != first.version.content_hash  # the same version, re-sealed
    person(engine_service, new_key).save("# Memory\n- later\n", 2)
    person(engine_service, new_key).rotate_key(sealing.new_key(), who="alice", forget_before=3)
    with pytest.raises(NotFound, match="as version 2, which has since been forgotten"):
        capture(stage, committed, 1)


def test_a_member_with_the_new_key_reads_history_after_the_rotation(engine_service: MemoryService) -> None:
    old_key, new_key = sealing.new_key(), sealing.new_key()
    rotator = seed(engine_service, old_key)
    rotator.prove_key()
    member = person(engine_service, old_key)
    member.history()
    rotator.rotate_key(new_key, who="alice")
    again = LocalBackend(engine_service, "ws", new_key, seen=member.seen)
    assert [r.version for r in again.history(limit=2)] == [6, 5]
    with pytest.raises(KeyRotated):
        member.read_revision(6)


def test_forget_through_every_backend_kind(world: World) -> None:
    """The same rotation locally and over HTTP (in-process and a real loopback server)."""
    first = world.client()
    first.prove_key()
    for i, text in enumerate(TEXTS):
        first.save(text, i)
    stale = world.client()
    stale.load()
    old, new = world.key, sealing.new_key()
    done = first.rotate_key(new, who="alice", forget_before=3)
    assert done.versions == {MEMORY_PATH: (1, 2, 2)} and done.resealed_versions == 4
    world.key = new
    fresh = world.client()
    assert fresh.load().text == TEXTS[-1] and fresh.read_revision(3) == TEXTS[2]
    assert fresh.verify() == [(MEMORY_PATH, 6)]
    gone = fresh.forgotten()
    assert gone is not None and gone.before == 3
    with pytest.raises(KeyRotated, match="rotated on"):
        stale.save("written with the old key\n", 6)
    world.key = old
    with pytest.raises(KeyRotated, match="rotated on"):
        world.client().load()
    assert first.save("after the rotation\n", 6).version == 7


def test_an_old_key_is_neither_kept_nor_given_a_key_session(engine_service: MemoryService) -> None:
    old_key = sealing.new_key()
    rotator = seed(engine_service, old_key)
    rotator.prove_key()
    rotator.rotate_key(sealing.new_key(), who="alice")
    with pytest.raises(KeyRotated, match="by local"):  # what `memframe key import` of an old export says
        person(engine_service, old_key).prove_key()
    with pytest.raises(KeyRotated):  # an Assistant send under the old key opens no key session
        person(engine_service, old_key).key_session()


def test_only_the_owner_rotates(engine_service: MemoryService) -> None:
    key = sealing.new_key()
    seed(engine_service, key).prove_key()
    engine_service.accounts.add_user("bob")
    engine_service.accounts.add_member("ws", "bob")
    member = LocalBackend(engine_service, "ws", key, user="bob", seen=SeenHeads(None))
    from memframe.core.errors import Forbidden

    with pytest.raises(Forbidden, match="Only the owner"):
        member.rotate_key(sealing.new_key(), who="bob")
    assert member.store.get_key_check() == sealing.key_check(key, "ws") and member.store.rotation() is None
