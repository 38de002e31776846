"""The commit fence: every predicate, every interleaving, replay, and idle eviction."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from memframe.core.edits import MemoryChange
from memframe.core.errors import CaptureRefused, FenceRefused, InvalidInput, KeySessionUnavailable, VersionConflict
from memframe.core.types import Author, Mode, Operation
from memframe.service.accounts import LOCAL_USER
from memframe.service.admissions import Admission
from tests.assistant.conftest import Stage

ADD = [MemoryChange("add", "- prefers tea")]


def capture(stage: Stage, a: Admission, *, changes=ADD, expected: int | None = None, key_session="turn"):  # type: ignore[no-untyped-def]
    return stage.assistant.commit_capture(
        "ws",
        a.credential,
        idempotency_key=f"memory:{a.id}",
        key_session_id=a.key_session_id if key_session == "turn" else key_session,
        changes=changes,
        expected_version=stage.person.load().version if expected is None else expected,
    )


@pytest.fixture
def auto(stage: Stage) -> Stage:
    stage.person.save("# Memory\n", 0)
    stage.set_mode(Mode.AUTO)
    return stage


def head_version(stage: Stage) -> int:
    from memframe.core.types import MEMORY_PATH
    from memframe.service.files import current_state

    with stage.service.db.read() as conn:
        return current_state(conn, "ws", MEMORY_PATH)[0]


def assert_refused_cleanly(stage: Stage, a: Admission, version_before: int, action: Callable[[], object]) -> str:
    consumed_before = stage.consumed(a)
    with pytest.raises(FenceRefused) as err:
        action()
    assert head_version(stage) == version_before, "a refused capture wrote a version"
    assert stage.fence_rows() == 0, "a refused capture left a fence row"
    assert stage.consumed(a) == consumed_before, "a refused capture consumed the admission"
    return str(err.value)


def test_a_capture_in_auto_commits_with_a_fence_row(auto: Stage) -> None:
    a = auto.admit()
    receipt = capture(auto, a)
    assert receipt.version.version == 2 and not receipt.replayed
    assert (receipt.version.author, receipt.version.operation) == (Author.ASSISTANT, Operation.CAPTURE)
    assert auto.person.load().text == "# Memory\n- prefers tea\n"
    assert auto.fence_rows() == 1 and auto.consumed(a)


def sql(stage: Stage, statement: str, *args: object) -> None:
    with stage.service.db.write() as conn:
        conn.execute(statement, args)


# Each case makes exactly one predicate false, after admission, before the capture.
BREAKERS: dict[str, Callable[[Stage, Admission], None]] = {
    "owner no longer owns the conversation": lambda s, a: (
        s.service.accounts.add_user("eve"),
        sql(s, "UPDATE conversations SET user_id = 'eve' WHERE id = ?", a.conversation_id),
    ),
    # Row-level, so the fence's membership predicate alone is false: `remove_member` also revokes
    # the person's key sessions (tests/reliability/test_access.py), which would refuse earlier.
    "owner removed from the workspace": lambda s, a: (
        s.service.accounts.add_user("bob"),
        s.service.accounts.add_member("ws", "bob"),
        sql(s, "DELETE FROM memberships WHERE workspace_id = 'ws' AND user_id = ?", LOCAL_USER),
    ),
    "admission already consumed": lambda s, a: sql(
        s, "UPDATE workspace_memory_admissions SET consumed_at = 1 WHERE id = ?", a.id
    ),
    "past the original expiry": lambda s, a: s.clock.advance(15 * 60),
    "mode is no longer auto": lambda s, a: s.set_mode(Mode.READ_ONLY),
    "policy revision moved (auto→off→auto)": lambda s, a: (s.set_mode(Mode.OFF), s.set_mode(Mode.AUTO)),
    "ai disabled": lambda s, a: s.assistant.set_ai(LOCAL_USER, "ws", False),
    "consent revision moved (off→on)": lambda s, a: (
        s.assistant.set_ai(LOCAL_USER, "ws", False),
        s.assistant.set_ai(LOCAL_USER, "ws", True),
    ),
    "a newer turn took the credential": lambda s, a: s.admit(a.conversation_id),
    "credential expired": lambda s, a: sql(
        s, "UPDATE agent_delivery_credentials SET expires_at = 0 WHERE conversation_id = ?", a.conversation_id
    ),
    "key session revoked (durable row)": lambda s, a: sql(
        s, "INSERT INTO key_session_revocations VALUES (?, 'ws', 0)", a.key_session_id
    ),
}


@pytest.mark.parametrize("breaker", list(BREAKERS), ids=list(BREAKERS))
def test_each_false_predicate_alone_refuses(auto: Stage, breaker: str) -> None:
    a = auto.admit()
    BREAKERS[breaker](auto, a)
    assert_refused_cleanly(auto, a, 1, lambda: capture(auto, a, expected=1))


def test_clear_generation_moved_refuses_even_at_the_current_version(auto: Stage) -> None:
    a = auto.admit()
    auto.person.clear(1)  # version 2, generation 1
    message = assert_refused_cleanly(auto, a, 2, lambda: capture(auto, a, expected=2))
    assert "cleared" in message


def test_admitted_in_read_only_refuses_at_the_fence(stage: Stage) -> None:
    stage.person.save("# Memory\n", 0)
    a = stage.admit()  # read_only
    stage.set_mode(Mode.AUTO)
    message = assert_refused_cleanly(stage, a, 1, lambda: capture(stage, a))
    assert "admitted in Auto" in message


def test_presented_key_session_must_be_the_turns(auto: Stage) -> None:
    a = auto.admit()
    other = auto.assistant.open_key_session(LOCAL_USER, "ws", auto.key)
    assert_refused_cleanly(auto, a, 1, lambda: capture(auto, a, key_session=other.id))


def test_missing_admission_row_still_aborts(auto: Stage) -> None:
    """An INSERT…SELECT over no rows must not slip through: the fence SELECT always yields a row."""
    from memframe.service.fence import FENCE_INSERT

    with pytest.raises(Exception, match="CHECK"), auto.service.db.write() as conn:
        conn.execute(
            FENCE_INSERT,
            {
                "admission_id": "adm_missing",
                "ws": "ws",
                "now": 0,
                "nonce": "n",
                "key_session": "k",
                "key_check": "0" * 64,
                "version": 1,
            },
        )
    assert auto.fence_rows() == 0


def test_idle_eviction_fails_at_key_session_resolution(auto: Stage) -> None:
    a = auto.admit()
    auto.clock.advance(auto.service.key_sessions.idle_seconds)
    with pytest.raises(KeySessionUnavailable):
        capture(auto, a)
    assert auto.person.load().version == 1 and auto.fence_rows() == 0 and not auto.consumed(a)


def test_transport_retry_replays_one_receipt(auto: Stage) -> None:
    a = auto.admit()
    first = capture(auto, a, expected=1)
    again = capture(auto, a, expected=1)
    assert again.replayed and again.version == first.version
    assert [r.version for r in auto.person.history()] == [2, 1]


def test_a_second_logical_capture_in_the_turn_is_refused(auto: Stage) -> None:
    a = auto.admit()
    capture(auto, a, expected=1)
    with pytest.raises(CaptureRefused, match="already changed memory"):
        capture(auto, a, changes=[MemoryChange("add", "- another")], expected=2)
    assert auto.person.load().version == 2


def test_idempotency_key_must_name_the_admission(auto: Stage) -> None:
    a = auto.admit()
    with pytest.raises(InvalidInput):
        auto.assistant.commit_capture(
            "ws",
            a.credential,
            idempotency_key="memory:other",
            key_session_id=a.key_session_id,
            changes=ADD,
            expected_version=1,
        )


def test_conflict_leaves_newer_human_text_untouched(auto: Stage) -> None:
    a = auto.admit()
    auto.person.save("# Memory\n- human edit\n", 1)
    with pytest.raises(VersionConflict) as err:
        capture(auto, a, expected=1)
    assert err.value.current_version == 2
    assert auto.person.load().text == "# Memory\n- human edit\n" and not auto.consumed(a)


def test_no_tombstone_revival(auto: Stage) -> None:
    from memframe.core.errors import DocumentDeleted
    from memframe.core.types import MEMORY_PATH

    a = auto.admit()
    auto.service.delete_file(LOCAL_USER, "ws", MEMORY_PATH, 1)
    with pytest.raises((DocumentDeleted, CaptureRefused)):
        capture(auto, a, expected=2)
    assert auto.person.load().deleted


# --- linearization: actions committed just before the batch retire it; just after, see it done ---

BEFORE_BATCH: dict[str, Callable[[Stage, Admission], None]] = {
    "mode change": lambda s, a: s.set_mode(Mode.READ_ONLY),
    "clear": lambda s, a: s.person.clear(s.person.load().version),
    "consent change": lambda s, a: s.assistant.set_ai(LOCAL_USER, "ws", False),
    "newer turn": lambda s, a: s.admit(a.conversation_id),
    "key-session revocation": lambda s, a: s.assistant.revoke_key_session(LOCAL_USER, a.key_session_id or ""),
}


@pytest.mark.race
@pytest.mark.parametrize("action", list(BEFORE_BATCH), ids=list(BEFORE_BATCH))
def test_action_committed_just_before_the_batch_retires_the_capture(auto: Stage, action: str) -> None:
    a = auto.admit()
    auto.before_fence_batch(lambda: BEFORE_BATCH[action](auto, a))
    with pytest.raises((FenceRefused, VersionConflict)):
        capture(auto, a, expected=1)
    assert all(r.operation is not Operation.CAPTURE for r in auto.person.history())
    assert auto.fence_rows() == 0 and not auto.consumed(a)


@pytest.mark.race
@pytest.mark.parametrize("action", list(BEFORE_BATCH), ids=list(BEFORE_BATCH))
def test_action_committed_just_after_sees_the_capture_done(auto: Stage, action: str) -> None:
    a = auto.admit()
    receipt = capture(auto, a, expected=1)
    BEFORE_BATCH[action](auto, a)
    ops = [r.operation for r in auto.person.history()]
    assert Operation.CAPTURE in ops and auto.fence_rows() == 1
    assert auto.person.read_revision(receipt.version.version) == "# Memory\n- prefers tea\n"
