"""The frame's Assistant on the configured model: the pane names who answers, and answers come from it.

The model is the strict fake OpenAI-compatible server (tests/assistant/strict_openai.py); the
scripted demo answers only when no model is configured anywhere, and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Static

from memframe import sealing
from memframe.assistant.openai_chat import ModelOptions, OpenAIChatModel
from memframe.backend.base import Backend
from memframe.backend.local import LocalBackend
from memframe.cli import main
from memframe.core.types import Mode
from memframe.service import MemoryService
from memframe.tui.conversation import Exchange
from memframe.tui.dialogs import ConflictScreen
from memframe.tui.screens.assistant import AssistantScreen, ExchangeItem
from tests.assistant.strict_openai import Call, EndedEarly, StrictChatServer, Text
from tests.conftest import FakeClock
from tests.tui.conftest import WORKSPACE, drive
from tests.tui.scenarios import TEXT, Outage, Stage, append, ask, settle


@pytest.fixture
def fake() -> Iterator[StrictChatServer]:
    server = StrictChatServer()
    yield server
    server.close()


@pytest.fixture
def on_model(tui_service: MemoryService, clock: FakeClock, fake: StrictChatServer) -> Iterator[Stage]:
    """A stage whose frame's Assistant answers with model "m" on the fake server."""
    yield from staged(tui_service, clock, fake)


@pytest.fixture
def capturing(tui_service: MemoryService, clock: FakeClock, fake: StrictChatServer) -> Iterator[Stage]:
    """The same in Auto, with remember_in_memory forced on the call that answers the message."""
    yield from staged(tui_service, clock, fake, Mode.AUTO, tool_choice="remember_in_memory")


def staged(
    service: MemoryService, clock: FakeClock, fake: StrictChatServer, mode: Mode | None = None, **options: Any
) -> Iterator[Stage]:
    key = sealing.new_key()
    model = OpenAIChatModel(ModelOptions(fake.url, "m", **options))
    frame = LocalBackend(service, WORKSPACE, key, model=model)
    other = LocalBackend(service, WORKSPACE, key)
    other.save(TEXT, 0)
    other.set_ai(True)
    if mode is not None:
        other.set_policy(mode, other.get_policy().revision)
    yield Stage(Outage(frame), other, clock)
    model.close()


async def until(pilot: Pilot[Any], condition: Callable[[], bool], what: str) -> None:
    """Wait (never a sleep) until `condition` holds, within a bound."""
    for _ in range(1000):
        if condition():
            return
        await pilot.pause(0.01)
    raise AssertionError(f"never: {what}")


async def send(pilot: Pilot[Any], screen: AssistantScreen, message: str) -> Exchange:
    """Type a message and press enter, without waiting for the answer."""
    screen.query_one(Input).value = message
    await pilot.press("enter")
    await until(pilot, lambda: bool(screen.conversation.exchanges), "the message is on screen")
    return screen.conversation.exchanges[-1]


async def open_assistant(pilot: Pilot[Any]) -> AssistantScreen:
    await pilot.press("f2")
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, AssistantScreen)
    return screen


def shown(screen: AssistantScreen, index: int = -1) -> str:
    return str(list(screen.query(ExchangeItem))[index].query_one(Static).content)


def header(screen: AssistantScreen) -> str:
    return str(screen.query_one("#assistant-status", Static).content)


def test_the_pane_names_the_configured_model_and_it_answers(on_model: Stage, fake: StrictChatServer) -> None:
    fake.replies.append(Text("Aiko likes short answers."))

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_assistant(pilot)
        assert f"Answered by m at {fake.url}" in header(screen)
        await ask(pilot, "what do you know?")
        assert "assistant › Aiko likes short answers." in shown(screen)
        assert "scripted demo" not in shown(screen)
        assert "receipt: memory revision 1 was used" in shown(screen)
        system = fake.requests[0]["messages"][0]["content"]
        assert fake.requests[0]["model"] == "m" and "- Aiko prefers short answers." in system

    drive(on_model.app(), script)


