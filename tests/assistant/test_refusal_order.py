"""Which answer a stale capture gets beside every other reason to refuse it.

A capture is judged in one order: the credential, the Idempotency-Key, the turn's earlier
commit (replay or refusal), the key session; then the base (negative, then stale); then the
tombstone, the edits and the fence's predicates. A capture whose rival with the same base is in
flight waits for its answer, and is then refused before the batch if its base is stale by then
(`CaptureMixin._refuse_known_stale`); these tests pin that neither moved any answer: each other
reason alone, with a stale base, gives the answer listed here, with or without a rival, and
nothing is written or consumed either way.
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


# --- a rival with the same base in flight ---------------------------------------------------


class HeldBatches:
    """`db.write_together` with a gate: the batch of the thread named `held` waits at it (already
    announced to its rivals) until another capture comes to look for a rival; every call to
    `write_together` is counted by thread name."""

    def __init__(self, stage: Stage, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.calls: dict[str, int] = {}
        real = stage.service.db.write_together
        rivals = stage.assistant._rivals
        look = rivals.wait

        def write_together(work):  # type: ignore[no-untyped-def]
            name = threading.current_thread().name
            self.calls[name] = self.calls.get(name, 0) + 1
            if name == "held":
                self.entered.set()
                assert self.gate.wait(30), "the held batch was never released"
            return real(work)

        def wait(workspace_id: str, expected_version: int, batons: list[threading.Lock]) -> bool:
            # The held rival goes on once the other capture is here (whether that capture then finds
            # it still in flight or already answered, its own answer must be the same).
            if threading.current_thread().name != "held":
                self.gate.set()
            return look(workspace_id, expected_version, batons)

        monkeypatch.setattr(stage.service.db, "write_together", write_together)
        monkeypatch.setattr(rivals, "wait", wait)


def _in_thread(name: str, call: Callable[[], object]) -> tuple[threading.Thread, dict[str, object]]:
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["result"] = call()
        except Exception as exc:
            out["error"] = exc

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread, out


def _behind_a_rival(
    stage: Stage, first: Attempt, second: Attempt, monkeypatch: pytest.MonkeyPatch
) -> tuple[HeldBatches, dict[str, object], dict[str, object]]:
    """`first` held in its batch while `second` (same base) comes; both then run to their answers."""
    held = HeldBatches(stage, monkeypatch)
    rival, rival_out = _in_thread("held", lambda: first.run(stage))
    assert held.entered.wait(30)
    waiter, waiter_out = _in_thread("waiter", lambda: second.run(stage))
    rival.join(30)
    waiter.join(30)
    return held, rival_out, waiter_out


@pytest.mark.race
def test_a_capture_behind_a_rival_that_lands_is_refused_without_queueing(
    stale: tuple[Stage, Attempt], monkeypatch: pytest.MonkeyPatch
) -> None:
    stage, first = stale
    first.expected = second_base = 2
    second = Attempt(stage.admit("other"), expected=second_base)
    held, rival_out, waiter_out = _behind_a_rival(stage, first, second, monkeypatch)
    assert "error" not in rival_out and _head(stage) == 3
    refusal = waiter_out["error"]
    assert isinstance(refusal, VersionConflict) and refusal.current_version == 3
    assert held.calls.get("waiter", 0) == 0  # refused before the group commit, as the batch would have
    assert not stage.consumed(second.admission)


@pytest.mark.race
def test_a_capture_behind_a_rival_that_is_refused_still_lands(
    stale: tuple[Stage, Attempt], monkeypatch: pytest.MonkeyPatch
) -> None:
    stage, first = stale
    first.expected = 2
    _another_live_session(stage, first)  # the rival presents a session that is not its turn's
    second = Attempt(stage.admit("other"), expected=2)
    _, rival_out, waiter_out = _behind_a_rival(stage, first, second, monkeypatch)
    assert isinstance(rival_out["error"], FenceRefused)
    assert "error" not in waiter_out and _head(stage) == 3
    assert stage.consumed(second.admission) and not stage.consumed(first.admission)


#: The cases of BEFORE_THE_BASE that leave the rival's own turn and key session alone.
_WAITER_ONLY = [
    "no credential",
    "a forged nonce",
    "another workspace's credential",
    "an Idempotency-Key of another turn",
    "no key session presented",
    "an unknown key session",
    "a negative base",
]


@pytest.mark.race
@pytest.mark.parametrize("case", [*_WAITER_ONLY, "a newer turn took the credential"])
def test_behind_a_rival_that_lands_each_refusal_keeps_its_place(
    stale: tuple[Stage, Attempt], monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """The early refusal after a rival landed gives the answer the batch would: a reason judged
    before the base still wins, and the stale base still wins over one judged after it."""
    stage, first = stale
    first.expected = 2
    second = Attempt(stage.admit("other"), expected=2)
    if case in BEFORE_THE_BASE:
        shape, answer = BEFORE_THE_BASE[case]
    else:
        shape, answer = AFTER_THE_BASE[case], VersionConflict
    shape(stage, second)
    _, rival_out, waiter_out = _behind_a_rival(stage, first, second, monkeypatch)
    assert "error" not in rival_out and _head(stage) == 3
    assert type(waiter_out["error"]) is answer
    assert not stage.consumed(second.admission)
