"""The frame at 80 and 60 columns, as a new user meets it: what it shows stays whole and readable.

Each test reads the lines the widget draws (its strips), not its model, so a field that wraps in
its middle, a diff row that loses its side, or a column cut at the edge fails here.
"""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import DataTable

from memframe.tui.widgets.status import StatusBar, pack
from tests.tui.conftest import drive
from tests.tui.scenarios import TEXT, Stage, append, open_changes, press, settle, wait_until
from tests.tui.test_proposals import open_proposals, propose

LONG = "- " + " ".join(f"word{i}" for i in range(40))  # wraps at any of these widths


def drawn(widget: Widget) -> list[str]:
    """The widget's lines as drawn on screen, trailing blanks dropped."""
    return [widget.render_line(y).text.rstrip() for y in range(widget.size.height)]


def test_at_60_columns_the_header_breaks_between_fields_never_inside_one(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- draft\n")
        await settle(pilot)
        lines = drawn(app.screen.query_one(StatusBar))
        assert any(line.strip().startswith("Mode Read only") or "·  Mode Read only" in line for line in lines), lines
        assert not any(line.endswith("Mode") for line in lines), lines
        assert any("/ 8,192 bytes ▱" in line for line in lines), lines  # the size meter stays one piece
        assert any("Version 1  ·  ● Unsaved changes" in line for line in lines), lines

    drive(app, script, size=(60, 20))


def test_pack_fills_lines_and_breaks_only_at_separators() -> None:
    from rich.text import Text

    fields = [Text("aaaa"), Text("bb b"), Text("cc")]
    assert [t.plain for t in pack(fields, 100)] == ["aaaa  ·  bb b  ·  cc"]
    assert [t.plain for t in pack(fields, 13)] == ["aaaa  ·  bb b", "cc"]
    assert [t.plain for t in pack(fields, 3)] == ["aaaa", "bb b", "cc"]  # a field alone wider than the room
    assert fields[0].plain == "aaaa"  # the fields themselves are not changed


def test_a_wrapped_diff_line_keeps_its_sign_on_every_row(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    stage.other.save(TEXT + LONG + "\n", 1)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_changes(pilot)  # the newest revision: it added LONG
        rows = [line.strip() for line in drawn(screen.query_one("#diff"))]
        added = [row for row in rows if "word" in row]
        assert len(added) >= 2, rows  # LONG wrapped
        assert all(row.startswith("+") for row in added), rows
        assert " ".join(row[1:].strip() for row in added) == LONG, rows  # nothing lost at the breaks
        await press(pilot, "down")  # revision 1 against the empty memory: every row added, unwrapped
        rows = [line.strip() for line in drawn(screen.query_one("#diff"))]
        assert "+- Aiko prefers short answers." in rows, rows

    drive(app, script, size=(60, 20))


def test_at_80_columns_proposals_show_every_column_whole(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    propose(stage, "remember: - likes tea")
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_proposals(pilot)
        table = screen.query_one("#proposal-list", DataTable)
        assert table.virtual_size.width <= table.scrollable_content_region.width  # nothing scrolls sideways
        header, row = drawn(table)[:2]
        assert header.split() == ["Proposal", "State", "Why", "Against", "Edits", "Made"]
        assert row.endswith("just now") and "Read only" in row, row

    drive(app, script, size=(80, 24))


def test_keys_from_the_palette_opens_help_which_escape_closes(stage: Stage) -> None:
    from textual.command import CommandPalette
    from textual.widgets import HelpPanel

    from memframe.tui.screens.help import HelpScreen
    from memframe.tui.screens.memory import MemoryScreen

    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        width = app.screen.query_one(StatusBar).size.width
        await press(pilot, "ctrl+p")
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"keys")
        await wait_until(
            pilot,
            lambda: "Keys" in str(app.screen.query("CommandList").first().get_option_at_index(0).prompt),
            "Keys offered",
        )
        await press(pilot, "enter")
        assert isinstance(app.screen, HelpScreen) and not app.query(HelpPanel)
        assert app.screen_stack[0].query_one(StatusBar).size.width == width  # nothing squeezed
        await press(pilot, "escape")
        assert isinstance(app.screen, MemoryScreen)

    drive(app, script, size=(80, 24))
