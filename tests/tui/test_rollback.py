"""The frame over a rolled-back server: one line naming both versions, and the draft kept."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot

from memframe.core.types import MEMORY_PATH
from memframe.tui.screens.memory import MemoryScreen
from tests.reliability.support import raw
from tests.tui.conftest import drive
from tests.tui.scenarios import TEXT, Stage, press


def test_a_rolled_back_server_is_refused_and_the_draft_is_kept(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    stage.other.save(TEXT + "- Ben is on leave.\n", 1)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        assert app.state.base_version == 2
        with raw(stage.other.location) as conn:  # the server drops revision 2 and lowers the head
            conn.execute("DELETE FROM file_versions WHERE path = ? AND version = 2", (MEMORY_PATH,))
            conn.execute("UPDATE files SET current_version = 1 WHERE path = ?", (MEMORY_PATH,))
        screen = pilot.app.screen_stack[0]
        assert isinstance(screen, MemoryScreen)
        area = screen.editor.area
        area.move_cursor(area.document.end)
        area.insert("- a draft worth keeping\n")
        await pilot.pause()
        await press(pilot, "ctrl+s")
        assert app.state.dirty and "a draft worth keeping" in app.state.draft
        assert "version 1" in app.state.message and "version 2" in app.state.message
        assert "rolled back" in app.state.message and "\n" not in app.state.message

    drive(app, script)
    with raw(stage.other.location) as conn:
        assert conn.execute("SELECT max(version) FROM file_versions WHERE path = ?", (MEMORY_PATH,)).fetchone() == (1,)
