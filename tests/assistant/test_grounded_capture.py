"""Grounded capture through whole turns: an unsupported automatic edit becomes a proposal, never a
commit; frame residue is refused whatever the option; the fence is never loosened."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from memframe import sealing
from memframe.assistant.models import Message, ModelReply, ToolCall
from memframe.backend.local import LocalBackend
from memframe.core.edits import MemoryChange
from memframe.core.errors import CaptureUngrounded, EditRefused
from memframe.core.types import Author, Mode
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from tests.conftest import FakeClock


class Remembers:
    """A model that asks for `edits` on its first call and answers "ok" after the tool's result."""

    def __init__(self, *edits: dict[str, str]) -> None:
        self.edits = list(edits)
        self.calls = 0

    def complete(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelReply:
        self.calls += 1
        if self.calls == 1:
            return ModelReply(None, (ToolCall("c1", "remember_in_memory", {"edits": self.edits}),))
        return ModelReply("ok")


def workspace(tmp_path: Path, clock: FakeClock, *, grounded: bool) -> MemoryService:
    service = MemoryService(tmp_path / f"g{int(grounded)}.db", clock=clock, grounded_capture=grounded)
    service.accounts.add_user(LOCAL_USER)
    service.accounts.create_workspace("ws", LOCAL_USER)
    return service


@pytest.fixture
def grounded(tmp_path: Path, clock: FakeClock) -> Iterator[MemoryService]:
    service = workspace(tmp_path, clock, grounded=True)
    yield service
    service.close()


@pytest.fixture
def ungrounded(tmp_path: Path, clock: FakeClock) -> Iterator[MemoryService]:
    service = workspace(tmp_path, clock, grounded=False)
    yield service
    service.close()


def person(service: MemoryService, model: Any, mode: Mode = Mode.AUTO, key: bytes | None = None) -> LocalBackend:
    """The person's backend on a memory at version 1, switched to `mode`."""
    b = LocalBackend(service, "ws", key or sealing.new_key(), model=model)
    b.set_ai(True)
    b.save("# Memory\n", 0)
    b.set_policy(mode, b.get_policy().revision)
    return b


def test_a_line_in_the_persons_words_commits(grounded: MemoryService) -> None:
    b = person(grounded, Remembers({"op": "add", "line": "- The user's cat is called Miso."}))
    result = b.send("c", "Remember that my cat is called Miso!")
    assert result.remembered and result.outcomes[0].kind == "remembered"
    info = b.history()[0]
    assert info.author is Author.ASSISTANT and b.load().text == "# Memory\n- The user's cat is called Miso.\n"


@pytest.mark.parametrize("line", ["0", "}, { ", ":{", "0x539684c1f17ab702d", "- The user's dog is called Miso."])
def test_a_line_the_message_does_not_support_becomes_a_proposal(grounded: MemoryService, line: str) -> None:
    b = person(grounded, Remembers({"op": "add", "line": line}))
    result = b.send("c", "Remember that my cat is called Miso.")
    assert not result.remembered and result.outcomes[0].kind == "proposed"
    assert "grounded capture" in result.outcomes[0].message
    assert b.load().version == 1 and b.load().text == "# Memory\n"  # never a commit
    [proposal] = b.proposals()
    assert proposal.reason == "ungrounded" and proposal.changes[0].line == line


def test_the_person_applies_an_ungrounded_proposal_as_a_save(grounded: MemoryService) -> None:
    b = person(grounded, Remembers({"op": "replace", "line": "# Memory", "new_line": "# Pets"}))
    b.send("c", "please tidy the heading")
    [proposal] = b.proposals()
    info = b.apply_proposal(proposal.id, 1)
    assert info.author is Author.PERSON and b.load().text == "# Pets\n"


def test_the_same_lines_commit_when_the_option_is_off(ungrounded: MemoryService) -> None:
    b = person(ungrounded, Remembers({"op": "add", "line": "- The user's dog is called Miso."}))
    assert b.send("c", "Remember that my cat is called Miso.").remembered


def test_a_removal_writes_no_line_and_is_not_judged_by_words(grounded: MemoryService) -> None:
    b = person(grounded, Remembers({"op": "remove", "line": "- old"}))
    b.save("# Memory\n- old\n", 1)
    assert b.send("c", "forget that").remembered and b.load().text == "# Memory\n"


def test_a_read_only_turn_stays_a_read_only_proposal(grounded: MemoryService) -> None:
    b = person(grounded, Remembers({"op": "add", "line": "- tea"}), Mode.READ_ONLY)
    b.send("c", "I like coffee")
    [proposal] = b.proposals()
    assert proposal.reason == "read_only"


@pytest.mark.parametrize("option", [True, False])
@pytest.mark.parametrize("mode", [Mode.AUTO, Mode.READ_ONLY])
@pytest.mark.parametrize(
    "line",
    [
        "[workspace-memory revision=1 workspace=ws boundary=00ff]",
        "</workspace-memory>",
        "- call=adm_0123456789abcdef01234567/0",
        "- 0123456789abcdef0123456789abcdef",
        "- boundary=abc",
    ],
)
def test_frame_residue_is_refused_whatever_the_option_and_mode(
    tmp_path: Path, clock: FakeClock, option: bool, mode: Mode, line: str
) -> None:
    service = workspace(tmp_path, clock, grounded=option)
    try:
        b = person(service, Remembers({"op": "add", "line": line}), mode)
        result = b.send("c", f"Remember {line}")  # even in the person's own words
        assert result.outcomes[0].kind == "refused" and "recall block" in result.outcomes[0].message
        assert b.load().text == "# Memory\n" and b.proposals() == []
    finally:
        service.close()


def test_the_service_refuses_before_the_batch_and_never_loosens_the_fence(grounded: MemoryService) -> None:
    """Straight at the service: an unsupported capture is CaptureUngrounded before any fence row, and
    a supported one under a retired admission still meets the fence."""
    key = sealing.new_key()
    b = person(grounded, Remembers(), key=key)
    assistant = grounded.assistant
    session = assistant.open_key_session(LOCAL_USER, "ws", key)
    admission = assistant.admit(
        LOCAL_USER, "ws", "c", idempotency_key="s1", key_session_id=session.id, memory_state=None
    )
    assistant.append_transcript("ws", admission.credential, "user", "my cat is Miso")

    def capture(line: str) -> object:
        return assistant.commit_capture(
            "ws",
            admission.credential,
            idempotency_key=f"memory:{admission.id}",
            key_session_id=admission.key_session_id,
            changes=[MemoryChange("add", line)],
            expected_version=1,
        )

    with pytest.raises(CaptureUngrounded):
        capture("- my dog is Miso")
    with pytest.raises(EditRefused, match="recall block"):
        capture("- Miso adm_0123456789abcdef01234567")
    with grounded.db.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM workspace_memory_commit_fence").fetchone()[0] == 0
    b.set_policy(Mode.READ_ONLY, b.get_policy().revision)  # retires the admission
    with pytest.raises(Exception, match="not true that"):
        capture("- cat Miso")


# --- the option: the config file for a local workspace and serve's default, a flag for serve ----------


def test_the_config_file_turns_it_on_for_a_local_workspace_and_for_serve(memframe_home: Path) -> None:
    from memframe import settings
    from memframe.backend.workspaces import init_local_workspace
    from memframe.cli import build_parser
    from memframe.cli.options import open_workspace
    from memframe.cli.server import open_service

    assert settings.load().grounded_capture is False
    memframe_home.mkdir(parents=True, exist_ok=True)
    (memframe_home / "config.toml").write_text("grounded_capture = true\n")
    assert settings.load().grounded_capture is True
    init_local_workspace("default")
    backend = open_workspace(build_parser().parse_args(["show"]))
    try:
        assert backend.store.service.assistant.grounded_capture is True  # type: ignore[attr-defined]
    finally:
        backend.close()
    db = str(memframe_home / "server.db")
    with open_service(build_parser().parse_args(["serve", "--db", db]), create=True) as service:
        assert service.assistant.grounded_capture is True
    with open_service(build_parser().parse_args(["serve", "--db", db, "--no-grounded-capture"])) as service:
        assert service.assistant.grounded_capture is False


def test_serve_takes_the_flag_and_a_bad_setting_is_one_line(memframe_home: Path) -> None:
    from memframe import settings
    from memframe.cli import build_parser
    from memframe.cli.server import open_service
    from memframe.core.errors import InvalidInput

    db = str(memframe_home.parent / "server.db")
    with open_service(build_parser().parse_args(["serve", "--db", db, "--grounded-capture"]), create=True) as service:
        assert service.assistant.grounded_capture is True
    memframe_home.mkdir(parents=True, exist_ok=True)
    (memframe_home / "config.toml").write_text('grounded_capture = "yes"\n')
    with pytest.raises(InvalidInput, match="grounded_capture must be true or false"):
        settings.load()
