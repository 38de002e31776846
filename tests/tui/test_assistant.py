"""Pilot tests for the Assistant pane: answers, their receipts, capture wording, Changes at a revision, AI switch.

Each drives the app built by the CLI's factory against the local backend and
its scripted model (which quotes the memory block it was given), and asserts
state: the receipt's revision, what the backend holds, which screen is open.
"""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Static

from memframe.core.errors import AIDisabled, Unavailable
from memframe.core.types import Mode, RecallStatus
from memframe.tui.dialogs import ConflictScreen
from memframe.tui.screens.assistant import AssistantScreen, ExchangeItem
from memframe.tui.screens.changes import ChangesScreen
from tests.tui.conftest import drive
from tests.tui.scenarios import TEXT, Stage, append, ask, main_screen, press


async def open_assistant(pilot: Pilot[Any]) -> AssistantScreen:
    await press(pilot, "f2")
    screen = pilot.app.screen
    assert isinstance(screen, AssistantScreen)
    return screen


async def ask_in_pane(pilot: Pilot[Any], message: str) -> AssistantScreen:
    """Open the Assistant pane (f2) and send `message`; the pane, once the answer is in."""
    screen = await open_assistant(pilot)
    await ask(pilot, message)
    return screen


@pytest.fixture
def text_and_ai(stage: Stage) -> None:
    """The usual workspace: TEXT saved as version 1 and workspace AI on."""
    stage.other.save(TEXT, 0)
    stage.other.set_ai(True)


def shown(screen: AssistantScreen, index: int = -1) -> str:
    """The words the pane shows for one exchange (what the person reads)."""
    item = list(screen.query(ExchangeItem))[index]
    return str(item.query_one(Static).content)


def said(screen: AssistantScreen, selector: str) -> str:
    return str(screen.query_one(selector, Static).content)


@pytest.mark.usefixtures("text_and_ai")
def test_an_answer_shows_the_memory_revision_it_used(stage: Stage) -> None:
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await ask_in_pane(pilot, "what do you know?")
        exchange = screen.conversation.exchanges[0]
        assert exchange.result is not None and "- Aiko prefers short answers." in exchange.result.answer
        assert exchange.revision == 1
        assert [(c.status, c.revision) for c in exchange.calls] == [(RecallStatus.PROVIDED, 1)]
        assert "receipt: memory revision 1 was used" in shown(screen)
        assert "- Aiko prefers short answers." in shown(screen)
        # the receipt shown is the server's record for this conversation
        receipts = stage.other.receipts(screen.conversation.id)
        assert [(r.status, r.revision) for r in receipts] == [(RecallStatus.PROVIDED, 1)]

    drive(app, script)


def test_withheld_memory_says_why(stage: Stage) -> None:
    stage.other.save("- x" * 3000, 0)  # over 8 KiB
    stage.other.set_ai(True)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await ask_in_pane(pilot, "what do you know?")
        exchange = screen.conversation.exchanges[0]
        assert exchange.revision is None
        assert exchange.calls[0].status is RecallStatus.OVERSIZED
        assert "memory not provided because the memory is over the 8192-byte limit" in shown(screen)

    drive(app, script)


@pytest.mark.usefixtures("text_and_ai")
def test_a_conflicted_save_withholds_memory_and_the_draft_is_never_sent(stage: Stage) -> None:
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- a secret draft line\n")
        stage.other.save(TEXT + "- newer\n", 1)
        await press(pilot, "ctrl+s")
        assert isinstance(app.screen, ConflictScreen)
        await press(pilot, "e")  # keep editing: the conflict is unresolved
        screen = await open_assistant(pilot)
        assert "Your unsaved draft is not memory" in said(screen, "#assistant-status")
        await ask(pilot, "what do you know?")
        exchange = screen.conversation.exchanges[0]
        assert exchange.calls[0].status is RecallStatus.CONFLICT
        assert "memory not provided because the person's last save of the memory conflicted" in shown(screen)
        assert exchange.result is not None and "secret draft" not in exchange.result.answer

    drive(app, script)


