"""Pilot tests for every flow of the Memory frame, asserting state, never sleeping.

Each test drives the app built by the CLI's factory and checks what matters:
the acknowledged version, the dirty flag, and what the backend holds.
"""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.widgets import Markdown, Static

from memframe.core.types import Mode, Operation
from memframe.tui.dialogs import ClearConflict, ConfirmClear, ConflictScreen, SaveDiscardCancel
from memframe.tui.dialogs.confirm import ConfirmAction
from memframe.tui.screens.memory import MemoryScreen
from memframe.tui.screens.mode import ModeSwitcher
from memframe.tui.widgets.revision_table import RevisionTable
from memframe.tui.widgets.table_caches import LINES_CACHED
from tests.tui.conftest import Gate, Refusing, drive
from tests.tui.scenarios import TEXT, Stage, append, main_screen, open_changes, press, settle

# --- load and save ---------------------------------------------------------------------------------


def test_loads_the_current_version_clean(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        assert (app.state.base_version, app.state.draft, app.state.dirty) == (1, TEXT, False)
        assert app.state.policy is not None and app.state.policy.mode is Mode.READ_ONLY
        assert main_screen(pilot).editor.text == TEXT

    drive(app, script)


def test_save_acknowledges_the_exact_version(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- Ben is on leave.\n")
        assert app.state.dirty
        await press(pilot, "ctrl+s")
        assert (app.state.base_version, app.state.dirty) == (2, False)
        assert app.state.acknowledged_version == 2
        assert app.state.save_state.last.header() == "saved; version=2"  # what X-Memory-State reads
        assert "acknowledged version 2" in app.state.message

    drive(app, script)
    assert stage.other.load().text == TEXT + "- Ben is on leave.\n"


def test_first_save_of_a_new_memory_creates_version_one(stage: Stage) -> None:
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        assert app.state.base_version == 0 and not app.state.dirty
        await append(pilot, "- first\n")
        await press(pilot, "ctrl+s")
        assert app.state.base_version == 1 and not app.state.dirty

    drive(app, script)
    assert stage.other.load().text == "- first\n"


def test_draft_survives_a_failed_save_and_nothing_is_queued(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- offline edit\n")
        stage.frame.down = True
        await press(pilot, "ctrl+s")
        assert app.state.dirty and app.state.draft == TEXT + "- offline edit\n"
        assert app.state.base_version == 1 and app.state.acknowledged_version is None
        assert app.state.message.startswith("Not saved") and app.state.message_is_error
        assert "nothing is queued" in app.state.message
        stage.frame.down = False
        await settle(pilot)  # coming back online sends nothing by itself
        assert stage.other.load().version == 1
        await press(pilot, "ctrl+s")  # only an explicit save writes
        assert (app.state.base_version, app.state.dirty) == (2, False)

    drive(app, script)
    assert [r.version for r in stage.other.history()] == [2, 1]


def test_auth_failure_keeps_the_draft_and_says_why(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    stage.frame = Refusing(stage.frame._backend)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- x\n")
        stage.frame.down = True
        await press(pilot, "ctrl+s")
        assert app.state.dirty and "token was revoked" in app.state.message

    drive(app, script)
    assert stage.other.load().version == 1


def test_offline_at_start_says_so_and_reload_recovers(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    stage.frame.down = True
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        assert not app.state.loaded and "Could not load" in app.state.message
        assert main_screen(pilot).editor.area.read_only
        await press(pilot, "ctrl+s")
        assert "not loaded" in app.state.message
        stage.frame.down = False
        await press(pilot, "ctrl+r")
        assert app.state.loaded and app.state.base_version == 1 and app.state.draft == TEXT

    drive(app, script)


def test_an_unexpected_backend_exception_becomes_a_message(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- x\n")
        real = stage.frame._backend

        class Broken:
            def __getattr__(self, name: str) -> Any:
                if name == "save":
                    raise_it = RuntimeError("disk on fire")

                    def boom(*args: Any, **kwargs: Any) -> Any:
                        raise raise_it

                    return boom
                return getattr(real, name)

        stage.frame._backend = Broken()
        await press(pilot, "ctrl+s")
        assert app.is_running and app.state.dirty
        assert "disk on fire" in app.state.message

    drive(app, script)


# --- conflicts --------------------------------------------------------------------------------------


def test_save_conflict_shows_newer_text_and_keeps_the_draft(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- mine\n")
        stage.other.save(TEXT + "- theirs\n", 1)
        await press(pilot, "ctrl+s")
        assert isinstance(app.screen, ConflictScreen)
        assert app.screen.server.text == TEXT + "- theirs\n" and app.screen.mine == TEXT + "- mine\n"
        assert app.state.save_state.last.header() == "conflict; version=2"
        await press(pilot, "e")  # keep editing
        assert isinstance(app.screen, MemoryScreen)
        assert (app.state.base_version, app.state.dirty) == (1, True)
        await press(pilot, "ctrl+s")  # the conflict comes back; nothing is overwritten silently
        assert isinstance(app.screen, ConflictScreen)
        await press(pilot, "o")  # explicitly save over the newer version
        assert (app.state.base_version, app.state.dirty) == (3, False)

    drive(app, script)
    assert stage.other.load().text == TEXT + "- mine\n"


def test_save_conflict_discard_takes_the_newer_version(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- mine\n")
        stage.other.save(TEXT + "- theirs\n", 1)
        await press(pilot, "ctrl+s")
        await press(pilot, "d")  # one key cannot lose a draft: it asks first
        assert isinstance(app.screen, ConfirmAction) and app.state.dirty
        await press(pilot, "escape")  # back: nothing is lost
        assert isinstance(app.screen, ConflictScreen) and app.state.dirty
        await press(pilot, "d", "y")
        assert (app.state.base_version, app.state.dirty) == (2, False)
        assert main_screen(pilot).editor.text == TEXT + "- theirs\n"

    drive(app, script)
    assert stage.other.load().version == 2


# --- leaving with unsaved changes -------------------------------------------------------------------


def test_quit_asks_save_discard_cancel(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- unsaved\n")
        await press(pilot, "ctrl+q")
        assert isinstance(app.screen, SaveDiscardCancel)
        await press(pilot, "escape")  # cancel: stay, draft intact
        assert app.is_running and app.state.dirty
        await press(pilot, "ctrl+q")
        await press(pilot, "s")  # save, then leave

    drive(app, script)
    assert app.return_code == 0
    assert stage.other.load().text == TEXT + "- unsaved\n"


def test_quit_discarding_writes_nothing(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- unsaved\n")
        await press(pilot, "ctrl+q")
        await press(pilot, "d")

    drive(app, script)
    assert app.return_code == 0 and stage.other.load().version == 1


def test_quit_waits_for_an_in_flight_save_before_deciding(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    gate = Gate(stage.frame)
    app = stage.app(gate)

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- saving\n")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert gate.entered.wait(5) and app.state.in_flight
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert app.is_running and not isinstance(app.screen, SaveDiscardCancel)  # waiting, not asking
        gate.release()
        await settle(pilot)
        await pilot.pause()

    drive(app, script)
    # The save landed, the draft was clean by then, so Quit needed no question.
    assert app.return_code == 0 and stage.other.load().text == TEXT + "- saving\n"


def test_typing_goes_on_during_an_in_flight_save(stage: Stage) -> None:
    """The UI never waits on I/O: the save acknowledges what it sent; later typing stays unsaved."""
    stage.other.save(TEXT, 0)
    gate = Gate(stage.frame)
    app = stage.app(gate)

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- sent\n")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert gate.entered.wait(5)
        await append(pilot, "- typed meanwhile\n")  # the backend call is still blocked
        assert app.state.writing is not None
        gate.release()
        await settle(pilot)
        assert (app.state.base_version, app.state.server_text) == (2, TEXT + "- sent\n")
        assert app.state.dirty and app.state.draft.endswith("- typed meanwhile\n")

    drive(app, script)


def test_reload_with_unsaved_changes_asks_first(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- unsaved\n")
        stage.other.save("newer\n", 1)
        await press(pilot, "ctrl+r")
        assert isinstance(app.screen, SaveDiscardCancel)
        await press(pilot, "d")
        assert (app.state.base_version, app.state.draft, app.state.dirty) == (2, "newer\n", False)

    drive(app, script)


# --- Clear ------------------------------------------------------------------------------------------


async def confirm_clear(pilot: Pilot[Any]) -> None:
    await press(pilot, "ctrl+l")
    assert isinstance(pilot.app.screen, ConfirmClear)
    await press(pilot, "ctrl+l")  # Cancel has the focus; ctrl+l (Clear) again confirms


def test_clear_empties_memory_and_advances_the_generation(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await confirm_clear(pilot)
        assert (app.state.base_version, app.state.draft, app.state.dirty) == (2, "", False)
        assert main_screen(pilot).editor.text == ""
        assert "conversation history is not deleted" in app.state.message

    drive(app, script)
    assert stage.other.load().text == "" and stage.other.get_policy().clear_generation == 1


def test_clear_cancelled_writes_nothing(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "ctrl+l")
        await press(pilot, "enter")  # Cancel has the focus
        assert app.state.base_version == 1 and "nothing was written" in app.state.message

    drive(app, script)
    assert stage.other.load().version == 1 and stage.other.get_policy().clear_generation == 0


def test_clear_resolves_an_unsaved_draft_first(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- draft\n")
        await press(pilot, "ctrl+l")
        assert isinstance(app.screen, SaveDiscardCancel)
        await press(pilot, "s")  # save the draft first (version 2), then confirm the Clear
        assert isinstance(app.screen, ConfirmClear) and app.state.base_version == 2
        await press(pilot, "y")
        assert app.state.base_version == 3

    drive(app, script)
    ops = [r.operation for r in stage.other.history()]
    assert ops == [Operation.CLEAR, Operation.SAVE, Operation.SAVE]


def test_clear_that_loses_the_race_writes_nothing_and_offers_retry(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        stage.other.save(TEXT + "- newer\n", 1)
        await confirm_clear(pilot)
        assert isinstance(app.screen, ClearConflict)
        # Nothing was written and the generation did not move; the newer text is shown.
        assert stage.other.load().version == 2 and stage.other.get_policy().clear_generation == 0
        assert (app.state.base_version, app.state.draft) == (2, TEXT + "- newer\n")
        assert main_screen(pilot).editor.text == TEXT + "- newer\n"
        await press(pilot, "escape")  # keep the newer text: still nothing written
        assert stage.other.load().version == 2 and "nothing was cleared" in app.state.message

    drive(app, script)
    assert stage.other.get_policy().clear_generation == 0


def test_retry_clear_is_explicit_and_against_the_newer_version(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        stage.other.save(TEXT + "- newer\n", 1)
        await confirm_clear(pilot)
        assert isinstance(app.screen, ClearConflict)
        await press(pilot, "ctrl+l")  # Retry Clear: ctrl+l means Clear everywhere
        assert (app.state.base_version, app.state.draft) == (3, "")

    drive(app, script)
    assert stage.other.load().text == "" and stage.other.get_policy().clear_generation == 1


# --- Changes and Undo -------------------------------------------------------------------------------


def test_undo_after_clear_restores_text_without_rewinding_the_generation(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    stage.other.clear(1)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        assert app.state.base_version == 2 and app.state.draft == ""
        await open_changes(pilot, 1)  # revision 1
        await press(pilot, "u")
        assert isinstance(app.screen, MemoryScreen)
        assert (app.state.base_version, app.state.draft, app.state.dirty) == (3, TEXT, False)
        assert main_screen(pilot).editor.text == TEXT

    drive(app, script)
    head = stage.other.history(limit=1)[0]
    assert (head.operation, head.restored_from) == (Operation.UNDO, 1)
    assert stage.other.get_policy().clear_generation == 1


def test_undo_conflict_is_handled_like_save(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    stage.other.save("two\n", 1)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await open_changes(pilot, 1)
        stage.other.save("three\n", 2)
        await press(pilot, "u")
        assert isinstance(app.screen, ConflictScreen) and app.screen.revision == 1
        assert stage.other.load().text == "three\n"
        await press(pilot, "o")  # explicitly restore over the newer version
        assert (app.state.base_version, app.state.draft) == (4, TEXT)

    drive(app, script)
    assert stage.other.load().text == TEXT


def test_undo_with_unsaved_draft_asks_first(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    stage.other.save("two\n", 1)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "draft\n")
        await open_changes(pilot, 1)
        await press(pilot, "u")
        assert isinstance(app.screen, SaveDiscardCancel)
        await press(pilot, "escape")
        assert app.state.dirty and app.state.base_version == 2

    drive(app, script)
    assert stage.other.load().version == 2


def test_changes_load_page_by_page_and_diff(stage: Stage) -> None:
    for version in range(120):
        stage.other.save(f"line {version}\n", version)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_changes(pilot, 0)
        assert len(screen.rows) == 50 and not screen.complete
        diff = str(screen.query_one("#diff", Static).content)
        assert "-line 118" in diff and "+line 119" in diff
        await press(pilot, "ctrl+end")  # the cursor nears the end: the next page arrives
        assert len(screen.rows) == 100
        await press(pilot, "ctrl+end")
        assert len(screen.rows) == 120 and screen.complete
        await press(pilot, "c")  # compare the highlighted revision (21) with the current text
        diff = str(screen.query_one("#diff", Static).content)
        assert "revision 21" in diff and "-line 20" in diff and "+line 119" in diff
        await press(pilot, "escape")
        assert isinstance(app.screen, MemoryScreen)

    drive(app, script)


def test_walking_the_revisions_keeps_a_few_screens_of_rendered_lines(stage: Stage) -> None:
    """Every cursor move renders the visible lines afresh; the stale renders are dropped, not kept by the 1,000."""
    for version in range(60):
        stage.other.save(f"line {version}\n", version)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_changes(pilot, 40)
        table = screen.query_one(RevisionTable)
        bound = max(LINES_CACHED, 4 * table.size.height)
        assert table.cursor_row == 40
        assert 0 < len(table._line_cache) <= bound and len(table._row_render_cache) <= bound

    drive(app, script)


# --- mode ---------------------------------------------------------------------------------------------


def test_mode_switch_is_a_compare_and_set(stage: Stage) -> None:
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "ctrl+o")
        assert isinstance(app.screen, ModeSwitcher)
        await press(pilot, "down", "enter")  # Read only → Auto
        assert isinstance(app.screen, MemoryScreen)
        assert app.state.policy is not None and app.state.policy.mode is Mode.AUTO

    drive(app, script)
    policy = stage.other.get_policy()
    assert (policy.mode, policy.revision) == (Mode.AUTO, 1)


def test_mode_conflict_changes_nothing_and_shows_the_current_mode(stage: Stage) -> None:
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        stage.other.set_policy(Mode.AUTO, 0)
        await press(pilot, "ctrl+o")
        await press(pilot, "up", "enter")  # Off, against the stale revision 0
        screen = app.screen
        assert isinstance(screen, ModeSwitcher)
        assert screen.policy.mode is Mode.AUTO and screen.policy.revision == 1
        assert "changed the mode first" in str(screen.query_one("#mode-message").render())
        assert stage.other.get_policy().mode is Mode.AUTO
        await press(pilot, "escape")
        assert app.state.policy is not None and app.state.policy.mode is Mode.AUTO

    drive(app, script)
    assert stage.other.get_policy().revision == 1


# --- the rest of the surface -----------------------------------------------------------------------


def test_preview_renders_the_draft(stage: Stage) -> None:
    stage.other.save("# Heading\n\nbody\n", 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "ctrl+t")
        markdown = main_screen(pilot).query_one(Markdown)
        assert markdown.is_on_screen and markdown.source == "# Heading\n\nbody\n"
        await press(pilot, "ctrl+t")
        assert main_screen(pilot).editor.area.has_focus

    drive(app, script)


def test_oversized_draft_warns_and_still_saves_intact(stage: Stage) -> None:
    big = "x" * 9000 + "\n"
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, big)
        warning = main_screen(pilot).query_one("#size-warning")
        assert app.state.oversized and warning.display
        assert "not given to the Assistant" in str(warning.render())
        await press(pilot, "ctrl+s")
        assert app.state.base_version == 0  # asked first: it would be kept, and withheld from recall
        await press(pilot, "y")  # Save anyway
        assert app.state.base_version == 1

    drive(app, script)
    assert stage.other.load().text == big


def test_every_binding_has_an_id_and_a_palette_command(stage: Stage) -> None:
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = main_screen(pilot)
        names = {command.title for command in app.get_system_commands(screen)}
        assert {"Save", "Preview", "Mode", "Changes", "Clear", "Reload", "Quit"} <= names
        for active in screen.active_bindings.values():
            if active.binding.show:
                assert (active.binding.id or "").startswith("memframe."), active.binding

    drive(app, script)


def test_a_deleted_document_is_restored_only_by_an_explicit_choice(stage: Stage, tui_service: Any) -> None:
    from memframe.core.types import MEMORY_PATH
    from memframe.service.accounts import LOCAL_USER

    stage.other.save(TEXT, 0)
    tui_service.delete_file(LOCAL_USER, "default", MEMORY_PATH, 1)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        assert app.state.deleted and app.state.base_version == 2
        await append(pilot, "- back\n")
        await press(pilot, "ctrl+s")  # a plain save does not revive a deleted document
        assert isinstance(app.screen, ConflictScreen) and app.screen.server.deleted
        assert stage.other.load().deleted
        await press(pilot, "o")  # the explicit choice restores it
        assert (app.state.base_version, app.state.deleted, app.state.dirty) == (3, False, False)

    drive(app, script)
    assert stage.other.load().text == "- back\n"


# --- issue 21: a draft the server will not take ------------------------------------------------------


def test_quit_with_a_draft_the_server_refuses_offers_a_file(stage: Stage, memframe_home: Any) -> None:
    """Revoked token: Save fails, the dialog asks again with "Write to a file", and the draft lands in
    drafts/<workspace>-<time>.md, mode 0600, before the frame quits."""
    import stat

    stage.other.save(TEXT, 0)
    stage.frame = Refusing(stage.frame._backend)
    app = stage.app()
    farewells: list[str | None] = []
    exit_app = app.exit

    def exit_saying(*args: Any, message: str | None = None, **kwargs: Any) -> None:
        farewells.append(message)
        exit_app(*args, **kwargs)

    app.exit = exit_saying  # type: ignore[method-assign]

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- my unsaveable line\n")
        stage.frame.down = True
        await press(pilot, "ctrl+q")
        dialog = app.screen
        assert isinstance(dialog, SaveDiscardCancel) and not dialog.offer_file  # nothing has failed yet
        await press(pilot, "w")  # not offered yet: does nothing
        assert app.screen is dialog
        await press(pilot, "s")  # Save: refused (revoked token)
        again = app.screen
        assert isinstance(again, SaveDiscardCancel) and again.offer_file and app.is_running
        await press(pilot, "w")

    drive(app, script)
    assert app.return_code == 0
    [written] = sorted((memframe_home / "drafts").iterdir())
    assert f"Your draft is in {written}" in (farewells[0] or "")  # printed once the terminal is back
    assert written.name == "default-20261223-042640.md"
    assert written.read_text(encoding="utf-8") == TEXT + "- my unsaveable line\n"
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert stage.other.load().version == 1


def test_a_failed_save_says_f4_writes_the_draft_to_a_file(stage: Stage, memframe_home: Any) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- offline edit\n")
        stage.frame.down = True
        await press(pilot, "ctrl+s")
        assert "f5 writes it to a file" in app.state.message and app.state.save_failed
        await press(pilot, "f5")
        [written] = list((memframe_home / "drafts").iterdir())
        assert f"Your draft is in {written} (mode 0600" in app.state.message
        assert app.state.dirty  # the editor keeps the draft; the file is a copy
        await press(pilot, "f5")  # a second copy never overwrites the first
        assert len(list((memframe_home / "drafts").iterdir())) == 2
        stage.frame.down = False
        await press(pilot, "ctrl+s")
        assert (app.state.base_version, app.state.save_failed) == (2, False)

    drive(app, script)


# --- issue 21: changes made elsewhere, seen without a key press ---------------------------------------


async def poll(pilot: Pilot[Any]) -> None:
    """One tick of the head poll (the timer calls the same method every few seconds)."""
    main_screen(pilot).poll_head()
    await settle(pilot)


def status_text(pilot: Pilot[Any]) -> str:
    from memframe.tui.widgets.status import StatusBar

    return str(main_screen(pilot).query_one(StatusBar).content)


def test_a_clean_editor_takes_a_version_saved_elsewhere(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await poll(pilot)  # nothing changed: nothing said
        assert app.state.base_version == 1 and app.state.message == ""
        stage.other.save(TEXT + "- from elsewhere\n", 1)
        await poll(pilot)
        assert (app.state.base_version, app.state.dirty) == (2, False)
        assert main_screen(pilot).editor.text == TEXT + "- from elsewhere\n"
        assert "Version 2 was saved elsewhere; the editor shows it" in app.state.message
        stage.other.clear(2)
        await poll(pilot)
        assert (app.state.base_version, main_screen(pilot).editor.text) == (3, "")
        assert "Version 3 was cleared elsewhere" in app.state.message

    drive(app, script)


def test_at_80_columns_the_newer_version_warning_is_never_split_across_lines(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- my draft\n")
        stage.other.save(TEXT + "- from elsewhere\n", 1)
        await poll(pilot)
        lines = status_text(pilot).splitlines()
        assert any(line.endswith("⚠ version 2 is newer") for line in lines), lines
        assert all(len(line) <= 80 for line in lines), lines

    drive(app, script, size=(80, 24))


def test_a_version_saved_elsewhere_never_replaces_a_draft(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- my draft\n")
        stage.other.save(TEXT + "- from elsewhere\n", 1)
        await poll(pilot)
        assert app.state.draft == TEXT + "- my draft\n" and app.state.base_version == 1
        assert app.state.newer_version == 2 and "⚠ version 2 is newer" in status_text(pilot)
        assert app.state.message.startswith("Version 2 was saved elsewhere; your draft is based on version 1.")
        app.state.say("")
        await poll(pilot)  # the same newer version is not said again on every tick
        assert app.state.message == ""
        await press(pilot, "ctrl+s")  # the usual conflict view, nothing written behind the person's back
        assert isinstance(app.screen, ConflictScreen)

    drive(app, script)
    assert stage.other.load().text == TEXT + "- from elsewhere\n"


def test_a_mode_changed_elsewhere_shows_in_the_status_bar(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        assert "Read only" in status_text(pilot)
        stage.other.set_policy(Mode.AUTO, 0)
        await poll(pilot)
        assert app.state.mode is Mode.AUTO and "Auto" in status_text(pilot)
        assert app.state.message.startswith("The mode was changed elsewhere: now Auto (policy revision 1).")

    drive(app, script)


def test_the_poll_says_offline_once_and_when_it_is_back(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        stage.frame.down = True
        await poll(pilot)
        first = app.state.message
        assert first.startswith("Cannot check the server for changes made elsewhere:") and app.state.message_is_error
        app.state.say("something else", error=False)
        await poll(pilot)
        await poll(pilot)
        assert app.state.message == "something else"  # one line, not one per tick
        stage.frame.down = False
        app.state.say(first, error=True)
        await poll(pilot)
        assert app.state.message == "In touch with the server again." and not app.state.message_is_error

    drive(app, script)


def test_the_poll_runs_on_a_timer_only_when_asked_and_stops_with_the_frame(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    polled = stage.app(poll_seconds=3)
    timers: list[Any] = []

    async def script(pilot: Pilot[Any]) -> None:
        timer = main_screen(pilot).poll_timer
        assert timer is not None and timer._interval == 3
        timers.append(timer)

    drive(polled, script)
    assert timers[0]._task is None or timers[0]._task.done()  # stopped when the frame exited
    quiet = stage.app()

    async def none(pilot: Pilot[Any]) -> None:
        assert main_screen(pilot).poll_timer is None

    drive(quiet, none)


def test_quit_while_the_poll_cannot_reach_the_server_offers_the_file_at_once(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- draft\n")
        stage.frame.down = True
        await poll(pilot)
        await press(pilot, "ctrl+q")
        dialog = app.screen
        assert isinstance(dialog, SaveDiscardCancel) and dialog.offer_file
        await press(pilot, "escape")
        assert app.is_running and app.state.dirty

    drive(app, script)
