"""Forgetting from Changes: `f` on a revision and `k` for the key ask first, run on a worker, show the receipt."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Static, Switch

from memframe import sealing
from memframe.backend.local import LocalBackend
from memframe.core.errors import KeyRotated, Unavailable
from memframe.sealing import keyfiles
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from memframe.tui.dialogs.forget import ForgetDialog
from memframe.tui.screens.changes import ChangesScreen
from tests.conftest import FakeClock, World
from tests.tui.conftest import WORKSPACE, drive
from tests.tui.scenarios import Outage, Stage, append, as_user, main_screen, open_changes, press, settle, wait_until

PASSPHRASE = "correct horse battery"


@pytest.fixture
def keyed(tui_service: MemoryService, clock: FakeClock) -> Stage:
    """Five saved versions, a proposal and its transcript; the frame's key in this machine's key file."""
    key = sealing.new_key()
    keyfiles.write_key(key, WORKSPACE)
    other = LocalBackend(tui_service, WORKSPACE, key)
    for version in range(5):
        other.save(f"- line {version}\n", version)
    other.set_ai(True)
    other.send("c-1", "remember: - Ben prefers tea.")  # Read only: a proposal
    return Stage(Outage(LocalBackend(tui_service, WORKSPACE, key)), other, clock)


def dialog_of(pilot: Pilot[Any]) -> ForgetDialog:
    screen = pilot.app.screen
    assert isinstance(screen, ForgetDialog)
    return screen


def words(pilot: Pilot[Any]) -> str:
    return str(dialog_of(pilot).query_one("#forget-what", Static).content)


async def open_forget(pilot: Pilot[Any], row: int) -> ForgetDialog:
    """Changes, `row` Downs (0 is the newest revision), then `f`, with what goes read."""
    await open_changes(pilot, row)
    await press(pilot, "f")
    await settle(pilot)
    dialog = dialog_of(pilot)
    assert dialog.phase == "asking"
    return dialog


async def confirm(pilot: Pilot[Any]) -> ForgetDialog:
    dialog = dialog_of(pilot)
    with as_user("ada"):
        await press(pilot, "y")
        await wait_until(pilot, lambda: dialog.phase != "running", "the rotation's outcome")
    await settle(pilot)
    return dialog


def test_confirm_forgets_shows_the_receipt_and_changes_starts_at_n(keyed: Stage, memframe_home: Any) -> None:
    old = keyfiles.load_key(WORKSPACE)
    app = keyed.app()

    async def script(pilot: Pilot[Any]) -> None:
        await open_forget(pilot, 2)  # revision 3
        assert "Versions 1–2 of the memory are destroyed (2 versions); versions 3–5 stay" in words(pilot)
        assert "(2 transcript messages and 1 proposal) stay, re-sealed" in words(pilot)
        dialog_of(pilot).query_one("#conversations", Switch).value = True
        await pilot.pause()
        assert "(2 transcript messages and 1 proposal) are destroyed too" in words(pilot)
        dialog = await confirm(pilot)
        assert dialog.phase == "done"
        receipt = words(pilot)
        kept = sorted((memframe_home / "receipts" / "local").iterdir())
        assert len(kept) == 1 and kept[0].read_text() == receipt  # the CLI's receipt, kept where the CLI keeps it
        assert "versions 1–2 of .zudotext/memory/MEMORY.md (2)" in receipt
        assert "2 transcript messages and 1 proposal" in receipt and ", ada (on this machine)" in receipt
        assert str(kept[0]) in str(dialog.query_one("#forget-title", Static).content)
        shown = [key.description for key in dialog.query("FooterKey") if key.display]
        assert "Cancel" in shown and "Yes, go ahead" not in shown  # nothing is left to go ahead with
        await press(pilot, "escape")
        await settle(pilot)
        changes = pilot.app.screen
        assert isinstance(changes, ChangesScreen) and sorted(changes.rows) == [3, 4, 5]
        title = str(changes.query_one("#changes-title", Static).content)
        assert "Changes — 3 revisions · versions 1–2 were forgotten on 2026-12-23 by ada" in title
        state = main_screen(pilot).state
        assert (state.base_version, state.draft, state.rotating) == (5, "- line 4\n", False)

    drive(app, script)
    new = keyfiles.load_key(WORKSPACE)
    assert new != old and not keyfiles.pending_key_file(WORKSPACE).exists()
    assert LocalBackend(keyed.other.store.service, WORKSPACE, new).load().text == "- line 4\n"  # type: ignore[attr-defined]
    with pytest.raises(KeyRotated, match="was rotated"):
        keyed.other.load()


def test_cancel_changes_nothing(keyed: Stage) -> None:
    old = keyfiles.load_key(WORKSPACE)
    app = keyed.app()

    async def script(pilot: Pilot[Any]) -> None:
        await open_forget(pilot, 2)
        await press(pilot, "escape")
        changes = pilot.app.screen
        assert isinstance(changes, ChangesScreen) and sorted(changes.rows) == [1, 2, 3, 4, 5]

    drive(app, script)
    assert keyfiles.load_key(WORKSPACE) == old and not keyfiles.pending_key_file(WORKSPACE).exists()
    assert keyed.other.forgotten_line() is None and keyed.other.load().version == 5


def test_a_save_that_wins_the_race_is_a_conflict_and_nothing_changes(
    keyed: Stage, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = keyfiles.load_key(WORKSPACE)
    store = keyed.frame._backend.store  # type: ignore[attr-defined]
    swap = store.rotate_key

    def racing(plan: Any) -> Any:
        keyed.other.save("- written elsewhere meanwhile\n", 5)
        return swap(plan)

    monkeypatch.setattr(store, "rotate_key", racing)
    app = keyed.app()

    async def script(pilot: Pilot[Any]) -> None:
        await open_forget(pilot, 2)
        dialog = await confirm(pilot)
        assert dialog.phase == "asking"  # what goes is read again: a retry is explicit, and named afresh
        note = str(dialog.query_one("#forget-note", Static).content)
        assert "The workspace changed while its key was being rotated" in note and "nothing was changed" in note
        assert "versions 3–6 stay" in words(pilot)
        await press(pilot, "escape")
        await settle(pilot)
        changes = pilot.app.screen
        assert isinstance(changes, ChangesScreen) and sorted(changes.rows) == [1, 2, 3, 4, 5, 6]
        assert main_screen(pilot).state.rotating is False

    drive(app, script)
    assert keyfiles.load_key(WORKSPACE) == old and not keyfiles.pending_key_file(WORKSPACE).exists()
    assert keyed.other.load().text == "- written elsewhere meanwhile\n" and keyed.other.forgotten_line() is None


def test_an_unsaved_draft_is_settled_first(keyed: Stage) -> None:
    old = keyfiles.load_key(WORKSPACE)
    app = keyed.app()

    async def script(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await append(pilot, "- not saved yet\n")
        await open_changes(pilot, 2)
        await press(pilot, "f")
        await settle(pilot)
        assert isinstance(pilot.app.screen, ChangesScreen)  # no dialog
        assert any("is not saved: save or discard it first" in n.message for n in pilot.app._notifications)
        assert main_screen(pilot).state.draft.endswith("- not saved yet\n")

    drive(app, script)
    assert keyfiles.load_key(WORKSPACE) == old


def test_while_it_runs_the_frame_answers_and_a_second_press_is_refused(
    keyed: Stage, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = keyed.frame._backend.store  # type: ignore[attr-defined]
    swap = store.rotate_key
    entered, release = threading.Event(), threading.Event()
    swaps: list[Any] = []

    def held(plan: Any) -> Any:
        swaps.append(plan)
        entered.set()
        assert release.wait(10), "the test never released the rotation"
        return swap(plan)

    monkeypatch.setattr(store, "rotate_key", held)
    app = keyed.app()

    async def script(pilot: Pilot[Any]) -> None:
        dialog = await open_forget(pilot, 2)
        await pilot.press("y")
        await wait_until(pilot, entered.is_set, "the rotation to reach the server")
        assert dialog.phase == "running" and main_screen(pilot).state.rotating
        await pilot.press("y", "escape", "ctrl+q")  # a second press, a cancel and a quit: each refused
        await pilot.pause()
        assert pilot.app.screen is dialog and dialog.phase == "running"
        said = [n.message for n in pilot.app._notifications]
        assert any("The rotation is running" in m for m in said)
        assert any("cannot be stopped halfway" in m for m in said)
        assert any("quit once its receipt is shown" in m for m in said)
        release.set()
        await wait_until(pilot, lambda: dialog.phase == "done", "the receipt")
        assert "memframe forgetting receipt" in words(pilot)

    drive(app, script)
    assert len(swaps) == 1


def test_a_wrapped_key_file_asks_for_its_passphrase_masked(keyed: Stage) -> None:
    old = keyfiles.load_key(WORKSPACE)
    keyfiles.write_key(old, WORKSPACE, passphrase=PASSPHRASE, overwrite=True)
    app = keyed.app()

    async def script(pilot: Pilot[Any]) -> None:
        dialog = await open_forget(pilot, 2)
        box = dialog.query_one("#passphrase", Input)
        assert box.display and box.password
        await press(pilot, "y")
        assert dialog.phase == "asking" and "Type the key file's passphrase first" in str(
            dialog.query_one("#forget-note", Static).content
        )
        box.value = "not the passphrase"
        await press(pilot, "y")  # typed into the focused passphrase, not a confirm
        assert box.value.endswith("y") and dialog.phase == "asking"
        await press(pilot, "enter")  # enter leaves the passphrase for the button; it confirms nothing
        assert dialog.phase == "asking" and pilot.app.focused is dialog.query_one("#go")
        dialog = await confirm(pilot)
        assert dialog.phase == "asking" and "Wrong passphrase" in str(dialog.query_one("#forget-note", Static).content)
        box.value = PASSPHRASE
        await pilot.pause()
        assert PASSPHRASE not in pilot.app.export_screenshot()  # never echoed
        dialog.query_one("#go").focus()
        dialog = await confirm(pilot)
        assert dialog.phase == "done" and box.value == ""

    drive(app, script)
    assert keyfiles.key_is_wrapped(WORKSPACE)
    assert keyfiles.load_key(WORKSPACE, prompt=lambda _q: PASSPHRASE) != old


def test_k_rotates_the_key_with_its_own_confirm(keyed: Stage) -> None:
    old = keyfiles.load_key(WORKSPACE)
    app = keyed.app()

    async def script(pilot: Pilot[Any]) -> None:
        await open_changes(pilot)
        await press(pilot, "k")
        await settle(pilot)
        dialog = dialog_of(pilot)
        assert "Rotate the key of workspace default?" in str(dialog.query_one("#forget-title", Static).content)
        assert not dialog.query_one("#forget-switch").display
        assert "Nothing is destroyed but the old key: versions 1–5 of the memory and 2 transcript" in words(pilot)
        await confirm(pilot)
        assert "nothing but the old key: every text was re-sealed" in words(pilot)
        await press(pilot, "escape")
        await settle(pilot)
        changes = pilot.app.screen
        assert isinstance(changes, ChangesScreen) and sorted(changes.rows) == [1, 2, 3, 4, 5]

    drive(app, script)
    assert keyfiles.load_key(WORKSPACE) != old


def test_a_revision_that_forgets_nothing_says_so(keyed: Stage) -> None:
    app = keyed.app()

    async def script(pilot: Pilot[Any]) -> None:
        await open_changes(pilot, 4)  # revision 1
        await press(pilot, "f")
        await settle(pilot)
        dialog = dialog_of(pilot)
        assert dialog.phase == "done" and "Versions before 1 cannot be forgotten" in words(pilot)
        await press(pilot, "escape")
        assert isinstance(pilot.app.screen, ChangesScreen)

    drive(app, script)
    assert keyed.other.forgotten_line() is None


@pytest.mark.server
def test_forget_over_http_keeps_the_key_and_receipt_under_the_servers_scope(
    service: MemoryService, clock: FakeClock, memframe_home: Any
) -> None:
    """Against a server the key file is filed under the server's identity: the frame finds it there."""
    remote_kinds = pytest.importorskip("tests.support.remote_kinds")
    from memframe import paths

    key = sealing.new_key()
    world = World(kind="remote-uvicorn", service=service, workspace_id="ws", key=key, user=LOCAL_USER,
                  make=remote_kinds.REMOTE_MAKERS["remote-uvicorn"])  # fmt: skip
    try:
        frame, other = world.client(), world.client()
        keyfiles.write_key(key, "ws", remote_url=frame.location)
        for version in range(4):
            other.save(f"- line {version}\n", version)
        other.prove_key()  # the owner writes the key check, as `memframe init` does locally
        app = Stage(Outage(frame), other, clock).app()

        async def script(pilot: Pilot[Any]) -> None:
            await open_forget(pilot, 1)  # revision 3
            assert "Versions 1–2 of the memory are destroyed" in words(pilot)
            dialog = await confirm(pilot)
            assert dialog.phase == "done", dialog.query_one("#forget-note", Static).content
            await press(pilot, "escape")
            await settle(pilot)
            changes = pilot.app.screen
            assert isinstance(changes, ChangesScreen) and sorted(changes.rows) == [3, 4]

        drive(app, script)
        scope = paths.key_scope(frame.location)
        assert keyfiles.load_key("ws", remote_url=frame.location) != key
        assert len(list((memframe_home / "receipts" / scope).iterdir())) == 1
        with pytest.raises(KeyRotated):
            other.load()
    finally:
        world.close()


