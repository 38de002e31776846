"""Consent, key sessions, ingress admission, recall statuses and receipts (service level)."""

from __future__ import annotations

import sqlite3

import pytest

from memframe import sealing
from memframe.core.errors import (
    AIDisabled,
    DecryptionFailed,
    InvalidInput,
    KeySessionUnavailable,
    NotFound,
    Unauthorized,
)
from memframe.core.types import Mode, RecallStatus
from memframe.keysessions.store import KeySessions
from memframe.service import write_soon
from memframe.service.accounts import LOCAL_USER
from tests.assistant.conftest import Stage


def test_changing_the_mode_never_enables_ai_or_opens_a_key_session(stage: Stage) -> None:
    stage.assistant.set_ai(LOCAL_USER, "ws", False)
    sessions = len(stage.service.key_sessions)
    stage.set_mode(Mode.AUTO)
    assert not stage.assistant.ai_consent(LOCAL_USER, "ws").enabled
    assert len(stage.service.key_sessions) == sessions


def test_consent_changes_bump_the_revision(stage: Stage) -> None:
    before = stage.assistant.ai_consent(LOCAL_USER, "ws")
    assert stage.assistant.set_ai(LOCAL_USER, "ws", True) == before  # no change, no bump
    off = stage.assistant.set_ai(LOCAL_USER, "ws", False)
    assert (off.enabled, off.revision) == (False, before.revision + 1)


def test_sends_are_refused_while_ai_is_off(stage: Stage) -> None:
    stage.assistant.set_ai(LOCAL_USER, "ws", False)
    with pytest.raises(AIDisabled, match="Workspace AI is off"):
        stage.admit()


def test_a_key_that_does_not_open_the_memory_is_refused(stage: Stage) -> None:
    stage.person.save("x\n", 0)
    with pytest.raises(DecryptionFailed):
        stage.assistant.open_key_session(LOCAL_USER, "ws", sealing.new_key())


def test_admission_freezes_authority_and_writes_the_credential(stage: Stage) -> None:
    stage.set_mode(Mode.AUTO)
    a = stage.admit(memory_state="saved; version=0")
    policy = stage.person.get_policy()
    assert (a.mode, a.policy_revision, a.clear_generation) == (Mode.AUTO, policy.revision, 0)
    assert a.key_session_id == stage.key_session and a.client_memory_state == "saved; version=0"
    assert a.expires_at - a.created_at == 15 * 60
    with stage.service.db.read() as conn:
        slot = conn.execute("SELECT admission_id, credential_nonce FROM agent_delivery_credentials").fetchone()
    assert tuple(slot) == (a.id, a.credential_nonce)


def test_resend_with_the_same_idempotency_key_reuses_the_admission(stage: Stage) -> None:
    first = stage.assistant.admit(LOCAL_USER, "ws", "c", idempotency_key="k", key_session_id=None, memory_state=None)
    again = stage.assistant.admit(LOCAL_USER, "ws", "c", idempotency_key="k", key_session_id=None, memory_state=None)
    assert again == first


def test_malformed_memory_state_is_refused(stage: Stage) -> None:
    with pytest.raises(InvalidInput):
        stage.admit(memory_state="draft; version=3")


def test_someone_elses_conversation_id_is_their_own_conversation(stage: Stage) -> None:
    """Conversations are addressed within their workspace and person (issue 17): bob using the
    same id neither reaches the other conversation nor is blocked, and learns nothing about it."""
    mine = stage.admit("mine")
    stage.service.accounts.add_user("bob")
    stage.service.accounts.add_member("ws", "bob")
    his = stage.assistant.admit("bob", "ws", "mine", idempotency_key="x", key_session_id=None, memory_state=None)
    assert his.conversation_id != mine.conversation_id
    assert stage.assistant.receipts("bob", "mine") == []
    with pytest.raises(NotFound):
        stage.assistant.receipts("bob", "never")


def recall(stage: Stage, admission) -> tuple[RecallStatus, int | None, str | None]:  # type: ignore[no-untyped-def]
    r = stage.assistant.recall("ws", admission.credential)
    return r.status, r.revision, r.text


