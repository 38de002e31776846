"""A key rotation over one request's bound: uploaded in parts, swapped in one transaction.

A remote `forget` of a long history sends more re-sealed ciphertext than the server takes in one
request (2 MiB), so its records are staged in parts first and the rotation names the upload. The
staged rows are read by nothing but that rotation, a stale base still refuses the whole swap, and
an upload left behind is cleaned away.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os

import pytest

from memframe import sealing
from memframe.backend.heads import SeenHeads
from memframe.backend.local import LocalBackend
from memframe.backend.rotation import rotate
from memframe.core.errors import Forbidden, NotFound, VersionConflict
from memframe.core.rotation import RotationPart, RotationPlan
from memframe.core.types import MEMORY_PATH
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from memframe.service.rotation_uploads import ABANDONED_SECONDS
from memframe.wire.rotation import PART_BYTES, RotationIn
from tests.conftest import FakeClock, World

#: The server's body bound (`memframe.api.errors.MAX_BODY_BYTES`).
BOUND = 2 * 1024 * 1024
#: Texts that do not compress (random bytes in base64): 64 of them re-seal to over the bound.
TEXTS = [base64.b64encode(os.urandom(33_000)).decode() + "\n" for _ in range(64)]


def staged_rows(service: MemoryService) -> tuple[int, int]:
    with service.db.read() as conn:
        uploads = conn.execute("SELECT COUNT(*) FROM key_rotation_uploads").fetchone()[0]
        items = conn.execute("SELECT COUNT(*) FROM key_rotation_upload_items").fetchone()[0]
    return int(uploads), int(items)


def test_a_history_over_the_body_bound_is_forgotten_through_every_backend_kind(world: World) -> None:
    """Over HTTP (in-process and a real loopback uvicorn) the plan goes up in parts; the result is
    the one a local rotation gives, and nothing stays staged."""
    first = world.client()
    first.prove_key()
    for i, text in enumerate(TEXTS):
        first.save(text, i)
    with world.service.db.read() as conn:
        history = sum(len(bytes(r[0])) for r in conn.execute("SELECT ciphertext FROM file_versions"))
    assert history * 4 // 3 > BOUND, "the history must be over the server's body bound in base64"
    sizes: list[int] = []
    real = first.store.rotate_key

    def measured(plan: RotationPlan) -> object:
        sizes.append(len(json.dumps(RotationIn.body(plan))))
        return real(plan)

    first.store.rotate_key = measured  # type: ignore[method-assign]
    done = first.rotate_key(new := sealing.new_key(), who="alice", forget_before=3)
    assert sizes[0] > BOUND  # in one request the server would have refused it (413)
    assert done.versions == {MEMORY_PATH: (1, 2, 2)} and done.resealed_versions == 62
    world.key = new
    fresh = world.client()
    assert fresh.load().text == TEXTS[-1] and fresh.read_revision(3) == TEXTS[2]
    assert fresh.verify() == [(MEMORY_PATH, 64)]
    assert staged_rows(world.service) == (0, 0)


def test_split_keeps_every_record_and_each_part_under_the_bound() -> None:
    blob = bytes(300_000)
    plan = RotationPlan(
        "0" * 64,
        "1" * 64,
        {MEMORY_PATH: 12},
        [(MEMORY_PATH, v, None if v == 5 else blob) for v in range(1, 13)],
        [("conv", 1, blob)],
        [("p1", blob)],
        blob[:80],
    )
    body, parts = RotationIn.split(plan)
    assert body["versions"] == body["messages"] == body["proposals"] == [] and len(parts) > 3
    assert all(len(json.dumps(part)) <= PART_BYTES for part in parts)
    whole = RotationIn.body(plan)
    for kind in ("versions", "messages", "proposals"):
        assert [r for part in parts for r in part[kind]] == whole[kind]


def _planned(service: MemoryService, key: bytes, forget_before: int | None = None) -> RotationPlan:
    """The plan a client makes (the swap not sent)."""
    plans: list[RotationPlan] = []

    class Planned(Exception):
        pass

    def keep(plan: RotationPlan) -> None:
        plans.append(plan)
        raise Planned

    backend = LocalBackend(service, "ws", key, seen=SeenHeads(None))
    backend.store.rotate_key = keep  # type: ignore[method-assign]
    with pytest.raises(Planned):
        rotate(backend.store, key, sealing.new_key(), who="alice", forget_before=forget_before)
    return plans[0]


def _header(plan: RotationPlan) -> RotationPlan:
    """`plan` without its records: what the rotation naming an upload sends."""
    return dataclasses.replace(plan, versions=[], messages=[], proposals=[])


def _stage(service: MemoryService, plan: RotationPlan, user: str = LOCAL_USER) -> str:
    upload = service.start_rotation_upload(user, "ws")
    for at in range(0, len(plan.versions), 2):
        service.stage_rotation_part(user, "ws", upload, RotationPart(versions=plan.versions[at : at + 2]))
    return upload


def test_staged_records_are_invisible_until_the_swap_and_a_stale_base_refuses_it_whole(
    engine_service: MemoryService,
) -> None:
    key = sealing.new_key()
    backend = LocalBackend(engine_service, "ws", key, seen=SeenHeads(None))
    backend.prove_key()
    for i, text in enumerate(TEXTS[:6]):
        backend.save(text, i)
    before = [s.ciphertext for s in backend.store.get_versions(MEMORY_PATH, list(range(1, 7)))]
    plan = _planned(engine_service, key)
    upload = _stage(engine_service, plan)
    assert staged_rows(engine_service) == (1, 6)
    # Staged, not swapped: every read still gets the old ciphertext, and the old key opens it.
    assert [s.ciphertext for s in backend.store.get_versions(MEMORY_PATH, list(range(1, 7)))] == before
    assert LocalBackend(engine_service, "ws", key, seen=SeenHeads(None)).load().text == TEXTS[5]
    backend.save("a concurrent Save\n", 6)  # lands between the upload and the swap
    with pytest.raises(VersionConflict, match="changed while its key was being rotated"):
        engine_service.rotate_key(LOCAL_USER, "ws", _header(plan), upload)
    assert engine_service.get_key_check(LOCAL_USER, "ws") == sealing.key_check(key, "ws")
    assert [s.ciphertext for s in backend.store.get_versions(MEMORY_PATH, list(range(1, 7)))] == before
    assert staged_rows(engine_service) == (0, 0), "a refused rotation leaves its upload behind"
    with pytest.raises(NotFound):  # consumed: it cannot be swapped in later either
        engine_service.rotate_key(LOCAL_USER, "ws", _header(plan), upload)
    # Made afresh against the new base, the same way succeeds and takes its upload with it.
    plan = _planned(engine_service, key, forget_before=3)
    done = engine_service.rotate_key(LOCAL_USER, "ws", _header(plan), _stage(engine_service, plan))
    assert done.versions == {MEMORY_PATH: (1, 2, 2)} and staged_rows(engine_service) == (0, 0)


def test_only_the_owner_uploads_and_an_abandoned_upload_is_cleaned(
    engine_service: MemoryService, clock: FakeClock
) -> None:
    engine_service.accounts.add_user("bob")
    engine_service.accounts.add_member("ws", "bob")
    with pytest.raises(Forbidden, match="Only the owner"):
        engine_service.start_rotation_upload("bob", "ws")
    upload = engine_service.start_rotation_upload(LOCAL_USER, "ws")
    part = RotationPart(versions=[(MEMORY_PATH, 1, bytes(40))])
    with pytest.raises(Forbidden):
        engine_service.stage_rotation_part("bob", "ws", upload, part)
    engine_service.accounts.create_workspace("ws2", LOCAL_USER)
    with pytest.raises(NotFound):  # an upload belongs to its workspace
        engine_service.stage_rotation_part(LOCAL_USER, "ws2", upload, part)
    assert engine_service.stage_rotation_part(LOCAL_USER, "ws", upload, part) == 1
    assert engine_service.stage_rotation_part(LOCAL_USER, "ws", upload, part) == 1  # a retry stages it once
    assert staged_rows(engine_service) == (1, 1)
    newer = engine_service.start_rotation_upload(LOCAL_USER, "ws")  # replaces the workspace's earlier one
    with pytest.raises(NotFound, match="replaced it"):
        engine_service.stage_rotation_part(LOCAL_USER, "ws", upload, part)
    engine_service.stage_rotation_part(LOCAL_USER, "ws", newer, part)
    clock.advance(ABANDONED_SECONDS + 1)  # its client died; the next upload anywhere deletes it
    engine_service.start_rotation_upload(LOCAL_USER, "ws2")
    assert staged_rows(engine_service) == (1, 0)