def test_a_rotation_a_crash_cut_short_is_finished_first(keyed: Stage) -> None:
    """The swap landed and the key file was never renamed: the frame makes the pending key the key."""
    old = keyfiles.load_key(WORKSPACE)
    new = sealing.new_key()
    keyfiles.write_pending_key(new, WORKSPACE, passphrase=None)
    keyed.other.rotate_key(new, who="ada")  # type: ignore[attr-defined]
    app = keyed.app()

    async def script(pilot: Pilot[Any]) -> None:
        await press(pilot, "ctrl+g", "k")
        await settle(pilot)
        dialog = dialog_of(pilot)
        assert dialog.phase == "done" and "An earlier rotation had landed" in str(
            dialog.query_one("#forget-title", Static).content
        )
        assert "Quit and open the frame again to use it" in words(pilot)
        await press(pilot, "escape")
        assert isinstance(pilot.app.screen, ChangesScreen)

    drive(app, script)
    assert keyfiles.load_key(WORKSPACE) == new != old and not keyfiles.pending_key_file(WORKSPACE).exists()


def test_a_reply_lost_after_the_swap_is_found_out_and_finished(keyed: Stage, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unreachable after the server swapped: the pending key is kept, and reading what goes again finds it landed."""
    store = keyed.frame._backend.store  # type: ignore[attr-defined]
    swap = store.rotate_key

    def lost_reply(plan: Any) -> Any:
        swap(plan)
        raise Unavailable("The memory service cannot be reached (offline).")

    monkeypatch.setattr(store, "rotate_key", lost_reply)
    old = keyfiles.load_key(WORKSPACE)
    app = keyed.app()

    async def script(pilot: Pilot[Any]) -> None:
        await open_forget(pilot, 2)
        dialog = await confirm(pilot)
        assert dialog.phase == "done" and "An earlier rotation had landed" in str(
            dialog.query_one("#forget-title", Static).content
        )

    drive(app, script)
    new = keyfiles.load_key(WORKSPACE)
    assert new != old and not keyfiles.pending_key_file(WORKSPACE).exists()
    assert LocalBackend(keyed.other.store.service, WORKSPACE, new).forgotten_line() is not None  # type: ignore[attr-defined]


def test_a_reply_lost_before_the_swap_keeps_the_key_and_says_why(keyed: Stage, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unreachable before the server took it: nothing changed; the note says the next try finds out."""
    store = keyed.frame._backend.store  # type: ignore[attr-defined]

    def unreachable(plan: Any) -> Any:
        raise Unavailable("The memory service cannot be reached (offline).")

    monkeypatch.setattr(store, "rotate_key", unreachable)
    old = keyfiles.load_key(WORKSPACE)
    app = keyed.app()

    async def script(pilot: Pilot[Any]) -> None:
        await open_forget(pilot, 2)
        dialog = await confirm(pilot)
        assert dialog.phase == "asking"  # the pending key the server never took was dropped on reading again
        assert "If the server took the rotation" in str(dialog.query_one("#forget-note", Static).content)

    drive(app, script)
    assert keyfiles.load_key(WORKSPACE) == old and not keyfiles.pending_key_file(WORKSPACE).exists()
    assert keyed.other.forgotten_line() is None
