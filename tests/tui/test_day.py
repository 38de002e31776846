"""A whole day with the frame: help from the bindings, keys that mean one thing, a keymap and a theme
that persist, the status bar at 60 columns, and Changes over a long history. State, never sleeps."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Static

from memframe import settings
from memframe.tui.dialogs import ConflictScreen, SaveDiscardCancel
from memframe.tui.keys import every_key, markdown_table, meanings
from memframe.tui.screens.changes import ChangesScreen
from memframe.tui.screens.help import HelpScreen
from memframe.tui.screens.memory import MemoryScreen
from memframe.tui.widgets.editor import markdown_highlighting_available
from memframe.tui.widgets.footer import KeyFooter
from memframe.tui.widgets.status import MessageLine, StatusBar
from tests.tui.conftest import drive
from tests.tui.scenarios import TEXT, Stage, append, main_screen, open_changes, press, settle

README = Path(__file__).parents[2] / "README.md"


def text_of(widget: Static) -> str:
    return str(widget.content)


# --- help and keys ---------------------------------------------------------------------------------


def test_f1_opens_help_for_the_current_screen_and_escape_closes_it(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "f1")
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen) and help_screen.screen_name == "Memory (the editor)"
        here = {row.id: row for row in help_screen.here}
        assert here["memframe.save"].keys == "ctrl+s" and "base version" in here["memframe.save"].tooltip
        assert {"memframe.clear", "memframe.reload", "memframe.help", "memframe.quit"} <= here.keys()
        await press(pilot, "escape")
        assert isinstance(app.screen, MemoryScreen)
        await press(pilot, "ctrl+g")
        await press(pilot, "f1")  # help for Changes, and F1 again closes it
        assert isinstance(app.screen, HelpScreen) and app.screen.screen_name == "Changes"
        assert "memframe.changes.search" in {row.id for row in app.screen.here}
        await press(pilot, "f1")
        assert isinstance(app.screen, ChangesScreen)

    drive(app, script)


def test_help_opens_inside_a_dialog_too(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- mine\n")
        stage.other.save(TEXT + "- theirs\n", 1)
        await press(pilot, "ctrl+s")
        assert isinstance(app.screen, ConflictScreen)
        await press(pilot, "f1")
        assert isinstance(app.screen, HelpScreen)
        keys = {row.keys: row.description for row in app.screen.here}
        assert keys["d"] == "Discard my draft" and keys["o"] == "Save over newer"  # the Save conflict's words
        await press(pilot, "escape")
        assert isinstance(app.screen, ConflictScreen) and app.state.dirty

    drive(app, script)


def test_the_undo_conflict_footer_shows_its_own_labels(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    stage.other.save("two\n", 1)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "ctrl+g")
        await press(pilot, "down")
        stage.other.save("three\n", 2)
        await press(pilot, "u")
        assert isinstance(app.screen, ConflictScreen) and app.screen.revision == 1
        shown = {active.binding.key: active.binding.description for active in app.screen.active_bindings.values()}
        assert (shown["e"], shown["o"], shown["d"]) == ("Edit its text", "Restore over newer", "Keep newer")
        await press(pilot, "d")  # keeping the newer version loses nothing: no question
        assert isinstance(app.screen, MemoryScreen) and app.state.base_version == 3

    drive(app, script)


def test_each_key_means_one_thing_across_the_frame() -> None:
    clashes = {key: sorted(what) for key, what in meanings().items() if len(what) > 1 and key != "escape"}
    assert clashes == {}
    # escape is the one key on every screen, and always means back / cancel / keep: never a write
    assert meanings()["escape"] <= {"back", "cancel", "close", "keep"}
    everything = {row.id for _, rows in every_key() for row in rows}
    assert {"memframe.help", "memframe.quit", "memframe.assistant", "memframe.proposals"} <= everything


def test_every_binding_of_the_frame_has_an_id_to_remap_it_by() -> None:
    from textual.binding import Binding

    from memframe.tui.keys import screens

    for name, bindings in screens():
        for binding in Binding.make_bindings(bindings):
            assert (binding.id or "").startswith("memframe."), f"{name}: {binding.key} has no memframe id"


def test_the_readme_key_table_is_the_bindings() -> None:
    assert markdown_table() in README.read_text(encoding="utf-8"), (
        "README's key table is stale: paste the output of "
        "`python -c 'from memframe.tui.keys import markdown_table; print(markdown_table())'` into it"
    )


# --- keymap and theme -----------------------------------------------------------------------------


def frame_settings(config: str, home: Path) -> settings.Settings:
    path = home / "config.toml"
    home.mkdir(parents=True, exist_ok=True)
    path.write_text(config, encoding="utf-8")
    return settings.load({"MEMFRAME_HOME": str(home)})


def test_a_keymap_in_the_settings_file_remaps_a_binding_by_its_id(stage: Stage, memframe_home: Path) -> None:
    stage.other.save(TEXT, 0)
    mine = frame_settings('[keymap]\nsave = "f9"\n"memframe.changes" = "f8"\n', memframe_home)
    app = stage.app(settings=mine)

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- remapped\n")
        await press(pilot, "f9")
        assert (app.state.base_version, app.state.dirty) == (2, False)
        await press(pilot, "f8")
        assert isinstance(app.screen, ChangesScreen)

    drive(app, script)


def test_a_dialogs_footer_shows_help_on_the_key_the_keymap_gives_it(stage: Stage, memframe_home: Path) -> None:
    """A dialog's footer lists its own keys, and Help first: F1, or the key `[keymap]` moved Help to."""
    stage.other.save(TEXT, 0)
    app = stage.app(settings=frame_settings('[keymap]\nhelp = "f12"\n', memframe_home))

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- a draft\n")
        await press(pilot, "ctrl+q")
        assert isinstance(app.screen, SaveDiscardCancel)
        footer = app.screen.query_one(KeyFooter)
        shown = [(key.key_display, key.description) for key in footer.query("FooterKey")]
        assert shown[0] == ("f12", "Help") and ("f1", "Help") not in shown, shown
        await press(pilot, "f12")
        assert isinstance(app.screen, HelpScreen)

    drive(app, script)