@pytest.mark.usefixtures("text_and_ai")
def test_memory_off_adds_nothing(stage: Stage) -> None:
    stage.other.set_policy(Mode.OFF, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await ask_in_pane(pilot, "what do you know?")
        assert "receipt: memory is off: nothing was added" in shown(screen)
        assert screen.conversation.exchanges[0].revision is None

    drive(app, script)


@pytest.mark.usefixtures("text_and_ai")
def test_remembered_is_said_only_for_a_committed_receipt(stage: Stage) -> None:
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await ask_in_pane(pilot, "remember: - likes tea")  # Read only: a proposal
        proposal = screen.conversation.exchanges[0]
        assert proposal.result is not None and [o.kind for o in proposal.result.outcomes] == ["proposed"]
        assert "✓ Remembered" not in shown(screen)
        assert "Not remembered yet: proposal prop_" in shown(screen) and "waits for your review" in shown(screen)
        assert "f3 opens Proposals" in said(screen, "#assistant-message")
        assert stage.other.load().version == 1

        stage.other.set_policy(Mode.AUTO, stage.other.get_policy().revision)
        await ask(pilot, "remember: - likes coffee")
        committed = screen.conversation.exchanges[1]
        assert committed.result is not None and committed.result.remembered
        assert "✓ Remembered (memory version 2)" in shown(screen)
        assert "✓ Remembered" not in shown(screen, 0)
        assert stage.other.load().text.endswith("- likes coffee\n")
        # the editor, holding no draft, now shows what the Assistant committed
        assert (app.state.base_version, app.state.dirty) == (2, False)
        assert main_screen(pilot).editor.text == stage.other.load().text

    drive(app, script)


@pytest.mark.usefixtures("text_and_ai")
def test_a_committed_change_leaves_an_unsaved_draft_alone(stage: Stage) -> None:
    stage.other.set_policy(Mode.AUTO, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- my draft\n")
        await open_assistant(pilot)
        await ask(pilot, "remember: - likes coffee")
        assert stage.other.load().version == 2
        assert (app.state.base_version, app.state.dirty) == (1, True)
        assert app.state.draft == TEXT + "- my draft\n"
        assert "The Assistant saved version 2" in app.state.message

    drive(app, script)


@pytest.mark.usefixtures("text_and_ai")
def test_ctrl_g_opens_changes_at_exactly_the_revision_an_answer_used(stage: Stage) -> None:
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await ask_in_pane(pilot, "what do you know?")  # revision 1
        version = 1
        for i in range(60):  # more than a page of Changes
            version = stage.other.save(TEXT + f"- note {i}\n", version).version
        await ask(pilot, "and now?")
        assert [e.revision for e in screen.conversation.exchanges] == [1, version]
        await pilot.press("up")  # from the input: the previous answer
        await press(pilot, "ctrl+g")
        changes = app.screen
        assert isinstance(changes, ChangesScreen)
        assert changes.opened_at == 1 and changes.table.highlighted() == 1
        assert len(changes.rows) > changes.page_size  # it fetched pages until revision 1 was listed
        await press(pilot, "escape")
        assert app.screen is screen
        await press(pilot, "down", "ctrl+g")
        assert isinstance(app.screen, ChangesScreen) and app.screen.table.highlighted() == version

    drive(app, script)


def test_an_answer_without_memory_has_no_revision_to_open(stage: Stage) -> None:
    stage.other.set_ai(True)  # the memory is empty
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await ask_in_pane(pilot, "what do you know?")
        assert "memory is empty: nothing was added" in shown(screen)
        await press(pilot, "ctrl+g")
        assert app.screen is screen

    drive(app, script)


def test_workspace_ai_is_switched_from_the_pane_and_not_by_the_mode(stage: Stage) -> None:
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        policy = stage.other.get_policy()
        screen = await open_assistant(pilot)
        assert "Workspace AI is off" in said(screen, "#assistant-ai")
        await press(pilot, "f4")
        assert stage.other.get_ai().enabled
        assert "Workspace AI is on" in said(screen, "#assistant-ai")
        assert stage.other.get_policy() == policy  # the mode is a separate setting
        await press(pilot, "f4")
        assert not stage.other.get_ai().enabled

    drive(app, script)


def test_a_refused_send_becomes_a_message_and_keeps_the_words(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await ask_in_pane(pilot, "hello")  # AI is off
        exchange = screen.conversation.exchanges[0]
        assert isinstance(exchange.error, AIDisabled)
        assert "Not sent: Workspace AI is off" in said(screen, "#assistant-message")
        assert screen.query_one(Input).value == "hello"
        stage.other.set_ai(True)
        stage.frame.down = True
        await ask(pilot, "hello")
        assert isinstance(screen.conversation.exchanges[1].error, Unavailable)
        assert "Not sent:" in shown(screen)
        stage.frame.down = False
        await ask(pilot, "hello")
        assert screen.conversation.exchanges[2].revision == 1

    drive(app, script)


@pytest.mark.usefixtures("text_and_ai")
def test_the_conversation_survives_closing_the_pane(stage: Stage) -> None:
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await ask_in_pane(pilot, "what do you know?")
        await press(pilot, "escape")
        assert app.screen is main_screen(pilot)
        again = await open_assistant(pilot)
        assert again is screen and len(list(again.query(ExchangeItem))) == 1
        await ask(pilot, "remember: - likes tea")
        assert {r.admission_id for r in stage.other.receipts(screen.conversation.id)} == {
            e.result.admission_id for e in screen.conversation.exchanges if e.result is not None
        }

    drive(app, script)


def test_the_palette_offers_the_assistant_and_proposals(stage: Stage) -> None:
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {"Assistant", "Proposals"} <= titles
        screen = await open_assistant(pilot)
        commands = {c.title: c.help for c in app.get_system_commands(screen)}
        assert {"Changes", "AI on/off", "Proposals"} <= commands.keys()
        assert "the memory revision the highlighted answer used" in commands["Changes"]  # the footer's short label

    drive(app, script)


@pytest.mark.usefixtures("text_and_ai")
def test_the_assistant_survives_the_servers_idle_eviction(stage: Stage) -> None:
    """The frame's cached key session is evicted after 30 idle minutes; the next send opens a fresh one."""
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await ask_in_pane(pilot, "what do you know?")
        first = stage.frame.key_session()
        stage.clock.now += 31 * 60
        await ask(pilot, "still there?")
        [one, two] = screen.conversation.exchanges
        assert (one.revision, two.revision, two.error) == (1, 1, None)
        assert "receipt: memory revision 1 was used" in shown(screen)
        assert stage.frame.key_session() != first

    drive(app, script)


@pytest.mark.usefixtures("text_and_ai")
def test_taking_the_servers_version_after_a_conflict_gives_the_assistant_memory_again(stage: Stage) -> None:
    """conflict → "Discard my draft, take version N" → recall: memory is provided at N, not withheld."""
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- a draft line\n")
        stage.other.save(TEXT + "- newer\n", 1)
        await press(pilot, "ctrl+s")
        assert isinstance(app.screen, ConflictScreen)
        assert app.state.save_state.last.kind == "conflict"
        await press(pilot, "d", "y")  # Discard my draft (confirmed), take version 2
        assert (app.state.base_version, app.state.dirty) == (2, False)
        assert app.state.save_state.last.header() == "saved; version=2"
        screen = await ask_in_pane(pilot, "what do you know?")
        exchange = screen.conversation.exchanges[0]
        assert [(c.status, c.revision) for c in exchange.calls] == [(RecallStatus.PROVIDED, 2)]
        assert exchange.result is not None and "- newer" in exchange.result.answer

    drive(app, script)


@pytest.mark.usefixtures("text_and_ai")
def test_reload_then_discard_after_a_conflict_also_resolves_it(stage: Stage) -> None:
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- a draft line\n")
        stage.other.save(TEXT + "- newer\n", 1)
        await press(pilot, "ctrl+s")
        await press(pilot, "e")  # keep editing: still a conflict, memory withheld
        assert app.state.save_state.last.kind == "conflict"
        await press(pilot, "ctrl+r")
        await press(pilot, "d")  # Save / Discard / Cancel: discard, then the reload takes version 2
        assert (app.state.base_version, app.state.dirty) == (2, False)
        screen = await ask_in_pane(pilot, "remember: - likes tea")
        exchange = screen.conversation.exchanges[0]
        assert exchange.calls[0].status is RecallStatus.PROVIDED
        assert exchange.result is not None and exchange.result.outcomes[0].kind == "proposed"

    drive(app, script)
