"""F2 and C5 at the service: what the capture and proposal code itself must refuse or allow.

Written for survivors of `make mutate` (issue 18): a capture into a memory never written was
never made (so "create-only for a never-created document" could be broken), and the service's own
refusal to mark a pre-Clear proposal applied was reached only through clients that refuse first.
"""

from __future__ import annotations

import pytest

from memframe import sealing
from memframe.backend.local import LocalBackend
from memframe.core.edits import MemoryChange
from memframe.core.errors import InvalidInput, ProposalRetired, VersionConflict
from memframe.core.turns import CaptureReceipt
from memframe.core.types import MEMORY_PATH, Mode
from memframe.service.accounts import LOCAL_USER
from memframe.service.admissions import Admission
from tests.assistant.conftest import Stage

ADD = [MemoryChange("add", "- prefers tea")]


def _capture(
    stage: Stage, expected_version: int, a: Admission | None = None, changes: list[MemoryChange] | None = None
) -> CaptureReceipt:
    """A capture of `changes` (ADD if None) by the turn `a` (a new turn if None) on `expected_version`."""
    a = stage.admit() if a is None else a
    return stage.assistant.commit_capture(
        "ws",
        a.credential,
        idempotency_key=f"memory:{a.id}",
        key_session_id=a.key_session_id,
        changes=ADD if changes is None else changes,
        expected_version=expected_version,
    )


def test_F2_a_capture_into_a_never_created_memory_is_create_only(stage: Stage) -> None:
    stage.set_mode(Mode.AUTO)
    receipt = _capture(stage, 0)
    assert receipt.version.version == 1 and not receipt.replayed
    assert stage.person.load().text == "- prefers tea\n"
    with pytest.raises(VersionConflict) as conflict:  # create-only: a second "never created" loses
        _capture(stage, 0)
    assert conflict.value.current_version == 1
    assert stage.person.load().version == 1


def test_F2_a_capture_against_a_negative_version_is_refused(stage: Stage) -> None:
    stage.set_mode(Mode.AUTO)
    with pytest.raises(InvalidInput):
        _capture(stage, -1)
    assert stage.person.load().version == 0


def _proposal(stage: Stage) -> str:
    """A Read only proposal (a missing policy row is Read only) against version 1."""
    stage.person.save("# Memory\n", 0)
    a = stage.admit()
    record = stage.assistant.propose("ws", a.credential, changes=ADD, base_version=1, reason="read_only")
    return str(record.id)


def test_C5_the_service_refuses_to_mark_a_pre_clear_proposal_applied_and_dismisses_it(stage: Stage) -> None:
    proposal = _proposal(stage)
    stage.person.clear(1)
    with pytest.raises(ProposalRetired, match="before the memory was cleared"):
        stage.assistant.resolve_proposal(LOCAL_USER, "ws", proposal, "applied")
    assert [p.id for p in stage.assistant.proposals(LOCAL_USER, "ws")] == [proposal]
    stage.assistant.resolve_proposal(LOCAL_USER, "ws", proposal, "dismissed")
    assert stage.assistant.proposals(LOCAL_USER, "ws") == []


def test_C5_a_proposal_of_the_current_generation_is_marked_applied(stage: Stage) -> None:
    proposal = _proposal(stage)
    stage.assistant.resolve_proposal(LOCAL_USER, "ws", proposal, "applied")
    assert stage.assistant.proposals(LOCAL_USER, "ws") == []
    [applied] = stage.assistant.proposals(LOCAL_USER, "ws", status="applied")
    assert applied.id == proposal


def test_F2_a_capture_applies_to_a_head_sealed_before_v2(stage: Stage) -> None:
    """A document last written by an older memframe (sealing v1) is still the base a capture
    edits: the capture opens it and starts the new chain after it."""
    stage.person.save("placeholder\n", 0)
    old = sealing.seal_v1(stage.key, "# Memory\n", workspace_id="ws", path=MEMORY_PATH)
    with stage.service.db.write() as conn:
        conn.execute(
            "UPDATE file_versions SET size = ?, content_hash = ?, ciphertext = ? WHERE workspace_id = 'ws'"
            " AND path = ? AND version = 1",
            (len(old), sealing.content_hash(old), old, MEMORY_PATH),
        )
    stage.set_mode(Mode.AUTO)
    assert _capture(stage, 1).version.version == 2
    reader = LocalBackend(stage.service, "ws", stage.key)
    assert reader.load().text == "# Memory\n- prefers tea\n"


def _stored(stage: Stage, version: int) -> bytes:
    with stage.service.db.read() as conn:
        return bytes(
            conn.execute(
                "SELECT ciphertext FROM file_versions WHERE workspace_id = 'ws' AND path = ? AND version = ?",
                (MEMORY_PATH, version),
            ).fetchone()[0]
        )


def test_F2_a_version_made_before_the_batch_is_not_written_over_a_newer_head(
    stage: Stage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A capture makes its version before it queues (`_made_ahead`); a person's Save landing after
    that, before the batch, makes it a version conflict that writes and consumes nothing."""
    stage.person.save("# Memory\n", 0)
    stage.set_mode(Mode.AUTO)
    a = stage.admit()
    made_ahead = stage.assistant._made_ahead

    def then_a_save(*args: object) -> object:
        ahead = made_ahead(*args)
        assert ahead is not None  # made from version 1
        stage.person.save("# Memory\n- saved by a person\n", 1)
        return ahead

    monkeypatch.setattr(stage.assistant, "_made_ahead", then_a_save)
    with pytest.raises(VersionConflict) as conflict:
        _capture(stage, 1, a)
    assert conflict.value.current_version == 2
    assert stage.person.load().text == "# Memory\n- saved by a person\n"
    assert not stage.consumed(a) and stage.fence_rows() == 0


def test_F2_a_version_made_before_the_batch_is_used_only_over_the_very_head_it_was_made_from(
    stage: Stage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Versions are never rewritten in place, but should the head's ciphertext differ in the batch
    from the one the version was made from, the batch makes it again from what it reads."""
    stage.person.save("# Memory\n", 0)
    stage.set_mode(Mode.AUTO)
    a = stage.admit()
    made_ahead = stage.assistant._made_ahead
    other = sealing.seal(stage.key, "# Other\n", workspace_id="ws", path=MEMORY_PATH, version=1)

    def then_swapped(*args: object) -> object:
        ahead = made_ahead(*args)
        assert ahead is not None
        with stage.service.db.write() as conn:
            conn.execute(
                "UPDATE file_versions SET size = ?, content_hash = ?, ciphertext = ? WHERE workspace_id = 'ws'"
                " AND path = ? AND version = 1",
                (8, sealing.content_hash(other), other, MEMORY_PATH),
            )
        return ahead

    monkeypatch.setattr(stage.assistant, "_made_ahead", then_swapped)
    _capture(stage, 1, a)
    assert LocalBackend(stage.service, "ws", stage.key).load().text == "# Other\n- prefers tea\n"
