"""The main screen's flows for the Assistant's changes: apply a proposal, catch up with a committed one.

They run in the main screen's flow queue like Save and Undo (after any write
in progress, one at a time) and use its write plumbing, so applying a
proposal is exactly a human Save: the draft is settled first through Save /
Discard / Cancel, the acknowledged version moves `DocumentState`, and a newer
version on the server opens the usual conflict view, where nothing is written
until the person chooses. Kept apart from `memory.py` only to keep it small.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memframe.core.edits import apply_memory_changes
from memframe.core.errors import EditRefused, MemframeError
from memframe.core.turns import Proposal
from memframe.tui.dialogs import ConflictScreen
from memframe.tui.state import TARGET_GONE, WriteRequest, target_changed

if TYPE_CHECKING:
    from memframe.tui.memory import MemoryScreen


def applied(text: str, proposal: Proposal) -> str | None:
    """The proposal's result on `text`, or None when it does not apply (the backend then says why)."""
    try:
        return apply_memory_changes(text, list(proposal.changes))
    except MemframeError:
        return None


async def apply_flow(screen: MemoryScreen, proposal: Proposal) -> None:
    """Apply `proposal` as the person's own Save against the base version, after settling the draft."""
    state = screen.state
    if not state.loaded:
        screen.say("The memory is not loaded, so there is no version to apply to: press ctrl+r.", error=True)
        return
    if not await screen.resolve_draft(f"before applying proposal {proposal.id}"):
        return
    result = applied(state.server_text, proposal)
    outcome = await screen.write(WriteRequest.apply(proposal, result or "", state.base_version))
    while outcome.conflict and outcome.server is not None:
        server = outcome.server
        if server.deleted:
            screen.take(server, f"Not applied: the memory was deleted (version {server.version}); save it first.")
            return
        try:
            result = apply_memory_changes(server.text, list(proposal.changes))
        except EditRefused as exc:
            why = target_changed(proposal, server.version, exc) if exc.details.get("reason") in TARGET_GONE else exc
            screen.take(server, f"Not applied — conflict: {why}. Memory was not changed.", error=True)
            return
        dialog = ConflictScreen(server, result, server.version, now=screen.clock(), proposal=proposal.id)
        choice = await screen.app.push_screen_wait(dialog)
        if choice == "discard":
            screen.take(server, f"Kept version {server.version}; proposal {proposal.id} is still pending.")
            return
        if choice == "edit":
            screen.take(server, f"Proposal {proposal.id} applied to version {server.version} is your draft: "
                                "ctrl+s saves it. The proposal stays pending until you dismiss it.")  # fmt: skip
            screen.editor.load(result)
            return
        outcome = await screen.write(WriteRequest.apply(proposal, result, server.version))


async def catch_up_flow(screen: MemoryScreen, version: int) -> None:
    """The Assistant committed `version`: show it in the editor, unless that would touch an unsaved draft."""
    screen.sync_draft()
    state = screen.state
    if state.base_version >= version:
        return
    if state.dirty:
        screen.say(f"The Assistant saved version {version}; your draft is based on version "
                   f"{state.base_version}. Save to review both, or discard and reload.")  # fmt: skip
        return
    outcome = await screen.read_memory()
    if outcome.doc is not None:
        screen.say(f"The Assistant remembered something: showing version {outcome.doc.version}.")
