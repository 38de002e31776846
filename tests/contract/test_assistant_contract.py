"""The Assistant through every backend kind: the same promises locally and over HTTP."""

from __future__ import annotations

import pytest

from memframe.core.errors import AIDisabled
from memframe.core.types import Author, Mode, Operation, RecallStatus
from tests.conftest import World


@pytest.fixture
def ready(world: World):  # type: ignore[no-untyped-def]
    b = world.client()
    b.save("# Memory\n- likes tea\n", 0)
    return b


def test_sends_need_ai_on_and_the_mode_never_turns_it_on(world: World, ready) -> None:  # type: ignore[no-untyped-def]
    ready.set_policy(Mode.AUTO, 0)
    assert not ready.get_ai().enabled
    with pytest.raises(AIDisabled, match="Workspace AI is off"):
        ready.send("c", "hi")
    assert ready.set_ai(True).enabled


def test_recall_reaches_the_model_and_receipts_come_back(world: World, ready) -> None:  # type: ignore[no-untyped-def]
    ready.set_ai(True)
    result = ready.send("c", "what do you know?")
    assert "- likes tea" in result.answer
    assert [(c.status, c.revision) for c in result.calls] == [(RecallStatus.PROVIDED, 1)]
    ready.set_policy(Mode.OFF, 0)
    assert ready.send("c", "and now?").answer == "(scripted demo) I was given no memory for this message."
    receipts = ready.receipts("c")
    assert [(r.status, r.revision) for r in receipts] == [(RecallStatus.PROVIDED, 1), (RecallStatus.OFF, None)]
    assert next(m for _, m in ready.transcript("c")) == "what do you know?"


def test_auto_capture_and_read_only_proposals(world: World, ready) -> None:  # type: ignore[no-untyped-def]
    ready.set_ai(True)
    proposed = ready.send("c", "remember: - likes jam")
    assert proposed.outcomes[0].kind == "proposed" and not proposed.remembered
    [proposal] = ready.proposals()
    assert proposal.changes[0].line == "- likes jam"
    ready.set_policy(Mode.AUTO, 0)
    remembered = ready.send("c", "remember: - likes scones")
    assert remembered.remembered and remembered.outcomes[0].version == 2
    head = ready.history(limit=1)[0]
    assert (head.author, head.operation) == (Author.ASSISTANT, Operation.CAPTURE)
    ready.apply_proposal(proposal.id, 2)
    assert ready.load().text == "# Memory\n- likes tea\n- likes scones\n- likes jam\n"


def test_a_clear_between_turns_reaches_the_next_call(world: World, ready) -> None:  # type: ignore[no-untyped-def]
    ready.set_ai(True)
    ready.send("c", "hi")
    ready.clear(1)
    result = ready.send("c", "hi again")
    assert result.calls[0].status is RecallStatus.EMPTY and "likes tea" not in result.answer


def test_a_wrong_key_cannot_open_a_key_session(world: World, ready) -> None:  # type: ignore[no-untyped-def]
    from memframe import sealing
    from memframe.core.errors import DecryptionFailed

    ready.set_ai(True)
    stranger = World(world.kind, world.service, world.workspace_id, sealing.new_key(), world.user, world.make)
    try:
        with pytest.raises(DecryptionFailed):
            stranger.client().send("c", "hi")
    finally:
        stranger.close()


# --- issue 21: a key session outlived by its client --------------------------------------------------


def _admissions(world: World) -> list[tuple[str, str | None]]:
    with world.service.db.read() as conn:
        return [(r[0], r[1]) for r in conn.execute("SELECT id, key_session_id FROM workspace_memory_admissions")]


def test_a_send_after_idle_eviction_opens_a_fresh_key_session(world: World, ready, clock) -> None:  # type: ignore[no-untyped-def]
    ready.set_ai(True)
    assert "- likes tea" in ready.send("c", "hi").answer
    first = ready.key_session()
    clock.advance(world.service.key_sessions.idle_seconds + 1)  # the server's idle eviction forgets the key
    result = ready.send("c", "still there?")
    assert "- likes tea" in result.answer
    assert [(c.status, c.revision) for c in result.calls] == [(RecallStatus.PROVIDED, 1)]
    assert ready.key_session() != first
    # The refused try wrote nothing: two admissions, neither under the dead session but the first.
    sessions = [session for _, session in _admissions(world)]
    assert sessions == [first, ready.key_session()]
    assert [m for _, m in ready.transcript("c")][-2] == "still there?"


def test_a_send_after_the_lifetime_also_recovers(world: World, ready, clock) -> None:  # type: ignore[no-untyped-def]
    ready.set_ai(True)
    ready.send("c", "hi")
    first = ready.key_session()
    sessions = world.service.key_sessions
    opened = clock.now
    while clock.now + 600 < opened + sessions.lifetime_seconds:
        clock.advance(600)  # used every ten minutes, so never idle ...
        sessions.resolve(first, world.workspace_id)
    clock.advance(600)  # ... until its lifetime ends it
    assert sessions.describe(first) is None
    assert "- likes tea" in ready.send("c", "a day later").answer
    assert ready.key_session() != first


def test_admit_refuses_a_dead_key_session_and_writes_nothing(world: World, ready, clock) -> None:  # type: ignore[no-untyped-def]
    from memframe.core.errors import KeySessionUnavailable

    ready.set_ai(True)
    dead = ready.key_session()
    clock.advance(world.service.key_sessions.idle_seconds)
    with pytest.raises(KeySessionUnavailable) as refused:
        ready.store.send_message("c", "hi", idempotency_key="k1", key_session_id=dead, memory_state=None)
    assert refused.value.admission_refused
    with pytest.raises(KeySessionUnavailable):
        ready.store.send_message("c", "hi", idempotency_key="k2", key_session_id="ks_made_up", memory_state=None)
    assert _admissions(world) == []
    with world.service.db.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM conversations").fetchone()[0] == 0


def test_a_session_lost_mid_turn_is_not_sent_again(world: World, ready, clock) -> None:  # type: ignore[no-untyped-def]
    """Only ingress's refusal is safe to repeat: a session that ends after the admission was written
    is reported, and the next message opens a fresh one."""
    from memframe.core.errors import KeySessionUnavailable

    ready.set_ai(True)
    session = ready.key_session()
    original = world.service.assistant.admit

    def admit_then_evict(*args, **kwargs):  # type: ignore[no-untyped-def]
        admission = original(*args, **kwargs)
        world.service.key_sessions.forget(session)  # evicted between ingress and the turn
        return admission

    world.service.assistant.admit = admit_then_evict  # type: ignore[method-assign]
    try:
        with pytest.raises(KeySessionUnavailable, match="nothing was sent again"):
            ready.send("c", "hi")
    finally:
        world.service.assistant.admit = original  # type: ignore[method-assign]
    assert len(_admissions(world)) == 1
    assert "- likes tea" in ready.send("c", "again").answer
    assert ready.key_session() != session
