"""Pilot tests for Proposals: Apply is a normal human Save; before a Clear it is refused; a changed target conflicts.

Proposals are made the real way — the scripted model calls remember_in_memory
while memory is Read only — and each test asserts what the backend then holds.
"""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.widgets import Static

from memframe.tui.dialogs import ConflictScreen, SaveDiscardCancel
from memframe.tui.dialogs.confirm import ConfirmAction
from memframe.tui.screens.proposals import ProposalsScreen
from tests.tui.conftest import drive
from tests.tui.scenarios import TEXT, Stage, append, main_screen, press


def propose(stage: Stage, message: str) -> str:
    """Have the Assistant propose a change (memory is Read only); returns the proposal id."""
    stage.other.set_ai(True)
    result = stage.other.send("c-test", message)
    [outcome] = result.outcomes
    assert outcome.kind == "proposed" and outcome.proposal_id is not None
    return outcome.proposal_id


async def open_proposals(pilot: Pilot[Any]) -> ProposalsScreen:
    await press(pilot, "f3")
    screen = pilot.app.screen
    assert isinstance(screen, ProposalsScreen)
    return screen


def said(screen: ProposalsScreen) -> str:
    return str(screen.query_one("#proposals-message", Static).content)


def pending(stage: Stage) -> list[str]:
    return [p.id for p in stage.other.proposals()]