def test_without_a_model_the_scripted_demo_answers_and_says_so(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    stage.other.set_ai(True)

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_assistant(pilot)
        assert "Answered by the scripted demo" in header(screen) and "'Model servers'" in header(screen)
        await ask(pilot, "what do you know?")
        await ask(pilot, "and now?")
        assert all("assistant › (scripted demo) " in shown(screen, i) for i in (0, 1))

    drive(stage.app(), script)


def test_an_answer_ended_early_or_empty_says_why_in_the_pane(on_model: Stage, fake: StrictChatServer) -> None:
    fake.replies += [EndedEarly(["Aiko li"]), Text(""), Text("", finish_reason="length")]

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_assistant(pilot)
        await ask(pilot, "what do you know?")
        assert "assistant › Aiko li" in shown(screen)
        assert "(the server ended the answer early;" in shown(screen) and "it may be incomplete" in shown(screen)
        await ask(pilot, "and?")
        assert "assistant › (no answer: the model ended its turn without writing any text)" in shown(screen)
        await ask(pilot, "and then?")
        assert "(no answer: cut off at the token limit (--max-tokens), before any text)" in shown(screen)

    drive(on_model.app(), script)


# --- streaming, waiting and stopping ------------------------------------------------------------------


def test_the_answer_streams_into_the_pane_as_it_arrives(on_model: Stage, fake: StrictChatServer) -> None:
    fake.delay_per_chunk = 0.05
    fake.replies.append(Text("Aiko prefers short answers, and Ben is on leave."))

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_assistant(pilot)
        exchange = await send(pilot, screen, "what do you know?")
        await until(pilot, lambda: bool(exchange.partial), "a first piece is shown")
        assert exchange.pending and "assistant › Aik" in shown(screen) and "(answering ·" in shown(screen)
        await settle(pilot)
        assert not exchange.pending and "Aiko prefers short answers, and Ben is on leave." in shown(screen)
        assert "(answering" not in shown(screen)

    drive(on_model.app(), script)


def test_while_waiting_the_pane_says_it_waits_for_the_model_and_how_long(
    on_model: Stage, fake: StrictChatServer
) -> None:
    fake.delay = 1.5
    fake.replies.append(Text("Here."))

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_assistant(pilot)
        await send(pilot, screen, "what do you know?")
        assert "waiting for the model… 0 s" in shown(screen) and "f6 stops" in shown(screen)
        await until(pilot, lambda: "waiting for the model… 1 s" in shown(screen), "the seconds count up")
        await settle(pilot)
        assert "assistant › Here." in shown(screen)

    drive(on_model.app(), script)


def test_stop_closes_the_stream_and_nothing_further_is_shown(on_model: Stage, fake: StrictChatServer) -> None:
    fake.delay_per_chunk = 0.05
    fake.replies.append(Text("abc" * 200))

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_assistant(pilot)
        exchange = await send(pilot, screen, "talk")
        await until(pilot, lambda: bool(exchange.partial), "a first piece is shown")
        await pilot.press("f6")
        await settle(pilot)
        assert exchange.result is None and "■ Stopped: no answer, and nothing further was written." in shown(screen)
        assert screen.query_one(Input).value == ""  # a stopped message is not offered again
        await until(pilot, lambda: fake.hung_up == 1, "the model server sees the client hang up")

    drive(on_model.app(), script)


def test_stop_before_a_capture_arrives_writes_nothing(capturing: Stage, fake: StrictChatServer) -> None:
    fake.delay = 1.0
    fake.replies += [Call("remember_in_memory", '{"edits": [{"op": "add", "line": "- Aiko likes tea."}]}')]

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_assistant(pilot)
        exchange = await send(pilot, screen, "Aiko likes tea.")
        await pilot.press("f6")
        await settle(pilot)
        assert exchange.stopped and exchange.result is None and "■ Stopped" in shown(screen)
        assert len(fake.requests) == 1 and capturing.other.load().version == 1

    drive(capturing.app(), script)


def test_stop_after_a_committed_capture_says_what_was_written(capturing: Stage, fake: StrictChatServer) -> None:
    fake.delay_per_chunk = 0.05
    remember = '{"edits": [{"op": "add", "line": "- Aiko likes tea."}]}'
    fake.replies += [Call("remember_in_memory", remember), Text("Noted, " * 100)]

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_assistant(pilot)
        exchange = await send(pilot, screen, "Aiko likes tea.")
        await until(pilot, lambda: bool(exchange.partial), "the answer after the capture streams")
        await pilot.press("f6")
        await settle(pilot)
        assert "✓ Remembered (memory version 2)" in shown(screen) and "you stopped the answer" in shown(screen)
        assert capturing.other.load().version == 2

    drive(capturing.app(), script)


# --- `memframe frame` builds the Assistant's model as `chat` does ------------------------------------


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> list[Backend]:
    """The backends `memframe frame` would open the frame on (the frame itself is not run)."""
    assert main(["init"]) == 0
    capsys.readouterr()
    backends: list[Backend] = []

    def run_frame(backend: Backend, **_: Any) -> int:
        backends.append(backend)
        backend.close()
        return 0

    monkeypatch.setattr("memframe.tui.app.run_frame", run_frame)
    return backends


def test_frame_takes_the_model_options_and_reads_the_settings_file(
    opened: list[Backend], memframe_home: Path, fake: StrictChatServer
) -> None:
    assert main(["frame"]) == 0
    assert opened[-1].assistant_model.startswith("the scripted demo")
    assert main(["frame", "--model-url", fake.url, "--model", "m", "--temperature", "0", "--max-tokens", "9"]) == 0
    assert opened[-1].assistant_model == f"m at {fake.url}"
    (memframe_home / "config.toml").write_text(f'[model]\nurl = "{fake.url}"\nname = "gemma"\n')
    assert main(["frame"]) == 0
    assert opened[-1].assistant_model == f"gemma at {fake.url}"
    assert main([]) == 0  # the default command is the frame
    assert opened[-1].assistant_model == f"gemma at {fake.url}"


def test_during_an_unresolved_save_conflict_the_header_says_memory_is_withheld(stage: Stage) -> None:
    """The header says what the next call really gets: during a conflict that is no memory at all, not
    "saved version N"."""
    stage.other.save(TEXT, 0)
    stage.other.set_ai(True)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- a draft line\n")
        stage.other.save(TEXT + "- newer\n", 1)
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, ConflictScreen)
        await pilot.press("e")  # keep editing: the conflict is unresolved
        await settle(pilot)
        screen = await open_assistant(pilot)
        said = header(screen)
        assert "memory is withheld from the Assistant (conflict)" in said and "sees saved version" not in said
        await ask(pilot, "what do you know?")
        assert "memory not provided because the person's last save of the memory conflicted" in shown(screen)

    drive(app, script)
