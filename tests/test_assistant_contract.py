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
    assert ready.send("c", "and now?").answer == "I was given no memory for this message."
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
    from memframe import crypto
    from memframe.core.errors import DecryptionFailed

    ready.set_ai(True)
    stranger = World(world.kind, world.service, world.workspace_id, crypto.new_key(), world.user, world.make)
    try:
        with pytest.raises(DecryptionFailed):
            stranger.client().send("c", "hi")
    finally:
        stranger.close()