def test_provided_reads_the_current_text(stage: Stage) -> None:
    stage.person.save("# Prefs\n- tea\n", 0)
    a = stage.admit()
    assert recall(stage, a) == (RecallStatus.PROVIDED, 1, "# Prefs\n- tea\n")


def test_a_save_clear_or_off_reaches_the_very_next_call(stage: Stage) -> None:
    stage.person.save("one\n", 0)
    a = stage.admit()
    assert recall(stage, a)[2] == "one\n"
    stage.person.save("two\n", 1)
    assert recall(stage, a)[2] == "two\n"
    stage.person.clear(2)
    assert recall(stage, a) == (RecallStatus.EMPTY, 3, None)
    stage.person.undo(2, 3)
    stage.set_mode(Mode.OFF)
    assert recall(stage, a) == (RecallStatus.OFF, None, None)


def test_never_created_and_whitespace_memory_is_empty(stage: Stage) -> None:
    a = stage.admit()
    assert recall(stage, a)[0] is RecallStatus.EMPTY
    stage.person.save("  \n\n", 0)
    assert recall(stage, a)[0] is RecallStatus.EMPTY


def test_oversized_is_withheld_never_truncated(stage: Stage) -> None:
    stage.person.save("x" * 8193, 0)
    assert recall(stage, stage.admit()) == (RecallStatus.OVERSIZED, 1, None)
    stage.person.save("x" * 8192, 1)
    assert recall(stage, stage.admit())[0] is RecallStatus.PROVIDED


@pytest.mark.parametrize(
    ("state", "status"),
    [
        ("pending", RecallStatus.PENDING),
        ("conflict; version=1", RecallStatus.CONFLICT),
        ("saved; version=2", RecallStatus.STALE),
        ("saved; version=1", RecallStatus.PROVIDED),
        ("none", RecallStatus.PROVIDED),
    ],
)
def test_client_memory_state_withholds(stage: Stage, state: str, status: RecallStatus) -> None:
    stage.person.save("text\n", 0)
    assert recall(stage, stage.admit(memory_state=state))[0] is status


def test_deleted_memory(stage: Stage) -> None:
    from memframe.core.types import MEMORY_PATH

    stage.person.save("x\n", 0)
    stage.service.delete_file(LOCAL_USER, "ws", MEMORY_PATH, 1)
    assert recall(stage, stage.admit())[0] is RecallStatus.DELETED


def test_a_newer_turn_supersedes_the_older_credential(stage: Stage) -> None:
    stage.person.save("x\n", 0)
    old = stage.admit("c")
    new = stage.admit("c")
    assert recall(stage, old)[0] is RecallStatus.SUPERSEDED
    assert recall(stage, new)[0] is RecallStatus.PROVIDED
    assert recall(stage, stage.admit("other"))[0] is RecallStatus.PROVIDED  # other conversations unaffected


def test_expired_credential_and_lost_key_session_are_unavailable(stage: Stage) -> None:
    stage.person.save("x\n", 0)
    a = stage.admit()
    stage.clock.advance(15 * 60)
    assert recall(stage, a)[0] is RecallStatus.UNAVAILABLE
    b = stage.admit(key_session=None)
    assert recall(stage, b)[0] is RecallStatus.UNAVAILABLE


def test_no_access_after_membership_or_consent_is_withdrawn(stage: Stage) -> None:
    stage.person.save("x\n", 0)
    a = stage.admit()
    stage.assistant.set_ai(LOCAL_USER, "ws", False)
    assert recall(stage, a)[0] is RecallStatus.NO_ACCESS


def test_forged_or_foreign_credentials_are_unauthorized(stage: Stage) -> None:
    a = stage.admit()
    for bad in ["", "nope", a.credential + "x", a.credential.replace("cred_", "cred_x")]:
        with pytest.raises(Unauthorized):
            stage.assistant.recall("ws", bad)
    with pytest.raises(Unauthorized):
        stage.assistant.recall("other-ws", a.credential)