def test_a_proposal_shows_its_diff_against_the_saved_text(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    proposal = propose(stage, "remember: - likes tea")
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_proposals(pilot)
        view = screen._highlighted()
        assert view is not None and view.proposal.id == proposal and view.state == "ready"
        assert view.result == TEXT + "- likes tea\n"
        diff = str(screen.query_one("#proposal-diff", Static).content)
        assert "+- likes tea" in diff and "--- version 1" in diff

    drive(app, script)


def test_apply_is_a_normal_save_and_the_editor_shows_it(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    proposal = propose(stage, "remember: - likes tea")
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_proposals(pilot)
        await press(pilot, "a")
        assert app.screen is screen
        assert f"Applied proposal {proposal}: the server acknowledged version 2" in said(screen)
        assert (app.state.base_version, app.state.dirty) == (2, False)
        assert app.state.save_state.last.header() == "saved; version=2"  # X-Memory-State, as for a Save
        assert main_screen(pilot).editor.text == TEXT + "- likes tea\n"
        assert screen.views == {}  # the list was read again: nothing pending

    drive(app, script)
    doc = stage.other.load()
    assert (doc.version, doc.text) == (2, TEXT + "- likes tea\n")
    assert doc.info is not None and doc.info.author.value == "person"
    assert pending(stage) == []


def test_a_proposal_made_before_a_clear_is_refused_with_the_reason(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    proposal = propose(stage, "remember: - likes tea")
    stage.other.clear(1)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_proposals(pilot)
        view = screen._highlighted()
        assert view is not None and view.made_before_clear and view.state == "before a Clear"
        await press(pilot, "a")
        assert "made before the memory was cleared, so it cannot be applied" in said(screen)
        assert app.state.base_version == 2

    drive(app, script)
    assert stage.other.load().version == 2 and stage.other.load().text == ""
    assert pending(stage) == [proposal]


def test_a_clear_after_the_list_was_read_is_refused_by_the_backend(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    proposal = propose(stage, "remember: - likes tea")
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_proposals(pilot)
        stage.other.clear(1)  # another window clears; this list still shows the proposal as ready
        await press(pilot, "a")
        assert isinstance(app.screen, ProposalsScreen)
        assert "Not applied: This proposal was made before the memory was cleared" in said(screen)
        assert app.state.message_is_error

    drive(app, script)
    assert stage.other.load().version == 2
    assert pending(stage) == [proposal]


def test_a_changed_target_line_shows_as_a_conflict(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    proposal = propose(stage, "forget: - Aiko prefers short answers.")
    stage.other.save("# Memory\n- Aiko prefers long answers.\n", 1)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_proposals(pilot)
        view = screen._highlighted()
        assert view is not None and view.state == "conflict" and view.result is None
        assert "is no longer in version 2" in str(screen.query_one("#proposal-diff", Static).content)
        await press(pilot, "a")
        assert "Not applied — conflict: the line this proposal changes" in said(screen)
        assert "is no longer in version 2" in said(screen)

    drive(app, script)
    assert stage.other.load().version == 2
    assert pending(stage) == [proposal]


def test_a_newer_version_opens_the_conflict_view_and_applies_only_when_asked(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    propose(stage, "remember: - likes tea")
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_proposals(pilot)
        stage.other.save(TEXT + "- from another window\n", 1)
        await press(pilot, "a")
        dialog = app.screen
        assert isinstance(dialog, ConflictScreen) and dialog.proposal is not None
        assert dialog.mine == TEXT + "- from another window\n- likes tea\n"  # applied to the newer text
        assert stage.other.load().version == 2  # nothing written yet
        await press(pilot, "o")
        assert app.screen is screen
        assert (app.state.base_version, app.state.dirty) == (3, False)

    drive(app, script)
    assert stage.other.load().text == TEXT + "- from another window\n- likes tea\n"
    assert pending(stage) == []


def test_keeping_the_newer_version_applies_nothing(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    proposal = propose(stage, "remember: - likes tea")
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await open_proposals(pilot)
        stage.other.save(TEXT + "- from another window\n", 1)
        await press(pilot, "a")
        assert isinstance(app.screen, ConflictScreen)
        await press(pilot, "d")  # keep version 2
        assert (app.state.base_version, app.state.draft) == (2, TEXT + "- from another window\n")

    drive(app, script)
    assert stage.other.load().version == 2
    assert pending(stage) == [proposal]


def test_an_unsaved_draft_is_settled_before_applying(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    proposal = propose(stage, "remember: - likes tea")
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        await append(pilot, "- my draft\n")
        screen = await open_proposals(pilot)
        await press(pilot, "a")
        assert isinstance(app.screen, SaveDiscardCancel)
        await press(pilot, "escape")  # cancel: nothing is applied, the draft stays
        assert app.screen is screen and app.state.dirty and stage.other.load().version == 1
        assert pending(stage) == [proposal]
        await press(pilot, "a")
        await press(pilot, "s")  # save the draft first, then apply on top of it
        assert (app.state.base_version, app.state.dirty) == (3, False)

    drive(app, script)
    assert stage.other.load().text == TEXT + "- my draft\n- likes tea\n"
    assert pending(stage) == []


def test_dismiss_drops_a_proposal_without_touching_memory(stage: Stage) -> None:
    stage.other.save(TEXT, 0)
    propose(stage, "remember: - likes tea")
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_proposals(pilot)
        await press(pilot, "x")  # a dismissed proposal cannot come back: it asks first
        assert isinstance(app.screen, ConfirmAction) and len(stage.other.proposals()) == 1
        await press(pilot, "escape")
        assert app.screen is screen and len(stage.other.proposals()) == 1
        await press(pilot, "x", "y")
        assert "Dismissed proposal" in said(screen) and screen.views == {}
        await press(pilot, "escape")
        assert app.screen is main_screen(pilot)

    drive(app, script)
    assert pending(stage) == [] and stage.other.load().version == 1


def test_an_apply_that_landed_but_could_not_be_marked_says_applied_as_version_n(stage: Stage) -> None:
    """The Save went through, marking the proposal applied did not (the server dropped): the frame moves
    to the new version and says so, so the next Save does not conflict with the person's own apply."""
    from memframe.core.errors import Unavailable

    stage.other.save(TEXT, 0)
    proposal = propose(stage, "remember: - likes tea")
    store = stage.frame._backend.store  # type: ignore[attr-defined]

    def dropped(proposal_id: str, status: str) -> None:
        raise Unavailable("The memory service cannot be reached (offline); nothing was changed.")

    store.resolve_proposal = dropped
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_proposals(pilot)
        await press(pilot, "a")
        words = said(screen)
        assert f"Proposal {proposal}: Applied as version 2; could not mark the proposal applied" in words
        assert "Not applied" not in words and "Nothing changed" not in words
        assert (app.state.base_version, app.state.dirty) == (2, False)
        assert app.state.save_state.last.header() == "saved; version=2"
        assert main_screen(pilot).editor.text == TEXT + "- likes tea\n"
        await pilot.press("escape")
        await append(pilot, "- and my own line\n")
        await press(pilot, "ctrl+s")
        assert (app.state.base_version, app.state.dirty) == (3, False)  # no conflict with its own apply

    drive(app, script)
    assert pending(stage) == [proposal]  # still pending on the server: the person may dismiss it
