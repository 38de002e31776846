"""F3–F7: each of the fence's predicates refuses a capture at the fence itself, alone.

`test_fence.py` breaks each promise through the service (a mode change, a newer turn …), and
the Python checks before the batch refuse several of those cases first, so a predicate made
always true went unnoticed (issue 18). Here each case passes every earlier check: the row it
falsifies is changed by `Stage.before_fence_batch`, after the credential, idempotency and
key-session checks and immediately before the batch, and only that one predicate may be false. A missing
policy, consent or credential row must refuse too (`IS 1`, not `IS NOT 0`).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from memframe.core.edits import MemoryChange
from memframe.core.errors import FenceRefused
from memframe.core.types import Mode
from memframe.service.accounts import LOCAL_USER
from memframe.service.admissions import Admission
from tests.assistant.conftest import Stage

ADD = [MemoryChange("add", "- prefers tea")]


@pytest.fixture
def auto(stage: Stage) -> Stage:
    stage.person.save("# Memory\n", 0)
    stage.set_mode(Mode.AUTO)
    return stage


def sql(stage: Stage, statement: str, *args: object) -> None:
    with stage.service.db.write() as conn:
        conn.execute(statement, args)


def capture(stage: Stage, a: Admission, *, key_session: str | None = None) -> object:
    return stage.assistant.commit_capture(
        "ws",
        a.credential,
        idempotency_key=f"memory:{a.id}",
        key_session_id=key_session or a.key_session_id,
        changes=ADD,
        expected_version=1,
    )


def refused_at_the_fence(stage: Stage, a: Admission, action: Callable[[], object]) -> list[str]:
    """The capture is refused, nothing landed, and the message names the promises that failed."""
    with pytest.raises(FenceRefused) as err:
        action()
    with stage.service.db.read() as conn:
        versions = conn.execute("SELECT COUNT(*) FROM file_versions").fetchone()[0]
        committed = conn.execute(
            "SELECT committed_version FROM workspace_memory_admissions WHERE id = ?", (a.id,)
        ).fetchone()[0]
    assert versions == 1, "a refused capture wrote a version"
    assert stage.fence_rows() == 0 and committed is None
    message = str(err.value)
    return sorted(part.split(".")[0].split(";")[0] for part in message.split("not true that ")[1:])


def second_workspace_like_the_first(stage: Stage) -> None:
    """ws2: the same person a member, the same policy and consent rows, so that pointing a row at
    ws2 falsifies only the predicate that compares workspaces."""
    stage.service.accounts.create_workspace("ws2", LOCAL_USER)
    with stage.service.db.write() as conn:
        conn.execute(
            "INSERT OR REPLACE INTO workspace_memory_policy (workspace_id, mode, policy_revision, clear_generation)"
            " SELECT 'ws2', mode, policy_revision, clear_generation FROM workspace_memory_policy"
            " WHERE workspace_id = 'ws'"
        )
        conn.execute(
            "INSERT OR REPLACE INTO workspace_ai_consent (workspace_id, enabled, consent_revision)"
            " SELECT 'ws2', enabled, consent_revision FROM workspace_ai_consent WHERE workspace_id = 'ws'"
        )


def _another_owner(s: Stage, a: Admission) -> None:
    s.service.accounts.add_user("eve")
    sql(s, "UPDATE conversations SET user_id = 'eve' WHERE id = ?", a.conversation_id)


ADMISSIONS = "UPDATE workspace_memory_admissions SET "
POLICY = "UPDATE workspace_memory_policy SET "
CONSENT = "UPDATE workspace_ai_consent SET "
CREDENTIAL = "UPDATE agent_delivery_credentials SET "

# (promise id, the one predicate a person reads in the refusal, what falsifies it alone)
CLAUSES: list[tuple[str, str, Callable[[Stage, Admission], None]]] = [
    (
        "F3-workspace",
        "the admission exists for this workspace",
        lambda s, a: sql(s, ADMISSIONS + "workspace_id = 'ws2' WHERE id = ?", a.id),
    ),
    (
        "F3-conversation-workspace",
        "the owner still matches the conversation",
        lambda s, a: sql(s, "UPDATE conversations SET workspace_id = 'ws2' WHERE id = ?", a.conversation_id),
    ),
    ("F3-conversation-owner", "the owner still matches the conversation", _another_owner),
    (
        "F3-member",
        "the owner is still a member of the workspace",
        lambda s, a: sql(s, "DELETE FROM memberships WHERE workspace_id = 'ws' AND user_id = ?", LOCAL_USER),
    ),
    (
        "F3-unconsumed",
        "the turn has not already changed memory",
        lambda s, a: sql(s, ADMISSIONS + "consumed_at = 1 WHERE id = ?", a.id),
    ),
    (
        "F3-original-expiry",
        "the turn is within its original 15 minutes",
        lambda s, a: sql(s, ADMISSIONS + "expires_at = ? WHERE id = ?", s.clock(), a.id),
    ),
    (
        "F3-admitted-in-auto",
        "the turn was admitted in Auto",
        lambda s, a: sql(s, ADMISSIONS + "mode = 'read_only' WHERE id = ?", a.id),
    ),
    ("F4-mode-still-auto", "the mode is still Auto", lambda s, a: sql(s, POLICY + "mode = 'read_only'")),
    (
        "F4-policy-revision",
        "the mode was not changed since the turn began",
        lambda s, a: sql(s, POLICY + "policy_revision = policy_revision + 1"),
    ),
    (
        "F4-clear-generation",
        "memory was not cleared since the turn began",
        lambda s, a: sql(s, POLICY + "clear_generation = clear_generation + 1"),
    ),
    ("F5-ai-still-enabled", "workspace AI is still enabled", lambda s, a: sql(s, CONSENT + "enabled = 0")),
    (
        "F5-consent-revision",
        "AI consent was not changed since the turn began",
        lambda s, a: sql(s, CONSENT + "consent_revision = consent_revision + 1"),
    ),
    (
        "F6-credential-names-the-admission",
        "no newer message in the conversation took over",
        lambda s, a: sql(s, CREDENTIAL + "admission_id = 'adm_other' WHERE conversation_id = ?", a.conversation_id),
    ),
    (
        "F6-credential-carries-the-admissions-nonce",
        "no newer message in the conversation took over",
        lambda s, a: sql(s, ADMISSIONS + "credential_nonce = 'changed' WHERE id = ?", a.id),
    ),
    (
        "F6-credential-carries-the-presented-nonce",
        "no newer message in the conversation took over",
        lambda s, a: (
            sql(s, ADMISSIONS + "credential_nonce = 'both' WHERE id = ?", a.id),
            sql(s, CREDENTIAL + "credential_nonce = 'both' WHERE conversation_id = ?", a.conversation_id),
        ),
    ),
    (
        "F6-credential-unexpired",
        "the delivery credential has not expired",
        lambda s, a: sql(s, CREDENTIAL + "expires_at = ? WHERE conversation_id = ?", s.clock(), a.conversation_id),
    ),
    (
        "F7-key-session-not-revoked",
        "the key session was not revoked",
        lambda s, a: sql(s, "INSERT INTO key_session_revocations VALUES (?, 'ws', 0)", a.key_session_id),
    ),
    (
        "F7-workspace-key-not-rotated",
        "the workspace key was not rotated since the key session was opened",
        lambda s, a: sql(s, "UPDATE workspace_key_checks SET key_check = ? WHERE workspace_id = 'ws'", "0" * 64),
    ),
]


@pytest.mark.parametrize(("promise", "predicate", "falsify"), CLAUSES, ids=[c[0] for c in CLAUSES])
def test_F3_to_F7_each_predicate_alone_refuses_at_the_fence(
    auto: Stage, promise: str, predicate: str, falsify: Callable[[Stage, Admission], None]
) -> None:
    second_workspace_like_the_first(auto)
    a = auto.admit()
    auto.before_fence_batch(lambda: falsify(auto, a))
    assert refused_at_the_fence(auto, a, lambda: capture(auto, a)) == [predicate]


def test_F3_fence_refuses_admission_of_another_workspace(auto: Stage) -> None:
    second_workspace_like_the_first(auto)
    a = auto.admit()
    auto.before_fence_batch(lambda: sql(auto, ADMISSIONS + "workspace_id = 'ws2' WHERE id = ?", a.id))
    assert refused_at_the_fence(auto, a, lambda: capture(auto, a)) == ["the admission exists for this workspace"]


def test_F7_fence_refuses_a_key_session_that_is_not_the_turns(auto: Stage) -> None:
    a = auto.admit()
    other = auto.assistant.open_key_session(LOCAL_USER, "ws", auto.key)
    reasons = refused_at_the_fence(auto, a, lambda: capture(auto, a, key_session=other.id))
    assert reasons == ["the presented key session is the turn's own"]


# --- a missing row is false, never "not false" (IS 1, not IS NOT 0) ------------------------------

MISSING: dict[str, tuple[str, list[str]]] = {
    "policy": (
        "DELETE FROM workspace_memory_policy WHERE workspace_id = 'ws'",
        [
            "memory was not cleared since the turn began",
            "the mode is still Auto",
            "the mode was not changed since the turn began",
        ],
    ),
    "consent": (
        "DELETE FROM workspace_ai_consent WHERE workspace_id = 'ws'",
        ["AI consent was not changed since the turn began", "workspace AI is still enabled"],
    ),
    "credential": (
        "DELETE FROM agent_delivery_credentials",
        ["no newer message in the conversation took over", "the delivery credential has not expired"],
    ),
    "membership": (
        f"DELETE FROM memberships WHERE user_id = '{LOCAL_USER}'",
        ["the owner is still a member of the workspace"],
    ),
}


@pytest.mark.parametrize("row", list(MISSING))
def test_F3_to_F6_a_missing_row_refuses_at_the_fence(auto: Stage, row: str) -> None:
    statement, predicates = MISSING[row]
    a = auto.admit()
    auto.before_fence_batch(lambda: sql(auto, statement))
    assert refused_at_the_fence(auto, a, lambda: capture(auto, a)) == sorted(predicates)


# --- the contract's numbers at the fence: 15 minutes, 8192 bytes ---------------------------------


def test_F3_a_turn_may_capture_until_the_end_of_its_original_15_minutes(auto: Stage) -> None:
    a = auto.admit()
    auto.clock.advance(15 * 60 - 1)
    assert capture(auto, a) is not None
    assert auto.person.load().text == "# Memory\n- prefers tea\n"


def test_F3_at_15_minutes_the_turn_is_refused(auto: Stage) -> None:
    a = auto.admit()
    auto.clock.advance(900)
    reasons = refused_at_the_fence(auto, a, lambda: capture(auto, a))
    assert reasons == ["the delivery credential has not expired", "the turn is within its original 15 minutes"]


def test_S2_memory_of_exactly_8192_bytes_is_recalled_and_can_still_be_captured(stage: Stage) -> None:
    text = ("x" * 499 + "\n") * 16 + "- old" + "y" * 186 + "\n"
    assert len(text.encode()) == 8192
    stage.person.save(text, 0)
    stage.set_mode(Mode.AUTO)
    a = stage.admit()
    assert stage.assistant.recall("ws", a.credential).status.value == "provided"
    stage.assistant.commit_capture(
        "ws",
        a.credential,
        idempotency_key=f"memory:{a.id}",
        key_session_id=a.key_session_id,
        changes=[MemoryChange("replace", "- old" + "y" * 186, new_line="- new" + "y" * 186)],
        expected_version=1,
    )
    assert stage.person.load().text == text.replace("- old", "- new")
    stage.person.save(text + "z", 2)  # 8193 bytes: kept intact, not recalled, not capturable
    b = stage.admit()
    assert stage.assistant.recall("ws", b.credential).status.value == "oversized"
