"""Where every line came from, in the frame: blame, the capture's message, revert, the budget, the bound."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from memframe.core.types import MEMORY_RECALL_MAX_BYTES, Author, Mode
from memframe.service import MemoryService
from memframe.tui.dialogs.confirm import ConfirmAction
from memframe.tui.dialogs.revert_conflict import RevertConflict
from memframe.tui.screens.blame import BlameScreen
from memframe.tui.screens.budget import BudgetScreen, budget_table
from memframe.tui.screens.changes import ChangesScreen
from tests.tui.conftest import drive
from tests.tui.scenarios import Stage, append, main_screen, open_changes, press, settle, wait_until

ONE = "# Memory\n- Aiko prefers short answers.\n"
TWO = ONE + "- Ben is on leave.\n"
THREE = TWO.replace("Aiko prefers short answers.", "Aiko prefers long answers.")


def three_versions(stage: Stage) -> None:
    stage.other.save(ONE, 0)
    stage.clock.now += 60
    stage.other.save(TWO, 1)
    stage.clock.now += 60
    stage.other.save(THREE, 2)


async def open_blame(pilot: Pilot[Any], row: int = 0) -> BlameScreen:
    await open_changes(pilot, row)
    await press(pilot, "b")
    screen = pilot.app.screen
    assert isinstance(screen, BlameScreen)
    await wait_until(pilot, lambda: screen.outcome is not None, "the blame")
    await settle(pilot)
    return screen


def test_blame_names_each_lines_version_and_enter_opens_its_diff(stage: Stage) -> None:
    three_versions(stage)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_blame(pilot)
        assert screen.outcome is not None and screen.outcome.at == 3
        assert [(b.version, b.text) for b in screen.outcome.lines] == [
            (1, "# Memory\n"), (3, "- Aiko prefers long answers.\n"), (2, "- Ben is on leave.\n"),
        ]  # fmt: skip
        assert "revision 3: 3 lines from 3 versions" in str(screen.query_one("#blame-title", Static).render())
        table = screen.query_one(DataTable)
        assert table.row_count == 3 and str(table.get_row_at(2)[0]) == "2"
        assert "local" in str(table.get_row_at(2)[1])  # the person's user name
        await press(pilot, "down", "down")
        why = str(screen.query_one("#blame-why", Static).render())
        assert "Version 2" in why
        await press(pilot, "enter")
        changes = pilot.app.screen
        assert isinstance(changes, ChangesScreen) and changes.table.highlighted() == 2
        await settle(pilot)
        assert "revision 1 → revision 2" in str(changes.query_one("#diff-title", Static).render())

    drive(app, script)


def test_blame_of_an_older_revision(stage: Stage) -> None:
    three_versions(stage)

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_blame(pilot, row=1)  # revision 2
        assert screen.outcome is not None and screen.outcome.at == 2
        assert [b.version for b in screen.outcome.lines] == [1, 1, 2]

    drive(stage.app(), script)


def test_a_one_line_memory_is_counted_in_the_singular(stage: Stage) -> None:
    """Found by hand: "1 lines from 1 versions"."""
    stage.other.save("- Miso is the cat.\n", 0)

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_blame(pilot)
        assert "revision 1: 1 line from 1 version ·" in str(screen.query_one("#blame-title", Static).render())

    drive(stage.app(), script)


def test_a_captures_line_shows_the_persons_message_and_its_receipts(stage: Stage) -> None:
    stage.other.save(ONE, 0)
    stage.other.set_ai(True)
    stage.other.set_policy(Mode.AUTO, 0)
    assert stage.frame.send("c-tea", "remember: - Ben prefers tea.").remembered

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_blame(pilot)
        assert screen.outcome is not None
        last = screen.outcome.lines[-1]
        assert last.author is Author.ASSISTANT and "Ben prefers tea" in last.text
        assert "Assistant c-tea" in str(screen.query_one(DataTable).get_row_at(2)[1])
        await press(pilot, "down", "down")
        why = str(screen.query_one("#blame-why", Static).render())
        assert "conversation c-tea" in why and "remember: - Ben prefers tea." in why
        await press(pilot, "i")
        await settle(pilot)
        receipts = str(screen.query_one("#blame-why", Static).render())
        assert "Receipts of conversation c-tea" in receipts and "used revision 1" in receipts

    drive(stage.app(), script)


def test_imported_lines_show_the_file_they_came_from(stage: Stage) -> None:
    stage.other.save(ONE, 0)
    stage.clock.now += 60
    stage.other.save(TWO, 1, source="CLAUDE.md")

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_blame(pilot)
        assert screen.outcome is not None
        assert [b.source for b in screen.outcome.lines] == [None, None, "CLAUDE.md"]
        table = screen.query_one(DataTable)
        assert str(table.get_row_at(2)[1]) == "from CLAUDE.md" and "local" in str(table.get_row_at(0)[1])
        await press(pilot, "down", "down")
        why = str(screen.query_one("#blame-why", Static).render())
        assert "Version 2 · save by local, imported from CLAUDE.md" in why

    drive(stage.app(), script)


def test_a_tampered_source_note_is_never_shown(stage: Stage, tui_service: MemoryService) -> None:
    stage.other.save(ONE, 0)
    stage.other.save(TWO, 1, source="CLAUDE.md")
    with tui_service.db.write() as conn:  # the server moves the note onto version 1
        conn.execute("UPDATE file_versions SET source_note = (SELECT source_note FROM file_versions WHERE version = 2)"
                     " WHERE version = 1")  # fmt: skip

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_blame(pilot)
        assert screen.outcome is not None and screen.outcome.error is not None and not screen.outcome.lines
        title = str(screen.query_one("#blame-title", Static).render())
        assert "tampering" in title and "CLAUDE.md" not in title
        assert screen.query_one(DataTable).row_count == 0

    drive(stage.app(), script)


def test_revert_undoes_one_change_and_keeps_later_ones(stage: Stage) -> None:
    three_versions(stage)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await open_changes(pilot, row=1)  # revision 2 added Ben's line; 3 edited Aiko's since
        await press(pilot, "r")
        await settle(pilot)
        assert app.state.base_version == 4 and not app.state.dirty
        assert main_screen(pilot).editor.text == THREE.replace("- Ben is on leave.\n", "")
        assert "Reverted version 2's change as version 4" in app.state.message

    drive(app, script)
    assert stage.other.load().text == ONE.replace("short", "long")


def test_a_conflicting_revert_writes_nothing_and_offers_the_result_to_edit(stage: Stage) -> None:
    before = "# Memory\n- Aiko prefers short answers.\n- Standup is at 9.\n- Ben is on leave.\n"
    stage.other.save(before, 0)
    edited = before.replace("short", "long").replace("on leave", "away")
    stage.other.save(edited, 1)  # revision 2 edits two lines
    stage.other.save(edited.replace("away", "back"), 2)  # revision 3 edits one of them again
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await open_changes(pilot, row=1)
        await press(pilot, "r")
        dialog = pilot.app.screen
        assert isinstance(dialog, RevertConflict)
        shown = " ".join(str(s.render()) for s in dialog.query(Static))
        assert "nothing was written" in shown and "- Ben is away." in shown and "Ben is back." in shown
        await press(pilot, "e")
        await settle(pilot)
        assert app.state.base_version == 3 and app.state.dirty
        assert main_screen(pilot).editor.text == before.replace("on leave", "back")
        assert "at line 4" in app.state.message

    drive(app, script)
    assert stage.other.load().version == 3


def test_a_revert_that_loses_the_race_stops_and_says_so(stage: Stage) -> None:
    three_versions(stage)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await open_changes(pilot, row=1)
        stage.other.save(THREE + "- Written elsewhere.\n", 3)
        await press(pilot, "r")
        await settle(pilot)
        assert app.state.base_version == 4 and "Not reverted: version 4 was written first" in app.state.message
        assert not app.state.dirty

    drive(app, script)
    assert stage.other.load().version == 4


def test_the_budget_shows_each_sections_bytes_and_share(stage: Stage) -> None:
    stage.other.save("# Work\n- one\n\n# Home\n- two two\n", 0)

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "ctrl+b")
        screen = pilot.app.screen
        assert isinstance(screen, BudgetScreen)
        console = Console(width=76, record=True, file=io.StringIO())
        console.print(budget_table(screen.text))
        rows = [line.split() for line in console.export_text().splitlines()]
        assert rows[1][:3] == ["Work", "14", "0.2%"] and rows[2][:3] == ["Home", "17", "0.2%"]
        assert rows[3][:3] == ["Total", "31", "0.4%"]
        await press(pilot, "escape")
        assert not isinstance(pilot.app.screen, BudgetScreen)

    drive(stage.app(), script)


def test_a_save_over_the_bound_is_asked_first(stage: Stage) -> None:
    stage.other.save(ONE, 0)
    app = stage.app()
    long = "".join(f"- note {i}: a line long enough to add up quickly.\n" for i in range(200))

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, long)
        await press(pilot, "ctrl+s")
        dialog = pilot.app.screen
        assert isinstance(dialog, ConfirmAction)
        assert "withheld from recall" in dialog.body and "kept intact" in dialog.body
        await press(pilot, "escape")
        await settle(pilot)
        assert app.state.base_version == 1 and app.state.dirty and "Not saved" in app.state.message
        await press(pilot, "ctrl+s")
        await press(pilot, "y")
        await settle(pilot)
        assert app.state.base_version == 2 and not app.state.dirty

    drive(app, script)
    assert len(stage.other.load().text.encode()) > MEMORY_RECALL_MAX_BYTES