def test_the_footer_makes_its_keys_again_only_when_what_they_show_changes(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        footer = app.screen.query_one(KeyFooter)
        before = list(footer.query("FooterKey"))
        app.screen.refresh_bindings()  # the same keys: kept as they are
        await settle(pilot)
        assert list(footer.query("FooterKey")) == before
        app.set_keymap({"memframe.changes": "f8"})  # another key shown: made again, showing it
        await settle(pilot)
        after = list(footer.query("FooterKey"))
        assert after != before and any(key.key == "f8" for key in after)

    drive(app, script)


def test_the_footer_makes_its_keys_after_the_memorys_first_paint_and_once(stage: Stage) -> None:
    """As Textual's footer, the frame's makes its keys after the first paint, which shows the memory
    without waiting for them (the benchmark's child checks that paint); they follow with the next
    refresh, Help and Quit first, and a burst of bindings changes (focus, an editor made editable)
    makes them again at most once."""
    stage.other.save(TEXT, 0)
    app = stage.app()
    composed: list[KeyFooter] = []

    class Counting(KeyFooter):
        def compose(self) -> Any:
            composed.append(self)
            return super().compose()

    async def main() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            footer = app.screen.query_one(KeyFooter)
            await settle(pilot)
            actions = [key.action for key in footer.query("FooterKey")]
            assert actions[:2] == ["help", "quit"] and len(actions) > 2
            counting = Counting()
            await app.screen.mount(counting)
            await settle(pilot)
            composed.clear()
            for _ in range(3):  # three changes before the recompose runs: one recompose
                app.set_keymap({"memframe.changes": "f8"})
                app.screen.refresh_bindings()
            await settle(pilot)
            assert len(composed) == 1 and any(key.key == "f8" for key in counting.query("FooterKey"))

    asyncio.run(main())


def test_messages_name_the_keys_the_keymap_gives(stage: Stage, memframe_home: Path) -> None:
    """A remapped key is the key every message names: the conflict hint, the failed Save's way out,
    the Assistant's AI switch, a dialog's own keys."""
    stage.other.save(TEXT, 0)
    keymap = '[keymap]\nsave = "f9"\nreload = "f6"\ndraft_file = "f10"\n"assistant.ai" = "f7"\n"draft.save" = "f11"\n'
    mine = frame_settings(keymap, memframe_home)
    app = stage.app(settings=mine)

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- mine\n")
        stage.other.save(TEXT + "- theirs\n", 1)
        await press(pilot, "f9")
        assert isinstance(app.screen, ConflictScreen)
        await press(pilot, "e")  # keep editing
        assert "f9 shows the conflict again" in app.state.message and "ctrl+s" not in app.state.message
        stage.frame.down = True
        await press(pilot, "f9")
        assert "f10 writes it to a file" in app.state.message and "f5" not in app.state.message
        stage.frame.down = False
        await press(pilot, "ctrl+q")  # the unsaved-draft dialog names its own remapped key
        dialog = " ".join(text_of(w) for w in app.screen.query(Static))
        assert "(f11, d or escape)" in dialog
        await press(pilot, "escape")
        await press(pilot, "f2")
        ai = text_of(app.screen.query_one("#assistant-ai", Static))
        assert "f7: on" in ai and "f4" not in ai

    drive(app, script)


def test_the_theme_picked_is_written_to_the_settings_file(stage: Stage, memframe_home: Path) -> None:
    mine = frame_settings('# mine\nworkspace = "default"\n\n[keymap]\nsave = "ctrl+s"\n', memframe_home)
    app = stage.app(settings=mine)

    async def script(pilot: Pilot[Any]) -> None:
        app.theme = "nord"  # what choosing it in the command palette does
        await settle(pilot)

    drive(app, script)
    text = (memframe_home / "config.toml").read_text(encoding="utf-8")
    assert text == '# mine\nworkspace = "default"\ntheme = "nord"\n\n[keymap]\nsave = "ctrl+s"\n'
    again = stage.app(settings=settings.load({"MEMFRAME_HOME": str(memframe_home)}), cursor_blink=True)

    async def opens_in_it(pilot: Pilot[Any]) -> None:
        assert again.theme == "nord"

    drive(again, opens_in_it)


def test_a_theme_that_cannot_be_written_is_one_warning_not_a_crash(stage: Stage, memframe_home: Path) -> None:
    """The file broke after the frame started (an editor open on it): the theme applies, the file is kept."""
    elsewhere = memframe_home.parent / "elsewhere"  # not the running frame's own home, which would refuse to load
    mine = frame_settings("", elsewhere)
    (elsewhere / "config.toml").write_text("workspace = [unclosed\n", encoding="utf-8")  # broken since
    app = stage.app(settings=mine)
    notes: list[str] = []

    async def script(pilot: Pilot[Any]) -> None:
        app.theme = "nord"
        await settle(pilot)
        notes.extend(str(n.message) for n in app._notifications)
        assert app.is_running and app.theme == "nord"

    drive(app, script)
    assert any("not remembered" in n and "not valid TOML" in n for n in notes)
    assert (elsewhere / "config.toml").read_text(encoding="utf-8") == "workspace = [unclosed\n"


# --- small terminals --------------------------------------------------------------------------------


def test_at_60_columns_the_status_bar_keeps_its_second_line(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await pilot.resize_terminal(60, 20)
        await append(pilot, "- draft\n")
        await settle(pilot)
        bar = app.screen.query_one(StatusBar)
        shown = text_of(bar)
        assert "Unsaved changes" in shown and "8,192 bytes" in shown and "Version 1" in shown
        assert bar.size.height >= 3  # it grew instead of cutting line two

    drive(app, script)


def test_at_60_columns_the_footer_leaves_out_what_does_not_fit_whole(stage: Stage) -> None:
    """Seen in the hour at 60×20: the footer ended "f2 Assis". A key fits whole or is left out (it is
    in help and the palette), Help and Quit stay, and widening the terminal brings the keys back."""
    stage.other.save(TEXT, 0)
    app = stage.app()

    def shown(footer: KeyFooter) -> list[tuple[str, int, int]]:
        keys = [k for k in footer.query("FooterKey") if k.display and not k.has_class("-command-palette")]
        return [(k.description, k.region.x, k.region.right) for k in keys]

    async def script(pilot: Pilot[Any]) -> None:
        footer = app.screen.query_one(KeyFooter)
        wide = [name for name, _, _ in shown(footer)]
        assert wide[:2] == ["Help", "Quit"] and "Proposals" in wide
        await pilot.resize_terminal(60, 20)
        await settle(pilot)
        palette = next(k for k in footer.query("FooterKey") if k.has_class("-command-palette"))
        narrow = shown(footer)
        assert [name for name, _, _ in narrow][:2] == ["Help", "Quit"]
        assert len(narrow) < len(wide)
        assert all(right <= palette.region.x for _, _, right in narrow)  # nothing runs under the palette key
        await pilot.resize_terminal(100, 30)
        await settle(pilot)
        assert [name for name, _, _ in shown(footer)] == wide

    drive(app, script)


# --- Changes over a long history -------------------------------------------------------------------


def seed_history(stage: Stage, count: int) -> None:
    for version in range(count):
        stage.other.save(f"line {version}\n" + ("needle\n" if version % 97 == 5 else ""), version)


def cursor_version(screen: ChangesScreen) -> int | None:
    return screen.table.highlighted()


def test_changes_title_home_end_and_downs_across_page_boundaries(stage: Stage) -> None:
    seed_history(stage, 1_230)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_changes(pilot)
        assert "1,230 revisions" in text_of(screen.query_one("#changes-title", Static))
        await press(pilot, *["down"] * 100)  # two page boundaries (50, 100) in one burst of key-repeat
        assert cursor_version(screen) == 1_230 - 100
        await press(pilot, "end")
        assert cursor_version(screen) == 1 and screen.complete and len(screen.rows) == 1_230
        await press(pilot, "home")
        assert cursor_version(screen) == 1_230

    drive(app, script)


def test_changes_go_to_a_version_by_number(stage: Stage) -> None:
    seed_history(stage, 300)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_changes(pilot)
        await pilot.press("g")
        box = screen.query_one("#changes-input", Input)
        assert box.has_focus
        box.value = "12"
        await press(pilot, "enter")
        assert cursor_version(screen) == 12 and not box.display
        await pilot.press("g")
        screen.query_one("#changes-input", Input).value = "9999"
        await press(pilot, "enter")
        assert cursor_version(screen) == 12
        assert "no version 9,999; the newest is 300" in text_of(screen.query_one("#changes-title", Static))

    drive(app, script)


def test_changes_search_every_revisions_text_then_view_one_whole(stage: Stage) -> None:
    seed_history(stage, 300)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_changes(pilot)
        await pilot.press("slash")
        screen.query_one("#changes-input", Input).value = "NEEDLE"  # case does not matter
        await press(pilot, "enter")
        assert not screen.search.running
        assert screen.search.matches == [297, 200, 103, 6]  # the versions whose text has "needle", newest first
        title = text_of(screen.query_one("#changes-title", Static))
        assert "4 revisions contain it" in title
        assert cursor_version(screen) == 297
        await press(pilot, "n")
        assert cursor_version(screen) == 200
        await press(pilot, "v")  # the whole text, not the diff
        whole = text_of(screen.query_one("#diff", Static))
        assert "line 199\nneedle" in whole and "---" not in whole
        await press(pilot, "v")
        assert "+needle" in text_of(screen.query_one("#diff", Static))

    drive(app, script)


class HeldReads:
    """The frame's backend, with batch reads held until `go` is set: a search visibly in progress."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self.go = threading.Event()
        self.reading = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def read_revisions(self, versions: Any) -> Any:
        self.reading.set()
        assert self.go.wait(10), "the test never let the search go on"
        return self._backend.read_revisions(versions)


def test_changes_search_can_be_cancelled(stage: Stage) -> None:
    seed_history(stage, 120)
    held = HeldReads(stage.frame._backend)
    stage.frame._backend = held
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_changes(pilot)
        await pilot.press("slash")
        screen.query_one("#changes-input", Input).value = "needle"
        await pilot.press("enter")
        assert held.reading.wait(10) and screen.search.running
        await pilot.press("escape")  # cancels the search, not the screen
        held.go.set()
        await settle(pilot)
        assert isinstance(app.screen, ChangesScreen) and not screen.search.running
        assert "cancelled" in text_of(screen.query_one("#changes-title", Static))
        await press(pilot, "escape")
        assert isinstance(app.screen, MemoryScreen)

    drive(app, script)


# --- the first load, begun before the app runs ---------------------------------------------------


class CountingLoads:
    """The stage's backend, counting `load` calls (and optionally holding the first one)."""

    def __init__(self, backend: Any, hold: threading.Event | None = None) -> None:
        self._backend = backend
        self.loads = 0
        self.hold = hold

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def load(self) -> Any:
        self.loads += 1
        if self.hold is not None:
            assert self.hold.wait(10)
        return self._backend.load()


def test_the_first_load_begun_before_the_app_runs_is_the_one_shown(stage: Stage) -> None:
    """`run_frame` starts reading the memory before Textual starts: the screen shows that read's
    outcome and makes no second one; a Reload afterwards reads again."""
    stage.other.save(TEXT, 0)
    backend = CountingLoads(stage.frame)
    app = stage.app(backend)
    app.start_first_load()

    async def script(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        assert main_screen(pilot).editor.text == TEXT
        assert backend.loads == 1
        await press(pilot, "ctrl+r")
        assert backend.loads == 2

    drive(app, script)


def test_a_first_load_done_before_the_screen_mounts_is_in_its_first_paint(stage: Stage) -> None:
    """The early read `run_frame` begins is usually done before Textual has started: its text goes
    into the screen's first paint (no paint of an empty editor first, no second read)."""
    stage.other.save(TEXT, 0)
    backend = CountingLoads(stage.frame)
    app = stage.app(backend)
    app.start_first_load()
    for thread in threading.enumerate():
        if thread.name == "memframe-first-load":
            thread.join(10)

    async def main() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            painted: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            app.call_after_refresh(lambda: painted.done() or painted.set_result(main_screen(pilot).editor.text))
            assert await painted == TEXT
            await settle(pilot)
            assert main_screen(pilot).state.base_version == 1 and backend.loads == 1

    asyncio.run(main())


def test_a_first_load_that_finishes_while_the_screen_is_made_is_in_its_first_paint(
    stage: Stage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The main screen, when it is made, waits (up to FIRST_READ_WAIT) for the early read still under
    way: its first paint is the memory, not an empty editor painted again once the text arrives."""
    from memframe.tui.screens import memory

    stage.other.save(TEXT, 0)
    backend = CountingLoads(stage.frame, hold=threading.Event())
    hold = backend.hold
    assert hold is not None
    wait = memory.wait

    def read_ends_while_waited_for(futures: Any, timeout: float | None = None) -> Any:
        assert not hold.is_set()  # the read is still under way when the screen is made
        threading.Timer(0.05, hold.set).start()
        return wait(futures, timeout=timeout)

    made_holding: list[str] = []  # the text each editor was made with
    first_text = memory.MemoryScreen._first_text

    def editor_text(screen: MemoryScreen) -> str:
        made_holding.append(first_text(screen))
        return made_holding[-1]

    monkeypatch.setattr(memory, "wait", read_ends_while_waited_for)
    monkeypatch.setattr(memory.MemoryScreen, "_first_text", editor_text)
    monkeypatch.setattr(memory, "FIRST_READ_WAIT", 10.0)  # a slow machine: the read ends well within it
    app = stage.app(backend)
    app.start_first_load()

    async def main() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            assert made_holding == [TEXT]  # made holding the memory: no empty editor painted first
            assert main_screen(pilot).editor.text == TEXT
            assert main_screen(pilot).state.base_version == 1 and backend.loads == 1

    asyncio.run(main())


def test_the_editor_made_holding_the_memory_highlights_it_as_markdown(stage: Stage) -> None:
    """The editor is made with the text of a first read already done, and gets its Markdown
    highlighting once (set after the TextArea is made): the text, the language and the highlights."""
    if not markdown_highlighting_available():
        pytest.skip("textual[syntax] (tree-sitter's Markdown grammar) is not installed")
    stage.other.save(TEXT, 0)
    app = stage.app(syntax=True)
    app.start_first_load()
    for thread in threading.enumerate():
        if thread.name == "memframe-first-load":
            thread.join(10)

    async def script(pilot: Pilot[Any]) -> None:
        area = main_screen(pilot).editor.area
        assert area.text == TEXT and area.language == "markdown" and not area.read_only
        assert area._highlight_query is not None and area._highlights  # Textual's own highlight map

    drive(app, script, size=(100, 30))


def test_a_first_load_still_running_when_the_screen_mounts_is_waited_for(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    backend = CountingLoads(stage.frame, hold=threading.Event())
    app = stage.app(backend)
    app.start_first_load()

    async def script(pilot: Pilot[Any]) -> None:
        screen = main_screen(pilot)
        assert not screen.state.loaded  # still reading: the screen says so and waits for it
        assert backend.hold is not None
        backend.hold.set()
        await settle(pilot)
        assert screen.editor.text == TEXT and backend.loads == 1

    async def main() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            await script(pilot)

    asyncio.run(main())


def test_a_first_load_that_fails_is_said_as_any_failed_load_is(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    stage.frame.down = True
    app = stage.app()
    app.start_first_load()

    async def script(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        shown = " ".join(str(w.render()) for w in pilot.app.screen.query(MessageLine))
        assert "offline" in shown or "cannot be reached" in shown, shown

    drive(app, script)
