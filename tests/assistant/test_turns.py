"""Whole turns through the local backend: recall at the binding, the tool, proposals, transcript."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from memframe import sealing
from memframe.assistant.models import Message, ModelReply, ScriptedModel, ToolCall
from memframe.backend.local import LocalBackend
from memframe.core.errors import EditRefused, ProposalRetired
from memframe.core.types import Author, Mode, Operation, RecallStatus
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from tests.conftest import FakeClock


@pytest.fixture
def svc(tmp_path: Path, clock: FakeClock) -> Iterator[MemoryService]:
    service = MemoryService(tmp_path / "t.db", clock=clock)
    service.accounts.add_user(LOCAL_USER)
    service.accounts.create_workspace("ws", LOCAL_USER)
    yield service
    service.close()


@pytest.fixture
def key() -> bytes:
    return sealing.new_key()


def person(svc: MemoryService, key: bytes, model: Any = None) -> LocalBackend:
    b = LocalBackend(svc, "ws", key, model=model or ScriptedModel())
    b.set_ai(True)
    return b


class Between:
    """A model that runs `action` between its first and second call, via a harmless tool call."""

    def __init__(self, action: Callable[[], None]) -> None:
        self.action = action
        self.inner = ScriptedModel()

    def complete(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelReply:
        self.inner.complete(messages, tools)
        if self.inner.calls == 1:
            self.action()
            return ModelReply(None, (ToolCall("c1", "remember_in_memory", {"edits": []}),))
        return ModelReply("done")


def test_recall_is_attached_to_the_system_message_of_every_call(svc: MemoryService, key: bytes) -> None:
    model = ScriptedModel()
    b = person(svc, key, model)
    b.save("# Prefs\n- tea\n", 0)
    result = b.send("c", "what do you know?")
    assert "[workspace-memory revision=1" in model.seen[0] and "- tea" in model.seen[0]
    assert "- tea" in result.answer
    assert [(c.status, c.revision) for c in result.calls] == [(RecallStatus.PROVIDED, 1)]


@pytest.mark.parametrize("change", ["save", "clear", "off"])
def test_a_change_between_two_calls_of_one_turn_reaches_the_second(svc: MemoryService, key: bytes, change: str) -> None:
    editor = LocalBackend(svc, "ws", key)
    editor.save("old fact\n", 0)
    actions = {
        "save": lambda: editor.save("new fact\n", 1),
        "clear": lambda: editor.clear(1),
        "off": lambda: editor.set_policy(Mode.OFF, 0),
    }
    model = Between(actions[change])
    b = person(svc, key, model)
    result = b.send("c", "hello")
    first, second = model.inner.seen
    assert "old fact" in first
    assert "old fact" not in second
    if change == "save":
        assert "new fact" in second
    else:
        assert "[workspace-memory" not in second  # Off and empty add nothing
    assert len(result.calls) == 2


def test_withheld_memory_is_an_explicit_note_never_an_older_copy(svc: MemoryService, key: bytes) -> None:
    model = ScriptedModel()
    b = person(svc, key, model)
    b.save("x" * 9000, 0)
    b.send("c", "hi")
    assert "status=oversized]" in model.seen[-1] and "not provided because" in model.seen[-1]
    assert "xxxx" not in model.seen[-1]


def test_off_and_empty_add_nothing(svc: MemoryService, key: bytes) -> None:
    model = ScriptedModel()
    b = person(svc, key, model)
    assert b.send("c", "hi").answer == "(scripted demo) I was given no memory for this message."
    b.save("something\n", 0)
    b.set_policy(Mode.OFF, 0)
    b.send("c", "hi")
    assert all("[workspace-memory" not in s for s in model.seen)


def test_remember_in_auto_commits_and_says_remembered(svc: MemoryService, key: bytes) -> None:
    b = person(svc, key)
    b.save("# Memory\n", 0)
    b.set_policy(Mode.AUTO, 0)
    result = b.send("c", "remember: - likes green tea")
    assert result.remembered and result.outcomes[0].version == 2
    head = b.history(limit=1)[0]
    assert (head.author, head.operation) == (Author.ASSISTANT, Operation.CAPTURE)
    assert b.load().text == "# Memory\n- likes green tea\n"
    assert b.send("c2", "forget: - likes green tea").remembered
    assert b.load().text == "# Memory\n"
    b.save("# Memory\n- a\n", b.load().version)
    assert b.send("c3", "replace: - a => - b").remembered
    assert b.load().text == "# Memory\n- b\n"


def test_read_only_returns_a_proposal_that_a_person_applies(svc: MemoryService, key: bytes) -> None:
    b = person(svc, key)
    b.save("# Memory\n", 0)
    result = b.send("c", "remember: - prefers metric units")
    assert not result.remembered and result.outcomes[0].kind == "proposed"
    assert b.load().version == 1
    [proposal] = b.proposals()
    assert proposal.reason == "read_only" and proposal.changes[0].line == "- prefers metric units"
    info = b.apply_proposal(proposal.id, 1)
    assert info.version == 2 and info.author is Author.PERSON
    assert b.load().text == "# Memory\n- prefers metric units\n" and b.proposals() == []


def test_a_proposal_made_before_a_clear_is_refused(svc: MemoryService, key: bytes) -> None:
    b = person(svc, key)
    b.save("# Memory\n", 0)
    b.send("c", "remember: - x")
    [proposal] = b.proposals()
    b.clear(1)
    with pytest.raises(ProposalRetired, match="before the memory was cleared"):
        b.apply_proposal(proposal.id, 2)
    assert b.load().text == ""


def test_a_proposal_whose_target_changed_is_a_conflict(svc: MemoryService, key: bytes) -> None:
    b = person(svc, key)
    b.save("# Memory\n- old\n", 0)
    b.send("c", "replace: - old => - new")
    [proposal] = b.proposals()
    b.save("# Memory\n- edited by hand\n", 1)
    with pytest.raises(EditRefused):
        b.apply_proposal(proposal.id, 2)
    assert b.load().text == "# Memory\n- edited by hand\n"
    b.dismiss_proposal(proposal.id)
    assert b.proposals() == []


def test_off_does_nothing_and_makes_no_memory_request(svc: MemoryService, key: bytes, counted_automation: None) -> None:
    b = person(svc, key)
    b.save("# Memory\n", 0)
    b.set_policy(Mode.OFF, 0)
    automation = b.store.endpoint.runtime.automation  # type: ignore[attr-defined]
    result = b.send("c", "remember: - nope")
    assert result.outcomes == [] and not result.remembered  # Off offers no remember_in_memory at all
    assert automation.calls["recall"] == 1
    assert not {"commit_memory", "propose", "current_memory"} & set(automation.calls)
    assert b.load().version == 1 and b.proposals() == []


def test_off_refuses_a_memory_tool_call_it_never_offered(
    svc: MemoryService, key: bytes, counted_automation: None
) -> None:
    offered: list[list[str]] = []

    class Insistent:
        calls = 0

        def complete(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelReply:
            offered.append([t["function"]["name"] for t in tools])
            self.calls += 1
            if self.calls == 1:
                edits = {"edits": [{"op": "add", "line": "- nope"}]}
                return ModelReply(None, (ToolCall("c1", "remember_in_memory", edits),))
            return ModelReply("done")

    b = person(svc, key, Insistent())
    b.save("# Memory\n", 0)
    b.set_policy(Mode.OFF, 0)
    automation = b.store.endpoint.runtime.automation  # type: ignore[attr-defined]
    result = b.send("c", "remember: - nope")
    assert "remember_in_memory" not in offered[0]
    assert result.outcomes[0].kind == "off" and not result.remembered
    assert not {"commit_memory", "propose", "current_memory"} & set(automation.calls)
    assert b.load().version == 1 and b.proposals() == []


def test_conflict_becomes_a_proposal_against_the_newer_text(svc: MemoryService, key: bytes) -> None:
    editor = LocalBackend(svc, "ws", key)
    editor.save("# Memory\n", 0)
    editor.set_policy(Mode.AUTO, 0)

    class SaveThenRemember:
        calls = 0

        def complete(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelReply:
            self.calls += 1
            if self.calls == 1:
                editor.save("# Memory\n- human wrote this\n", 1)
                return ModelReply(
                    None, (ToolCall("c", "remember_in_memory", {"edits": [{"op": "add", "line": "- a"}]}),)
                )
            return ModelReply("ok")

    b = person(svc, key, SaveThenRemember())
    result = b.send("c", "hi")
    assert result.outcomes[0].kind == "proposed" and not result.remembered
    assert b.load().text == "# Memory\n- human wrote this\n"
    [proposal] = b.proposals()
    assert proposal.reason == "conflict" and proposal.base_version == 2


def test_memory_text_never_enters_the_durable_transcript(svc: MemoryService, key: bytes) -> None:
    class Polite:
        def complete(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelReply:
            return ModelReply("Happy to help.")

    b = person(svc, key, Polite())
    b.save("the secret codeword is PARSNIP\n", 0)
    b.send("conv", "hello")
    b.clear(1)
    b.send("conv", "and again")
    stored = b.transcript("conv")
    assert stored == [
        ("user", "hello"),
        ("assistant", "Happy to help."),
        ("user", "and again"),
        ("assistant", "Happy to help."),
    ]
    assert all("PARSNIP" not in content and "workspace-memory" not in content for _, content in stored)


def test_receipts_per_call_without_text(svc: MemoryService, key: bytes) -> None:
    b = person(svc, key)
    b.save("# Memory\n", 0)
    b.set_policy(Mode.AUTO, 0)
    b.send("c", "remember: - y")
    receipts = b.receipts("c")
    assert [(r.call_index, r.status, r.revision) for r in receipts] == [
        (0, RecallStatus.PROVIDED, 1),
        (1, RecallStatus.PROVIDED, 2),
    ]


def test_a_send_reports_its_own_save_state(svc: MemoryService, key: bytes) -> None:
    b = person(svc, key)
    other = LocalBackend(svc, "ws", key)
    b.save("mine\n", 0)
    other.save("theirs\n", 1)
    with pytest.raises(Exception):  # noqa: B017 - any conflict
        b.save("mine again\n", 1)
    result = b.send("c", "hi")
    assert result.calls[0].status is RecallStatus.CONFLICT


def test_closing_the_backend_revokes_its_key_session(svc: MemoryService, key: bytes) -> None:
    b = person(svc, key)
    b.send("c", "hi")
    assert len(svc.key_sessions) == 1
    b.close()
    assert len(svc.key_sessions) == 0
    with svc.db.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM key_session_revocations").fetchone()[0] == 1
