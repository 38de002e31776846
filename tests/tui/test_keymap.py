"""Settings cannot silently take a key away (issue 29): a `[keymap]` key that is not a key, one that
would do two things on one screen, an id no binding has, or an unknown theme is the same "bad settings
file" error as any other (one line naming the file, the binding id and the problem; exit 1), and F1
shows every binding id beside its key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Static

from memframe import settings
from memframe.cli import EXIT_ERROR, main
from memframe.core.errors import InvalidInput
from memframe.tui.app import check_settings
from memframe.tui.keys import every_key, is_key, keymap_problem, markdown_table
from memframe.tui.screens.help import HelpScreen
from tests.tui.conftest import drive
from tests.tui.scenarios import TEXT, Stage, settle

BAD = [
    ('[keymap]\nsave = "ctrl-s"\n', 'keymap.save: "ctrl-s" is not a key'),
    ('[keymap]\nsave = "notakey"\n', 'keymap.save: "notakey" is not a key'),
    ('[keymap]\nsave = "ctrl+g"\n', 'keymap.save: ctrl+g already does "Changes" (binding id changes)'),
    ('[keymap]\n"memframe.save" = "ctrl+q"\n', 'keymap.memframe.save: ctrl+q already does "Quit" (binding id quit)'),
    ('[keymap]\nchanges = "f9"\nsave = "f9"\n', "f9 already does"),
    ('[keymap]\nsav = "f9"\n', "keymap.sav names no binding"),
    ('theme = "nope"\n', 'theme "nope" is not a theme'),
]


def write_config(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("config", "problem"), BAD)
def test_a_keymap_or_theme_the_frame_cannot_honour_is_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str], memframe_home: Path, monkeypatch: pytest.MonkeyPatch, config: str, problem: str
) -> None:
    path = write_config(memframe_home, config)
    monkeypatch.setattr("memframe.tui.app.run_frame", lambda *a, **k: pytest.fail("the frame started"))
    assert main([]) == EXIT_ERROR
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("memframe: The config file ")
    assert str(path) in err and problem in err, err
    assert not (memframe_home / "memframe.db").exists()  # refused before anything was created


@pytest.mark.parametrize(("config", "problem"), BAD)
def test_the_app_is_never_built_over_such_settings(memframe_home: Path, config: str, problem: str) -> None:
    write_config(memframe_home, config)
    with pytest.raises(InvalidInput, match="not usable") as refused:
        check_settings(settings.load({"MEMFRAME_HOME": str(memframe_home)}))
    assert problem in str(refused.value)


def test_keys_as_textual_reads_them() -> None:
    for key in ["ctrl+s", "f9", "x", "X", "slash", "question_mark", "escape", "ctrl+shift+up", "pagedown", "space"]:
        assert is_key(key), key
    for key in ["ctrl-s", "notakey", "", "ctrl+", "hyperctrl+s", "f99", "ctrl+notakey"]:
        assert not is_key(key), key
    assert keymap_problem({}) is None
    assert keymap_problem({"save": "f9", "memframe.changes": "f8", "draft.save": "e"}) is None
    assert keymap_problem({"save": "f9, ctrl+s"}) is None  # several keys, the default among them


def test_the_same_key_on_two_screens_is_fine() -> None:
    """One key for Save on the editor and for an action of another screen: never pressed together."""
    assert keymap_problem({"save": "ctrl+f"}) is None  # Changes' search key, on another screen


def test_f1_shows_every_binding_id_beside_its_key(stage: Stage, memframe_home: Path) -> None:
    stage.other.save(TEXT, 0)
    write_config(memframe_home, '[keymap]\nsave = "f9"\n')
    app = stage.app(settings=settings.load({"MEMFRAME_HOME": str(memframe_home)}))
    shown: list[str] = []

    async def script(pilot: Pilot[Any]) -> None:
        await pilot.press("f1")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        console = Console(width=200, record=True)
        for widget in app.screen.query(Static):
            console.print(widget.content)
        shown.append(console.export_text())

    drive(app, script)
    lines = shown[0].splitlines()
    assert any(line.split()[:2] == ["f9", "save"] for line in lines), shown[0]
    for _, rows in every_key({"save": "f9"}):
        for row in rows:
            assert row.id.removeprefix("memframe.") in shown[0], row.id


def test_the_readme_key_table_names_the_binding_ids() -> None:
    table = markdown_table()
    assert table.splitlines()[0] == "| where | key | binding id | what it does |"
    assert "| Memory (the editor) | `ctrl+s` | `save` |" in table
