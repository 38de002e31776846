"""Access: every service and automation operation refuses every identity that should not reach it.

Person operations (files, versions, policy, AI consent, key sessions, sends,
receipts, transcript, proposals) are tried as another workspace's member, as a
member who was removed, and as a user who does not exist: each is NotFound
(exactly as for a workspace that does not exist) and changes nothing.

Automation operations (recall, capture, the current memory, proposals, the
transcript, every document route) are tried with a credential that is
another workspace's, forged, superseded by a newer turn, expired, whose
person was removed from the workspace, whose key session was revoked, or
that was admitted before workspace AI was switched off:
each is refused — an error, or for recall a withheld status with no text —
and changes nothing but recall's own receipt.

In every case no message, payload or repr carries memory text, a note's text,
another workspace's ciphertext, a key, or a credential.

HTTP-level 401/404 per route waits for the HTTP API to be committed; see RELIABILITY.md.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memframe import sealing
from memframe.backend.local import LocalBackend
from memframe.core.edits import MemoryChange
from memframe.core.errors import (
    CaptureRefused,
    InvalidInput,
    KeySessionUnavailable,
    MemframeError,
    NamespaceReserved,
    NotFound,
    ProposalRetired,
)
from memframe.core.turns import RecallResult
from memframe.core.types import MEMORY_PATH, Mode, RecallStatus
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from memframe.service.admissions import Admission
from tests.conftest import FakeClock
from tests.reliability.support import diff_dumps, dump

pytestmark = pytest.mark.access

MEMORY_TEXT = "- the alarm code is 4711, keep it to yourself"
NOTE_TEXT = "Quarterly numbers: revenue 1.2M (draft)"
OTHER_MEMORY = "- mallory's memory: the vault is behind the painting"


@dataclass
class World:
    service: MemoryService
    clock: FakeClock
    path: str | Path
    key: bytes
    other_key: bytes
    session: str
    turn: Admission  # a live, Auto turn of `local` in ws
    other_turn: Admission  # mallory's live turn in ws2
    proposal: str

    @property
    def a(self):  # type: ignore[no-untyped-def]
        return self.service.assistant

    def secrets(self) -> list[str]:
        """Everything that must never appear in a refusal, in every spelling we can think of."""
        with self.service.db.read() as conn:
            blobs = [
                bytes(r[0]) for r in conn.execute("SELECT ciphertext FROM file_versions WHERE ciphertext IS NOT NULL")
            ]
        out = [MEMORY_TEXT, NOTE_TEXT, OTHER_MEMORY, "4711", "vault"]
        for secret in [self.key, self.other_key, *blobs]:
            out += [
                secret.hex(),
                base64.b64encode(secret).decode()[:24],
                base64.urlsafe_b64encode(secret).decode()[:24],
            ]
        out += [self.turn.credential_nonce, self.other_turn.credential_nonce, self.session]
        return out


@pytest.fixture
def world(store_at: Callable[[str], str]) -> Iterator[World]:
    clock = FakeClock()
    path = store_at("access.db")
    service = MemoryService(path, clock=clock)
    acc = service.accounts
    for user in (LOCAL_USER, "mallory", "bob"):
        acc.add_user(user)
    acc.create_workspace("ws", LOCAL_USER)
    acc.add_member("ws", "bob")
    acc.create_workspace("ws2", "mallory")
    key, other_key = sealing.new_key(), sealing.new_key()
    person = LocalBackend(service, "ws", key)
    person.save(f"# Memory\n{MEMORY_TEXT}\n", 0)
    person.set_ai(True)
    person.set_policy(Mode.AUTO, 0)
    mallory = LocalBackend(service, "ws2", other_key, user="mallory")
    mallory.save(f"# Memory\n{OTHER_MEMORY}\n", 0)
    mallory.set_ai(True)
    a = service.assistant
    session = a.open_key_session(LOCAL_USER, "ws", key).id
    other_session = a.open_key_session("mallory", "ws2", other_key).id
    turn = a.admit(LOCAL_USER, "ws", "conv", idempotency_key="t1", key_session_id=session, memory_state=None)
    a.put_document("ws", turn.credential, "notes/q3.md", NOTE_TEXT, 0)
    a.append_transcript("ws", turn.credential, "user", "hello")
    proposal = a.propose(
        "ws", turn.credential, changes=[MemoryChange("add", "- x")], base_version=1, reason="read_only"
    )
    other_turn = a.admit(
        "mallory", "ws2", "mconv", idempotency_key="m1", key_session_id=other_session, memory_state=None
    )
    yield World(service, clock, path, key, other_key, session, turn, other_turn, proposal.id)
    service.close()


def assert_clean(world: World, what: str, exc: BaseException) -> None:
    shown = [str(exc), repr(exc)]
    if isinstance(exc, MemframeError):
        shown.append(repr(exc.to_payload()))
    for text in shown:
        for secret in world.secrets():
            assert secret not in text, f"{what}: the refusal shows a secret ({secret[:12]}…): {text}"


# --- people -------------------------------------------------------------------------------------

PersonOp = Callable[[World, str], object]


def _other_blob(w: World, text: str) -> bytes:
    return sealing.seal(w.other_key, text, workspace_id="ws", path=MEMORY_PATH, version=2)


PERSON_OPS: dict[str, PersonOp] = {
    "get_file": lambda w, u: w.service.get_file(u, "ws", MEMORY_PATH),
    "put_file": lambda w, u: w.service.put_file(u, "ws", MEMORY_PATH, _other_blob(w, "x"), 1),
    "clear": lambda w, u: w.service.put_file(u, "ws", MEMORY_PATH, _other_blob(w, ""), 1, clear=True),
    "undo": lambda w, u: w.service.put_file(u, "ws", MEMORY_PATH, _other_blob(w, "x"), 1, restored_from=1),
    "delete_file": lambda w, u: w.service.delete_file(u, "ws", "notes/q3.md", 1),
    "list_versions": lambda w, u: w.service.list_versions(u, "ws", MEMORY_PATH),
    "get_version": lambda w, u: w.service.get_version(u, "ws", MEMORY_PATH, 1),
    "list_files": lambda w, u: w.service.list_files(u, "ws"),
    "get_policy": lambda w, u: w.service.get_policy(u, "ws"),
    "set_policy": lambda w, u: w.service.set_policy(u, "ws", Mode.OFF, 1),
    "ai_consent": lambda w, u: w.a.ai_consent(u, "ws"),
    "set_ai": lambda w, u: w.a.set_ai(u, "ws", False),
    "open_key_session": lambda w, u: w.a.open_key_session(u, "ws", w.key),
    "revoke_key_session": lambda w, u: w.a.revoke_key_session(u, w.session),
    "admit (a send)": lambda w, u: w.a.admit(
        u, "ws", "conv-new", idempotency_key="x", key_session_id=None, memory_state=None
    ),
    "admit into their conversation": lambda w, u: w.a.admit(
        u, "ws2", "conv", idempotency_key="x", key_session_id=None, memory_state=None
    ),
    "receipts": lambda w, u: w.a.receipts(u, "conv"),
    "transcript": lambda w, u: w.a.transcript(u, "conv"),
    "proposals": lambda w, u: w.a.proposals(u, "ws"),
    "resolve_proposal": lambda w, u: w.a.resolve_proposal(u, "ws", w.proposal, "dismissed"),
}


@pytest.mark.parametrize("who", ["another workspace's member", "a removed member", "no such user"])
def test_people_outside_the_workspace_reach_nothing(world: World, who: str) -> None:
    user = {"another workspace's member": "mallory", "a removed member": "bob", "no such user": "nobody"}[who]
    if who == "a removed member":
        world.service.accounts.remove_member("ws", "bob")
    with pytest.raises(NotFound) as missing:
        world.service.get_policy(user, "no-such-workspace")
    reached = []
    for name, op in PERSON_OPS.items():
        if name == "admit into their conversation" and user == "mallory":
            continue  # ws2 is hers: that is her own conversation now (test_conversation_ids_are_per_workspace)
        before = dump(world.path)
        try:
            op(world, user)
        except NotFound as exc:
            assert str(exc) == str(missing.value) or "conversation" in str(exc), f"{name}: {exc} tells more"
            assert_clean(world, name, exc)
        except MemframeError as exc:
            reached.append(f"{name}: {type(exc).__name__}: {exc}")
        else:
            reached.append(f"{name}: succeeded")
        changed = diff_dumps(before, dump(world.path))
        if changed:
            reached.append(f"{name}: changed {changed}")
    assert not reached, "\n".join(reached)
    assert world.a.key_sessions.describe(world.session) is not None, "an outsider revoked the key session"


# --- automation ---------------------------------------------------------------------------------

AutoOp = Callable[[World, Admission], object]
AUTOMATION_OPS: dict[str, AutoOp] = {
    "recall": lambda w, t: w.a.recall("ws", t.credential),
    "commit_capture": lambda w, t: w.a.commit_capture(
        "ws",
        t.credential,
        idempotency_key=f"memory:{t.id}",
        key_session_id=t.key_session_id,
        changes=[MemoryChange("add", "- injected")],
        expected_version=1,
    ),
    "current_memory": lambda w, t: w.a.current_memory("ws", t.credential),
    "propose": lambda w, t: w.a.propose(
        "ws", t.credential, changes=[MemoryChange("add", "- y")], base_version=1, reason="read_only"
    ),
    "append_transcript": lambda w, t: w.a.append_transcript("ws", t.credential, "assistant", "spoofed answer"),
    "conversation_history": lambda w, t: w.a.conversation_history("ws", t.credential),
    "list_documents": lambda w, t: w.a.list_documents("ws", t.credential),
    "search_documents": lambda w, t: w.a.search_documents("ws", t.credential, "revenue"),
    "read_document": lambda w, t: w.a.read_document("ws", t.credential, "notes/q3.md"),
    "put_document": lambda w, t: w.a.put_document("ws", t.credential, "notes/q3.md", "overwritten", 1),
    "delete_document": lambda w, t: w.a.delete_document("ws", t.credential, "notes/q3.md", 1),
    "move_document": lambda w, t: w.a.move_document("ws", t.credential, "notes/q3.md", "notes/moved.md", 1),
    "restore_document": lambda w, t: w.a.restore_document("ws", t.credential, "notes/q3.md", 1),
}
#: Recall never raises: it withholds with a status, and records that it did.
WITHHELD = {
    "another workspace's credential": None,  # refused outright
    "a forged credential": None,
    "a newer turn's credential": RecallStatus.SUPERSEDED,
    "an expired credential": RecallStatus.UNAVAILABLE,
    "a removed member's credential": RecallStatus.NO_ACCESS,
    "a revoked key session": RecallStatus.UNAVAILABLE,
    "a credential from before AI was switched off": RecallStatus.NO_ACCESS,
}
#: Listing names no text and needs no key, so a revoked key session alone does not stop it.
NEEDS_NO_KEY = {"list_documents"}


def _presented(world: World, who: str) -> Admission:
    a, w = world.a, world
    if who == "another workspace's credential":
        t = w.other_turn
        return Admission(**{**t.__dict__, "workspace_id": "ws"})  # mallory's real credential, aimed at ws
    if who == "a forged credential":
        return Admission(**{**w.turn.__dict__, "credential_nonce": "forged-" + w.turn.credential_nonce[7:]})
    if who == "a newer turn's credential":
        a.admit(LOCAL_USER, "ws", "conv", idempotency_key="t2", key_session_id=w.session, memory_state=None)
        return w.turn
    if who == "an expired credential":
        w.clock.advance(15 * 60 + 1)
        return w.turn
    if who == "a removed member's credential":
        w.service.accounts.remove_member("ws", LOCAL_USER)
        return w.turn
    if who == "a revoked key session":
        a.revoke_key_session(LOCAL_USER, w.session)
        return w.turn
    if who == "a credential from before AI was switched off":
        a.set_ai(LOCAL_USER, "ws", False)
        return w.turn
    raise AssertionError(who)


@pytest.mark.parametrize("who", list(WITHHELD))
def test_automation_refuses_every_retired_or_foreign_credential(world: World, who: str) -> None:
    presented = _presented(world, who)
    reached = []
    for name, op in AUTOMATION_OPS.items():
        before = dump(world.path)
        try:
            result = op(world, presented)
        except MemframeError as exc:
            assert_clean(world, name, exc)
            if name == "recall" and WITHHELD[who] is not None:
                reached.append(f"recall raised {type(exc).__name__} instead of withholding")
        else:
            if name == "recall" and isinstance(result, RecallResult) and WITHHELD[who] is not None:
                if (result.status, result.text) != (WITHHELD[who], None):
                    reached.append(f"recall: {result.status.value} with text {result.text is not None}")
                assert_clean(world, name, AssertionError(repr(result)))
                world.service.db.flush()  # its receipt, queued to commit soon, is the one change recall makes
                continue
            if not (name in NEEDS_NO_KEY and who == "a revoked key session"):
                reached.append(f"{name}: succeeded ({str(result)[:60]})")
            else:
                assert "4711" not in repr(result) and "revenue" not in repr(result)
        changed = diff_dumps(before, dump(world.path))
        if changed:
            reached.append(f"{name}: changed {changed}")
    assert not reached, f"{who} reached:\n" + "\n".join(reached)


def test_a_live_turn_reaches_what_it_should(world: World) -> None:
    """The control: the same operations with a live credential do work, so the refusals above mean something."""
    t = world.turn
    assert world.a.recall("ws", t.credential).status is RecallStatus.PROVIDED
    assert world.a.read_document("ws", t.credential, "notes/q3.md") == (1, NOTE_TEXT)
    assert world.a.current_memory("ws", t.credential)[0] == 1
    assert [r for r, _ in world.a.conversation_history("ws", t.credential)] == ["user"]
    assert world.a.list_documents("ws", t.credential) == [("notes/q3.md", 1)]
    receipt = AUTOMATION_OPS["commit_capture"](world, t)
    assert receipt.version.version == 2  # type: ignore[attr-defined]


def test_off_cannot_be_bypassed_through_the_current_memory(world: World) -> None:
    world.service.set_policy(LOCAL_USER, "ws", Mode.OFF, 1)
    with pytest.raises(MemframeError) as refused:
        world.a.current_memory("ws", world.turn.credential)
    assert_clean(world, "current_memory", refused.value)


def test_reprs_of_authority_objects_hide_credentials_and_keys(world: World) -> None:
    from memframe.assistant.memory_tool import TurnContext

    t = world.turn
    context = TurnContext(t.workspace_id, t.conversation_id, t.id, t.credential, t.mode, t.key_session_id)
    session_info = world.a.key_sessions.describe(world.session)
    for obj in (t, context, session_info, world.a.key_sessions._sessions[world.session]):
        text = repr(obj)
        assert world.turn.credential_nonce not in text, f"{type(obj).__name__} repr shows the credential"
        assert world.key.hex() not in text and repr(world.key) not in text, f"{type(obj).__name__} repr shows the key"


def test_off_means_a_turn_admitted_before_it_proposes_nothing(world: World) -> None:
    """Issue 17: `propose` judges the current policy, not the mode frozen at admission."""
    world.service.set_policy(LOCAL_USER, "ws", Mode.OFF, 1)
    before = dump(world.path)
    with pytest.raises(CaptureRefused) as refused:
        AUTOMATION_OPS["propose"](world, world.turn)
    assert "Off" in str(refused.value)
    assert_clean(world, "propose", refused.value)
    assert not diff_dumps(before, dump(world.path))


def test_a_proposal_made_before_a_clear_cannot_be_marked_applied(world: World) -> None:
    """Issue 17: the service refuses it (not only the CLI); dismissing it still works."""
    sealed = sealing.seal(world.key, "", workspace_id="ws", path=MEMORY_PATH, version=2)
    world.service.put_file(LOCAL_USER, "ws", MEMORY_PATH, sealed, 1, clear=True)
    before = dump(world.path)
    with pytest.raises(ProposalRetired) as refused:
        world.a.resolve_proposal(LOCAL_USER, "ws", world.proposal, "applied")
    assert "before the memory was cleared" in str(refused.value)
    assert not diff_dumps(before, dump(world.path))
    world.a.resolve_proposal(LOCAL_USER, "ws", world.proposal, "dismissed")
    assert world.a.proposals(LOCAL_USER, "ws") == []


# --- lookalike paths (issue 17) -----------------------------------------------------------------

LOOKALIKE_NAMESPACE = [
    ".zudotext/memory\u034f/MEMORY.md",
    ".zudotext/memory\ufe0f/MEMORY.md",
    ".zudotext\u3164/memory/MEMORY.md",
    ".zudotext/mem\u180bory/MEMORY.md",
    ".zudotext/memory\u0301/MEMORY.md",
    ".zudotext/\u202ememory/MEMORY.md",
]
LOOKALIKE_NOTES = ["notes/\u202e.md", "notes/a\u034f.md", "notes/b\u2066.md", "notes/c\u0301.md", "notes/\u3164.md"]


@pytest.mark.parametrize("path", LOOKALIKE_NAMESPACE + LOOKALIKE_NOTES)
def test_automation_and_mcp_writes_refuse_lookalike_paths(world: World, path: str) -> None:
    from memframe.mcp.tools import note_path

    expected = NamespaceReserved if path in LOOKALIKE_NAMESPACE else InvalidInput
    before = dump(world.path)
    t = world.turn
    writes = [
        lambda: world.a.put_document("ws", t.credential, path, "forged", 0),
        lambda: world.a.move_document("ws", t.credential, "notes/q3.md", path, 1),
        lambda: note_path(path, written=True),
    ]
    for write in writes:
        with pytest.raises(expected):
            write()
    assert not diff_dumps(before, dump(world.path))
    assert all(p == "notes/q3.md" for p, _ in world.a.list_documents("ws", t.credential))


def test_people_cannot_create_bidi_or_invisible_paths_but_existing_odd_paths_stay_usable(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memframe.service import service as service_module

    def sealed(path: str, text: str, version: int = 1, previous: bytes | None = None) -> bytes:
        return sealing.seal(world.key, text, workspace_id="ws", path=path, version=version, previous=previous)

    for path in ("notes/\u202e.md", "notes/x\u200b.md", "notes/\u2067y.md"):
        with pytest.raises(InvalidInput):
            world.service.put_file(LOCAL_USER, "ws", path, sealed(path, "x"), 0)
    world.service.put_file(LOCAL_USER, "ws", "notes/cafe\u0301.md", sealed("notes/cafe\u0301.md", "ok"), 0)
    odd = "notes/old\u202e.md"  # as an older memframe stored it, before the rule
    monkeypatch.setattr(service_module, "refuse_lookalike", lambda *a, **k: None)
    first = sealed(odd, "v1")
    world.service.put_file(LOCAL_USER, "ws", odd, first, 0)
    monkeypatch.undo()
    assert world.service.get_file(LOCAL_USER, "ws", odd) is not None
    world.service.put_file(LOCAL_USER, "ws", odd, sealed(odd, "v2", 2, first), 1)  # its person can still save it
    assert world.a.read_document("ws", world.turn.credential, odd) == (2, "v2")  # and the Assistant read it


# --- key sessions belong to their person (issue 17) ---------------------------------------------


def _revoked_rows(world: World) -> set[str]:
    with world.service.db.read() as conn:
        return {r[0] for r in conn.execute("SELECT key_session_id FROM key_session_revocations")}


def test_only_its_owner_revokes_a_key_session(world: World) -> None:
    before = dump(world.path)
    with pytest.raises(NotFound):
        world.a.revoke_key_session("bob", world.session)  # a member of the same workspace
    assert not diff_dumps(before, dump(world.path))
    assert world.a.key_sessions.describe(world.session) is not None
    world.a.revoke_key_session(LOCAL_USER, world.session)
    assert world.session in _revoked_rows(world)


@pytest.mark.parametrize("whose", ["another member's", "another workspace's", "revoked", "unknown"])
def test_a_send_must_name_a_live_key_session_of_its_own_person_and_workspace(world: World, whose: str) -> None:
    bob_session = world.a.open_key_session("bob", "ws", world.key).id
    session = {
        "another member's": bob_session,
        "another workspace's": world.other_turn.key_session_id,
        "revoked": world.session,
        "unknown": "ks_made_up",
    }[whose]
    if whose == "revoked":
        world.a.revoke_key_session(LOCAL_USER, world.session)
    before = dump(world.path)
    # One answer for every case, so another person's live session looks exactly like a dead one.
    with pytest.raises(KeySessionUnavailable) as refused:
        world.a.admit(LOCAL_USER, "ws", "conv-2", idempotency_key="k", key_session_id=session, memory_state=None)
    assert "key session" in str(refused.value) and refused.value.admission_refused
    assert_clean(world, "admit", refused.value)
    assert not diff_dumps(before, dump(world.path))


def test_removing_a_member_revokes_their_key_sessions_and_retires_their_turns(world: World) -> None:
    bob_session = world.a.open_key_session("bob", "ws", world.key).id
    bob_turn = world.a.admit(
        "bob", "ws", "bob-conv", idempotency_key="b", key_session_id=bob_session, memory_state=None
    )
    world.service.accounts.remove_member("ws", "bob")
    assert bob_session in _revoked_rows(world) and world.a.key_sessions.describe(bob_session) is None
    assert world.a.key_sessions.describe(world.session) is not None  # nobody else's
    before = dump(world.path)
    with pytest.raises(MemframeError):
        AUTOMATION_OPS["commit_capture"](world, bob_turn)
    assert not diff_dumps(before, dump(world.path))
    # Another member's turn cannot borrow the removed member's session either.
    with pytest.raises(KeySessionUnavailable):
        world.a.admit(LOCAL_USER, "ws", "c3", idempotency_key="k3", key_session_id=bob_session, memory_state=None)


def test_revoking_a_persons_last_token_revokes_their_key_sessions(world: World) -> None:
    first, _ = world.service.accounts.create_token("bob")
    second, _ = world.service.accounts.create_token("bob")
    bob_session = world.a.open_key_session("bob", "ws", world.key).id
    world.service.accounts.revoke_token(first)
    assert world.a.key_sessions.describe(bob_session) is not None  # one token is still live
    world.service.accounts.revoke_token(second)
    assert bob_session in _revoked_rows(world) and world.a.key_sessions.describe(bob_session) is None


@pytest.mark.parametrize("tick", [1, 0], ids=["a second apart", "within one tick of the clock"])
def test_key_sessions_are_capped_per_person_oldest_evicted(world: World, tick: int) -> None:
    from memframe.keysessions.store import MAX_SESSIONS_PER_PERSON

    opened = [world.session]
    for _ in range(MAX_SESSIONS_PER_PERSON):
        world.clock.advance(tick)
        opened.append(world.a.open_key_session(LOCAL_USER, "ws", world.key).id)
    live = [s for s in opened if world.a.key_sessions.describe(s) is not None]
    assert live == opened[1:] and len(live) == MAX_SESSIONS_PER_PERSON
    assert world.a.key_sessions.describe(world.other_turn.key_session_id) is not None  # mallory's untouched


# --- conversations are addressed within their workspace (issue 17) ------------------------------


def test_conversation_ids_are_per_workspace_and_person_so_squatting_blocks_and_reveals_nothing(world: World) -> None:
    a = world.a
    # mallory squats ids in her own workspace: the one local already uses, and one local will use.
    squat = a.admit("mallory", "ws2", "conv", idempotency_key="sq", key_session_id=None, memory_state=None)
    early = a.admit("mallory", "ws2", "future", idempotency_key="sq2", key_session_id=None, memory_state=None)
    assert squat.conversation_id != world.turn.conversation_id  # a conversation of her own, not local's
    assert [r for r, _ in a.conversation_history("ws", world.turn.credential)] == ["user"]  # local's untouched
    later = a.admit(LOCAL_USER, "ws", "future", idempotency_key="f1", key_session_id=world.session, memory_state=None)
    assert later.conversation_id != early.conversation_id
    assert a.recall("ws", later.credential).status is RecallStatus.PROVIDED
    world.service.db.flush()
    # Each sees only their own conversation under the shared id, and nothing of the other's.
    assert {r.admission_id for r in a.receipts(LOCAL_USER, "future")} == {later.id}
    assert a.receipts("mallory", "future") == [] and a.transcript("mallory", "conv") == []
    assert [role for role, _ in a.transcript(LOCAL_USER, "conv")] == ["user"]
    # bob, a member of ws, using local's id there gets his own conversation too, not a 404.
    bob = a.admit("bob", "ws", "conv", idempotency_key="b1", key_session_id=None, memory_state=None)
    assert bob.conversation_id not in (world.turn.conversation_id, squat.conversation_id)
    with pytest.raises(NotFound):
        a.receipts("bob", "never-used")


def test_the_same_id_in_two_of_ones_workspaces_asks_which(world: World) -> None:
    world.service.accounts.add_member("ws2", LOCAL_USER)
    world.a.set_ai(LOCAL_USER, "ws2", True)
    other = world.a.admit(LOCAL_USER, "ws2", "conv", idempotency_key="w2", key_session_id=None, memory_state=None)
    with pytest.raises(InvalidInput, match="several workspaces"):
        world.a.receipts(LOCAL_USER, "conv")
    assert world.a.transcript(LOCAL_USER, "conv", "ws2") == []
    assert [role for role, _ in world.a.transcript(LOCAL_USER, "conv", "ws")] == ["user"]
    assert other.conversation_id != world.turn.conversation_id
