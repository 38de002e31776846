"""Which answer a stale capture gets beside every other reason to refuse it.

A capture is judged in one order: the credential, the Idempotency-Key, the turn's earlier
commit (replay or refusal), the key session; then the base (negative, then stale); then the
tombstone, the edits and the fence's predicates. Each other reason alone, with a stale base,
gives the answer listed here, alone or behind another capture on the same base, and nothing is
written or consumed either way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from memframe.core.edits import MemoryChange
from memframe.core.errors import (
    CaptureRefused,
    FenceRefused,
    InvalidInput,
    KeySessionUnavailable,
    MemframeError,
    Unauthorized,
    VersionConflict,
)
from memframe.core.types import MEMORY_PATH, Mode
from memframe.service.accounts import LOCAL_USER
from memframe.service.admissions import Admission
from tests.assistant.conftest import Stage

ADD = [MemoryChange("add", "- prefers tea")]


@dataclass
class Attempt:
    """One capture call, as a case shapes it before it is made."""

    admission: Admission
    workspace: str = "ws"
    credential: str = ""
    idempotency_key: str = ""
    key_session: str | None = None
    changes: list[MemoryChange] = field(default_factory=lambda: list(ADD))
    expected: int = 1

    def __post_init__(self) -> None:
        self.credential = self.credential or self.admission.credential
        self.idempotency_key = self.idempotency_key or f"memory:{self.admission.id}"
        self.key_session = self.key_session or self.admission.key_session_id

    def run(self, stage: Stage) -> object:
        return stage.assistant.commit_capture(
            self.workspace,
            self.credential,
            idempotency_key=self.idempotency_key,
            key_session_id=self.key_session,
            changes=self.changes,
            expected_version=self.expected,
        )


def sql(stage: Stage, statement: str, *args: object) -> None:
    with stage.service.db.write() as conn:
        conn.execute(statement, args)


def _set(attr: str, value: object) -> Callable[[Stage, Attempt], None]:
    return lambda s, t: setattr(t, attr, value)


def _forged_nonce(s: Stage, t: Attempt) -> None:
    t.credential = t.credential.rsplit(".", 1)[0] + ".forged"


def _other_workspace(s: Stage, t: Attempt) -> None:
    s.service.accounts.create_workspace("ws2", LOCAL_USER)
    t.workspace = "ws2"


def _idle_eviction(s: Stage, t: Attempt) -> None:
    s.clock.advance(s.service.key_sessions.idle_seconds)


def _revoked_and_forgotten(s: Stage, t: Attempt) -> None:
    s.assistant.revoke_key_session(LOCAL_USER, t.admission.key_session_id or "")


def _another_live_session(s: Stage, t: Attempt) -> None:
    t.key_session = s.assistant.open_key_session(LOCAL_USER, "ws", s.key).id


def _owner_removed(s: Stage, t: Attempt) -> None:
    s.service.accounts.add_user("bob")
    s.service.accounts.add_member("ws", "bob")
    sql(s, "DELETE FROM memberships WHERE workspace_id = 'ws' AND user_id = ?", LOCAL_USER)


def _deleted(s: Stage, t: Attempt) -> None:
    s.service.delete_file(LOCAL_USER, "ws", MEMORY_PATH, _head(s))


#: Refusals judged before the base: with a stale base they still give their own answer.
BEFORE_THE_BASE: dict[str, tuple[Callable[[Stage, Attempt], None], type[MemframeError]]] = {
    "no credential": (_set("credential", "none"), Unauthorized),
    "a forged nonce": (_forged_nonce, Unauthorized),
    "another workspace's credential": (_other_workspace, Unauthorized),
    "an Idempotency-Key of another turn": (_set("idempotency_key", "memory:adm_other"), InvalidInput),
    "no key session presented": (_set("key_session", ""), KeySessionUnavailable),
    "an unknown key session": (_set("key_session", "ks_unknown"), KeySessionUnavailable),
    "the key session idle-evicted": (_idle_eviction, KeySessionUnavailable),
    "the key session revoked (row written, key forgotten)": (_revoked_and_forgotten, KeySessionUnavailable),
    "a negative base": (_set("expected", -1), InvalidInput),
}

#: Refusals judged after the base: with a stale base the answer is the VersionConflict.
AFTER_THE_BASE: dict[str, Callable[[Stage, Attempt], None]] = {
    "mode Off": lambda s, t: s.set_mode(Mode.OFF),
    "mode Read only": lambda s, t: s.set_mode(Mode.READ_ONLY),
    "policy revision moved (auto→off→auto)": lambda s, t: (s.set_mode(Mode.OFF), s.set_mode(Mode.AUTO)),
    "workspace AI disabled": lambda s, t: s.assistant.set_ai(LOCAL_USER, "ws", False),
    "consent revision moved (off→on)": lambda s, t: (
        s.assistant.set_ai(LOCAL_USER, "ws", False),
        s.assistant.set_ai(LOCAL_USER, "ws", True),
    ),
    "a newer turn took the credential": lambda s, t: s.admit(t.admission.conversation_id),
    "the delivery credential expired": lambda s, t: sql(
        s, "UPDATE agent_delivery_credentials SET expires_at = 0 WHERE conversation_id = ?", t.admission.conversation_id
    ),
    "past the turn's original 15 minutes": lambda s, t: s.clock.advance(15 * 60),
    "the key session revoked (durable row only)": lambda s, t: sql(
        s, "INSERT INTO key_session_revocations VALUES (?, 'ws', 0)", t.admission.key_session_id
    ),
    "another live key session presented": _another_live_session,
    "the admission consumed": lambda s, t: sql(
        s, "UPDATE workspace_memory_admissions SET consumed_at = 1 WHERE id = ?", t.admission.id
    ),
    "the owner removed from the workspace": _owner_removed,
    "the memory deleted": _deleted,
    "an edit that matches nothing": _set("changes", [MemoryChange("remove", "- not in the memory")]),
}


@pytest.fixture
def stale(stage: Stage) -> tuple[Stage, Attempt]:
    """Auto, a turn admitted at version 1, then a person's Save: the turn's base 1 is stale (2)."""
    stage.person.save("# Memory\n", 0)
    stage.set_mode(Mode.AUTO)
    attempt = Attempt(stage.admit())
    stage.person.save("# Memory\n- a person's edit\n", 1)
    return stage, attempt


def _head(stage: Stage) -> int:
    from memframe.service.files import current_state

    with stage.service.db.read() as conn:
        return current_state(conn, "ws", MEMORY_PATH)[0]


def _written_and_consumed(stage: Stage, a: Admission) -> tuple[int, int, bool]:
    with stage.service.db.read() as conn:
        versions = int(conn.execute("SELECT COUNT(*) FROM file_versions").fetchone()[0])
    return versions, stage.fence_rows(), stage.consumed(a)


@pytest.mark.parametrize("case", list(BEFORE_THE_BASE), ids=list(BEFORE_THE_BASE))
def test_a_refusal_judged_before_the_base_wins_over_a_stale_base(stale: tuple[Stage, Attempt], case: str) -> None:
    stage, attempt = stale
    shape, answer = BEFORE_THE_BASE[case]
    shape(stage, attempt)
    before = _written_and_consumed(stage, attempt.admission)
    with pytest.raises(MemframeError) as err:
        attempt.run(stage)
    assert type(err.value) is answer
    assert _written_and_consumed(stage, attempt.admission) == before


@pytest.mark.parametrize("case", list(AFTER_THE_BASE), ids=list(AFTER_THE_BASE))
def test_a_stale_base_wins_over_a_refusal_judged_after_it(stale: tuple[Stage, Attempt], case: str) -> None:
    stage, attempt = stale
    AFTER_THE_BASE[case](stage, attempt)
    current = _head(stage)
    before = _written_and_consumed(stage, attempt.admission)
    with pytest.raises(VersionConflict) as err:
        attempt.run(stage)
    assert err.value.current_version == current
    assert _written_and_consumed(stage, attempt.admission) == before


@pytest.mark.parametrize("case", list(AFTER_THE_BASE), ids=list(AFTER_THE_BASE))
def test_at_the_current_base_the_other_refusal_answers(stale: tuple[Stage, Attempt], case: str) -> None:
    """The same cases at the current base: each is a refusal of its own (so the table above is not
    a VersionConflict for some other reason), and nothing is written or consumed."""
    stage, attempt = stale
    AFTER_THE_BASE[case](stage, attempt)
    attempt.expected = _head(stage)
    before = _written_and_consumed(stage, attempt.admission)
    with pytest.raises((FenceRefused, CaptureRefused, InvalidInput)):
        attempt.run(stage)
    assert _written_and_consumed(stage, attempt.admission) == before


def test_a_turn_that_already_captured_is_refused_before_its_stale_base(stale: tuple[Stage, Attempt]) -> None:
    """A turn's second, different change is refused as such, whatever its base; its transport
    retry (same body, a base stale by now) replays the one receipt."""
    stage, attempt = stale
    attempt.expected = 2
    first = attempt.run(stage)
    stage.person.save("# Memory\n- a person's edit\n- and another\n", 3)
    assert stage.assistant.commit_capture(
        "ws",
        attempt.credential,
        idempotency_key=attempt.idempotency_key,
        key_session_id=attempt.key_session,
        changes=ADD,
        expected_version=2,
    ) == type(first)(first.admission_id, first.version, replayed=True)  # type: ignore[attr-defined, call-arg]
    attempt.changes = [MemoryChange("add", "- something else")]
    with pytest.raises(CaptureRefused, match="already changed memory"):
        attempt.run(stage)
    assert _head(stage) == 4


def test_a_clear_since_admission_answers_the_stale_base_first(stale: tuple[Stage, Attempt]) -> None:
    """A Clear writes a revision and moves the generation: a base from before it is a
    VersionConflict (at the Clear's own version it is the fence's generation clause)."""
    stage, attempt = stale
    attempt.expected = 2
    stage.person.clear(2)
    with pytest.raises(VersionConflict) as err:
        attempt.run(stage)
    assert err.value.current_version == 3
    attempt.expected = 3
    with pytest.raises(FenceRefused, match="cleared"):
        attempt.run(stage)


# --- two captures on the same base --------------------------------------------------------


@pytest.mark.race
def test_of_two_captures_on_the_same_base_at_once_one_lands_and_the_other_conflicts(
    stale: tuple[Stage, Attempt],
) -> None:
    stage, first = stale
    first.expected = 2
    second = Attempt(stage.admit("other"), expected=2)
    answers: dict[str, object] = {}
    go = threading.Barrier(2)

    def run(name: str, attempt: Attempt) -> None:
        go.wait()
        try:
            answers[name] = attempt.run(stage)
        except MemframeError as exc:
            answers[name] = exc

    threads = [threading.Thread(target=run, args=(n, t)) for n, t in (("first", first), ("second", second))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    refused = [a for a in answers.values() if isinstance(a, MemframeError)]
    assert len(answers) == 2 and len(refused) == 1 and _head(stage) == 3
    assert isinstance(refused[0], VersionConflict) and refused[0].current_version == 3
    assert stage.consumed(first.admission) != stage.consumed(second.admission)


#: The cases of BEFORE_THE_BASE that leave the first capture's own turn and key session alone.
_SECOND_ONLY = [
    "no credential",
    "a forged nonce",
    "another workspace's credential",
    "an Idempotency-Key of another turn",
    "no key session presented",
    "an unknown key session",
    "a negative base",
]


@pytest.mark.parametrize("case", [*_SECOND_ONLY, "a newer turn took the credential"])
def test_behind_a_capture_that_landed_each_refusal_keeps_its_place(stale: tuple[Stage, Attempt], case: str) -> None:
    """A second capture on the base the first just moved: a reason judged before the base still
    wins, and the stale base still wins over one judged after it."""
    stage, first = stale
    first.expected = 2
    second = Attempt(stage.admit("other"), expected=2)
    if case in BEFORE_THE_BASE:
        shape, answer = BEFORE_THE_BASE[case]
    else:
        shape, answer = AFTER_THE_BASE[case], VersionConflict
    shape(stage, second)
    first.run(stage)
    assert _head(stage) == 3
    with pytest.raises(MemframeError) as err:
        second.run(stage)
    assert type(err.value) is answer
    assert not stage.consumed(second.admission)
