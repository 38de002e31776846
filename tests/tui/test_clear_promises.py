"""Clear and the human-write promises pinned in the frame (issue 18): H4 (a failed Save, then a
Clear, then reconnecting leaves memory empty — nothing was queued), C8 (Discard and Cancel before a
Clear; a Clear waits for an in-flight Save)."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot

from memframe.core.types import Operation
from memframe.tui.dialogs import ConfirmClear, SaveDiscardCancel
from tests.tui.conftest import Gate, drive
from tests.tui.scenarios import TEXT, Stage, append, press, settle


async def confirm(pilot: Pilot[Any]) -> None:
    assert isinstance(pilot.app.screen, ConfirmClear)
    await press(pilot, "shift+tab", "enter")  # Cancel has the focus; move to "Clear memory"


def test_H4_a_failed_save_then_a_clear_then_reconnecting_leaves_memory_empty(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- secret draft\n")
        stage.frame.down = True
        await press(pilot, "ctrl+s")
        assert app.state.dirty and app.state.base_version == 1  # the failure changed nothing, kept the draft
        stage.frame.down = False
        await press(pilot, "ctrl+l")
        assert isinstance(app.screen, SaveDiscardCancel)
        await press(pilot, "d")
        await confirm(pilot)
        assert (app.state.base_version, app.state.draft, app.state.dirty) == (2, "", False)

    drive(app, script)
    stage.clock.now += 3600  # nothing was queued, so nothing can land later
    fresh = stage.app()

    async def reconnect(pilot: Pilot[Any]) -> None:
        assert (fresh.state.base_version, fresh.state.draft) == (2, "")

    drive(fresh, reconnect)
    assert stage.other.load().text == ""
    assert [r.operation for r in stage.other.history()] == [Operation.CLEAR, Operation.SAVE]


def test_C8_discard_before_a_clear_clears_without_saving_the_draft(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- draft\n")
        await press(pilot, "ctrl+l")
        await press(pilot, "d")
        await confirm(pilot)
        assert app.state.base_version == 2 and not app.state.dirty

    drive(app, script)
    assert stage.other.load().text == ""
    assert [r.operation for r in stage.other.history()] == [Operation.CLEAR, Operation.SAVE]


def test_C8_cancel_before_a_clear_writes_nothing_and_keeps_the_draft(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- draft\n")
        await press(pilot, "ctrl+l")
        assert isinstance(app.screen, SaveDiscardCancel)
        await press(pilot, "escape")
        assert not isinstance(app.screen, ConfirmClear | SaveDiscardCancel)
        assert app.state.dirty and app.state.draft == TEXT + "- draft\n" and app.state.base_version == 1

    drive(app, script)
    assert stage.other.load().version == 1 and stage.other.get_policy().clear_generation == 0


def test_C8_a_clear_waits_for_an_in_flight_save(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    gate = Gate(stage.frame)
    app = stage.app(gate)

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- saving\n")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert gate.entered.wait(5) and app.state.in_flight
        await pilot.press("ctrl+l")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmClear | SaveDiscardCancel)  # waiting, not asking yet
        gate.release()
        await settle(pilot)
        assert app.state.base_version == 2  # the Save landed first
        await confirm(pilot)
        assert app.state.base_version == 3 and app.state.draft == ""

    drive(app, script)
    assert [r.operation for r in stage.other.history()] == [Operation.CLEAR, Operation.SAVE, Operation.SAVE]
