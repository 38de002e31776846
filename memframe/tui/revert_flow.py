"""Revert one change (r in Changes) as a flow: the inverse of one version's edit, saved against the base.

Undo restores a whole revision and wipes what was written since; a revert keeps the later work, so it
is the person's own Save of the result (`core.revert`), computed on a worker thread. Where later edits
touched the same lines nothing is written and the conflict is shown; a newer version on the server
stops the revert and says so, since the result was computed against the older text.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from memframe.tui.flows import FlowHost, not_loaded, resolve_draft, take
from memframe.tui.state import WriteRequest


@dataclass(frozen=True)
class RevertRequest:
    """What Changes dismisses with when the person asks to revert `version`'s change."""

    version: int


async def revert(host: FlowHost, revision: int) -> None:
    """Undo only `revision`'s change on the base version's text, as a new version against it."""
    from memframe.tui.blame_calls import revert_on
    from memframe.tui.changes_calls import RevisionTexts

    state = host.state
    if not state.loaded:
        not_loaded(host, "revert in")
        return
    if not await resolve_draft(host, f"before reverting version {revision}"):
        return
    base, current = state.base_version, state.server_text
    outcome = await asyncio.to_thread(revert_on, RevisionTexts(host.backend), revision, current, base)
    reverted = outcome.reverted
    if outcome.error is not None or reverted is None:
        host.say(f"Not reverted: {outcome.error} Nothing was written.", error=True)
        return
    if reverted.text is None:
        from memframe.tui.dialogs.revert_conflict import RevertConflict

        if await host.ask(RevertConflict(outcome)) == "edit":
            state.edit(reverted.draft)
            host.show(reverted.draft)
            at = ", ".join(str(c.line) for c in reverted.conflicts)
            host.say(f"Your draft: version {revision}'s change undone where it could be. Later edits touched it "
                     f"at line {at}, left as is: edit there, then {state.key('save')} saves.")  # fmt: skip
        else:
            host.say(f"Not reverted: later edits touched the lines version {revision} changed. Nothing was written.")
        return
    if reverted.text == current:
        host.say(f"Version {revision} changed nothing that is still there; nothing was written.")
        return
    written = await host.write(WriteRequest.save(reverted.text, base))
    if written.ok and written.info is not None:
        state.edit(reverted.text)
        host.show(reverted.text)
        host.say(f"Reverted version {revision}'s change as version {written.info.version}.")
    elif written.conflict and written.server is not None:
        server = written.server
        take(host, server, f"Not reverted: version {server.version} was written first, and the revert was "
                           f"computed against version {base}. Nothing was written; showing version "
                           f"{server.version}. Revert again to undo it there.", error=True)  # fmt: skip
    else:
        host.say(f"Not reverted: {written.error} Nothing was written.", error=True)