def test_receipts_record_status_and_revision_without_text(stage: Stage) -> None:
    stage.person.save("secret receipt text\n", 0)
    a = stage.admit("c")
    recall(stage, a)
    stage.set_mode(Mode.OFF)
    recall(stage, a)
    receipts = stage.assistant.receipts(LOCAL_USER, "c")
    assert [(r.call_index, r.status, r.revision) for r in receipts] == [
        (0, RecallStatus.PROVIDED, 1),
        (1, RecallStatus.OFF, None),
    ]
    assert "secret" not in repr(receipts)
    with pytest.raises(NotFound):
        stage.assistant.receipts("someone", "c")


def test_key_session_idle_eviction_and_expiry(stage: Stage) -> None:
    ks = stage.service.key_sessions
    info = stage.assistant.open_key_session(LOCAL_USER, "ws", stage.key)
    stage.clock.advance(ks.idle_seconds - 1)
    ks.resolve(info.id, "ws")  # touching keeps it alive
    stage.clock.advance(ks.idle_seconds)
    with pytest.raises(KeySessionUnavailable):
        ks.resolve(info.id, "ws")


def test_key_session_is_bound_to_its_workspace(stage: Stage) -> None:
    with pytest.raises(KeySessionUnavailable):
        stage.service.key_sessions.resolve(stage.key_session, "elsewhere")


def test_revocation_writes_the_durable_row_before_forgetting(stage: Stage) -> None:
    seen: list[int] = []
    forget = stage.service.key_sessions.forget

    def spy(session_id: str) -> None:
        with stage.service.db.read() as conn:
            seen.append(conn.execute("SELECT COUNT(*) FROM key_session_revocations").fetchone()[0])
        forget(session_id)

    stage.service.key_sessions.forget = spy  # type: ignore[method-assign]
    stage.assistant.revoke_key_session(LOCAL_USER, stage.key_session)
    assert seen == [1]
    with pytest.raises(KeySessionUnavailable):
        stage.service.key_sessions.resolve(stage.key_session, "ws")
    with pytest.raises(NotFound):
        stage.assistant.revoke_key_session(LOCAL_USER, stage.key_session)


def test_key_never_reaches_the_database(stage: Stage) -> None:
    stage.person.save("x\n", 0)
    stage.admit()
    raw = b"".join(p.read_bytes() for p in stage.service.db.path.parent.glob("a.db*"))
    assert stage.key not in raw


def test_a_stale_key_session_is_refused_between_sweeps(stage: Stage) -> None:
    """The table is swept only now and then; a session asked for is judged on its own, every time."""
    ks = KeySessions(stage.clock, idle_seconds=2)
    used = ks.open("ws", LOCAL_USER, stage.key)
    idle = ks.open("ws", LOCAL_USER, stage.key)
    stage.clock.advance(1.5)
    ks.resolve(used.id, "ws")
    stage.clock.advance(1.0)  # `idle` went stale; no sweep is due yet
    assert len(ks) == 1
    with pytest.raises(KeySessionUnavailable):
        ks.resolve(idle.id, "ws")
    assert ks.describe(idle.id) is None
    assert ks.resolve(used.id, "ws") == stage.key


def test_a_receipt_commits_before_anything_written_after_its_recall(stage: Stage, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Recall does not wait for an fsync, but nothing after it can become durable without its receipt."""
    monkeypatch.setattr(write_soon, "GATHER_SECONDS", 60.0)  # no background batch during this test
    stage.person.save("- tea, no sugar\n", 0)
    a = stage.admit("c")
    recall(stage, a)

    def on_disk() -> int:
        conn = sqlite3.connect(stage.service.db.path)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM memory_recall_receipts").fetchone()[0])
        finally:
            conn.close()

    stage.person.save("- tea, no sugar\n- green\n", 1)  # the next write of this process
    assert on_disk() == 1
    with stage.service.db.read() as conn:  # and the admission row records that recall
        assert conn.execute(
            "SELECT recall_status, recall_revision FROM workspace_memory_admissions WHERE id = ?", (a.id,)
        ).fetchone() == ("provided", 1)
    assert [r.status for r in stage.assistant.receipts(LOCAL_USER, "c")] == [RecallStatus.PROVIDED]
