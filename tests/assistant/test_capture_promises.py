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


def test_F2_captures_store_the_seal_compressing_would_choose(stage: Stage) -> None:
    """Every version a capture stores is exactly as long as the person's own seal would make it
    (a delta against the head where smaller), and opens to the text."""
    lines = [f"- fact {n:04d}: the user keeps notes about topic {n * 7919 % 1000}" for n in range(120)]
    stage.person.save("\n".join(lines) + "\n", 0)
    stage.set_mode(Mode.AUTO)
    text = stage.person.load().text
    for n in range(1, 6):
        change = MemoryChange("replace", lines[n * 11], new_line=lines[n * 11] + " (checked)")
        _capture(stage, n, changes=[change])
        new_text = text.replace(lines[n * 11] + "\n", lines[n * 11] + " (checked)\n")
        previous = _stored(stage, n)
        compressed = sealing.seal(
            stage.key,
            new_text,
            workspace_id="ws",
            path=MEMORY_PATH,
            version=n + 1,
            previous=previous,
            previous_text=text,
        )
        assert len(_stored(stage, n + 1)) == len(compressed)
        assert stage.person.load().text == new_text
        text = new_text


def test_F2_a_save_landing_just_before_the_batch_is_a_conflict_that_writes_nothing(stage: Stage) -> None:
    """A person's Save that lands after the capture's checks, immediately before its batch, makes
    it a version conflict that writes and consumes nothing (the base is judged in the batch)."""
    stage.person.save("# Memory\n", 0)
    stage.set_mode(Mode.AUTO)
    a = stage.admit()
    stage.before_fence_batch(lambda: stage.person.save("# Memory\n- saved by a person\n", 1))
    with pytest.raises(VersionConflict) as conflict:
        _capture(stage, 1, a)
    assert conflict.value.current_version == 2
    assert stage.person.load().text == "# Memory\n- saved by a person\n"
    assert not stage.consumed(a) and stage.fence_rows() == 0
