"""The frame's flows against the remote backend over a real loopback server (uvicorn on 127.0.0.1).

The frame only knows the Backend seam, so these are the same flows as
test_flows.py; here they cross HTTP: exact acknowledged versions, a conflict
view fed by the server's 409, a Clear that loses the race, Undo after Clear,
an Assistant answer's receipt and a proposal applied as a Save.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from textual.pilot import Pilot

from memframe import sealing
from memframe.core.types import Mode, Operation
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from memframe.tui.dialogs import ClearConflict, ConflictScreen
from memframe.tui.screens.assistant import AssistantScreen
from memframe.tui.screens.mode import ModeSwitcher
from memframe.tui.screens.proposals import ProposalsScreen
from tests.conftest import FakeClock, World
from tests.tui.conftest import drive
from tests.tui.scenarios import TEXT, Outage, Stage, append, ask, open_changes, press
from tests.tui.test_flows import confirm_clear

remote_kinds = pytest.importorskip(
    "tests.support.remote_kinds", reason="memframe.backend.remote (and its test server) is not built yet"
)

pytestmark = pytest.mark.server


@pytest.fixture
def remote_stage(service: MemoryService, clock: FakeClock) -> Iterator[Stage]:
    world = World(
        kind="remote-uvicorn",
        service=service,
        workspace_id="ws",
        key=sealing.new_key(),
        user=LOCAL_USER,
        make=remote_kinds.REMOTE_MAKERS["remote-uvicorn"],
    )
    frame, other = world.client(), world.client()
    assert frame.location.startswith("http://127.0.0.1:")
    yield Stage(Outage(frame), other, clock)
    world.close()


def test_save_conflict_and_explicit_overwrite_over_http(remote_stage: Stage) -> None:
    stage = remote_stage
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        assert app.state.base_version == 1 and app.state.location.startswith("http://")
        await append(pilot, "- mine\n")
        await press(pilot, "ctrl+s")
        assert (app.state.base_version, app.state.dirty, app.state.acknowledged_version) == (2, False, 2)
        await append(pilot, "- more\n")
        stage.other.save("theirs\n", 2)
        await press(pilot, "ctrl+s")
        assert isinstance(app.screen, ConflictScreen) and app.screen.server.text == "theirs\n"
        assert app.state.save_state.last.header() == "conflict; version=3"
        await press(pilot, "o")
        assert (app.state.base_version, app.state.dirty) == (4, False)

    drive(app, script)
    assert stage.other.load().text == TEXT + "- mine\n- more\n"


def test_clear_race_retry_then_undo_over_http(remote_stage: Stage) -> None:
    stage = remote_stage
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        stage.other.save("newer\n", 1)
        await confirm_clear(pilot)
        assert isinstance(app.screen, ClearConflict)
        assert stage.other.get_policy().clear_generation == 0 and stage.other.load().version == 2
        await press(pilot, "ctrl+l")  # explicit Retry Clear against version 2
        assert (app.state.base_version, app.state.draft) == (3, "")
        await open_changes(pilot, 2)  # revision 1
        await press(pilot, "u")
        assert (app.state.base_version, app.state.draft) == (4, TEXT)

    drive(app, script)
    assert stage.other.get_policy().clear_generation == 1
    assert stage.other.history(limit=1)[0].operation is Operation.UNDO


def test_mode_conflict_over_http(remote_stage: Stage) -> None:
    stage = remote_stage
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        stage.other.set_policy(Mode.OFF, 0)
        await press(pilot, "ctrl+o")
        await press(pilot, "down", "enter")  # Auto, against the stale revision
        assert isinstance(app.screen, ModeSwitcher) and app.screen.policy.mode is Mode.OFF

    drive(app, script)
    assert stage.other.get_policy().mode is Mode.OFF


def test_assistant_receipt_and_proposal_apply_over_http(remote_stage: Stage) -> None:
    """The Assistant pane and Proposals across HTTP: the receipt's revision, then Apply as a Save."""
    stage = remote_stage
    stage.other.save(TEXT, 0)
    stage.other.set_ai(True)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "f2")
        screen = app.screen
        assert isinstance(screen, AssistantScreen)
        await ask(pilot, "what do you know?")
        await ask(pilot, "remember: - likes tea")
        assert [e.revision for e in screen.conversation.exchanges] == [1, 1]
        await press(pilot, "f3")
        assert isinstance(app.screen, ProposalsScreen)
        await press(pilot, "a")
        assert (app.state.base_version, app.state.dirty) == (2, False)

    drive(app, script)
    assert stage.other.load().text == TEXT + "- likes tea\n"
    assert stage.other.proposals() == []


def test_edits_and_assistant_turns_across_a_key_session_eviction_over_http(remote_stage: Stage) -> None:
    """A frame left open past the server's idle time: its next message opens a fresh key session."""
    stage = remote_stage
    stage.other.save(TEXT, 0)
    stage.other.set_ai(True)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "f2")
        screen = app.screen
        assert isinstance(screen, AssistantScreen)
        await ask(pilot, "what do you know?")
        first = stage.frame.key_session()
        await press(pilot, "escape")
        stage.clock.now += 31 * 60  # half an hour idle: the server forgets the key
        await press(pilot, "end", *"- likes jam", "enter", "ctrl+s")
        assert (app.state.base_version, app.state.dirty) == (2, False)
        await press(pilot, "f2")
        await ask(pilot, "and now?")
        assert [e.revision for e in screen.conversation.exchanges] == [1, 2]
        assert all(e.error is None for e in screen.conversation.exchanges)
        assert stage.frame.key_session() != first

    drive(app, script)
