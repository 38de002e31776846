"""The flows that write, or replace what the editor shows: load, Save, Reload, Clear, Undo, Mode, Quit,
applying a proposal and catching up with the Assistant's committed change.

Each flow is an async function that reads top to bottom: it asks the person
through typed dialogs and awaits backend replies, both through its `FlowHost`
(the main screen). The host runs one flow at a time, so "wait for an in-flight
save before deciding" is the queue itself, and it runs every backend call on a
thread worker whose reply is applied to `DocumentState` before the flow wakes.

The flows know nothing of the screen but the `FlowHost` protocol, so no side
screen and no flow imports the main screen. Applying a proposal is exactly a
human Save: the draft is settled first through Save / Discard / Cancel, the
acknowledged version moves `DocumentState`, and a newer version on the server
opens the usual conflict view, where nothing is written until the person chooses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from memframe.core.types import MemoryDocument, utf8_size
from memframe.tui.state import DocumentState, WriteRequest, target_changed, target_gone

# The dialogs, the mode switcher and the edit logic load when a flow first needs them, not before the
# first paint (the first load is the only flow that runs before the person acts).
if TYPE_CHECKING:
    from textual.screen import Screen

    from memframe.backend.base import Backend
    from memframe.core.errors import MemframeError
    from memframe.core.turns import Proposal
    from memframe.core.types import MemoryHead
    from memframe.tui.calls import LoadOutcome
    from memframe.tui.state import WriteOutcome

T = TypeVar("T")


class FlowHost(Protocol):
    """What a flow needs of the screen that runs it, and nothing more."""

    #: The one document state the screens share.
    state: DocumentState
    #: For the mode switcher, which makes its own compare-and-set call.
    backend: Backend
    #: The time dialogs measure "how long ago" from.
    clock: Callable[[], float]

    def say(self, message: str, *, error: bool = False) -> None:
        """Show `message` on the message line (and `state.message`)."""

    def show(self, text: str) -> None:
        """Put `text` in the editor, as the draft."""

    def set_placeholder(self, text: str) -> None:
        """What the empty editor says when there is nothing to edit."""

    def sync_draft(self) -> None:
        """Read the draft from the editor into `state` (a keypress may not have been applied yet)."""

    async def ask(self, dialog: Screen[T]) -> T:
        """Push `dialog` and wait for the person's answer."""
        ...

    async def read_memory(self, *, keep_edits: bool = False) -> LoadOutcome:
        """Load the memory on a worker thread; the outcome is applied to `state` before this returns.
        With `keep_edits` (a load the person did not ask for) a draft typed meanwhile is not replaced."""
        ...

    async def write(self, request: WriteRequest) -> WriteOutcome:
        """Run `request` on a worker thread; the outcome is applied to `state` before this returns."""
        ...

    def quit(self, farewell: str | None = None) -> None:
        """End the frame (the draft is settled by then); `farewell` is printed once the terminal is back."""


def take(host: FlowHost, doc: MemoryDocument, message: str, *, error: bool = False) -> None:
    """Adopt `doc` as the base version and show it, dropping the draft."""
    host.state.adopt(doc)
    host.show(doc.text)
    host.say(message, error=error)


async def load(host: FlowHost) -> None:
    outcome = await host.read_memory()
    state = host.state
    if outcome.error is None:
        host.say("" if state.base_version else f"A new, empty memory. Write, then {state.key('save')} to save.")
    elif outcome.doc is None and state.loaded:
        host.say(f"Could not reload: {outcome.error} Still showing version {state.base_version}.", error=True)
    elif outcome.doc is None:
        reload_key = state.key("reload")
        host.set_placeholder(f"The memory is not loaded, so there is nothing to edit yet: {reload_key} tries again.")
        host.say(f"Could not load the memory: {outcome.error} Press {reload_key} to try again.", error=True)
    else:
        host.say(f"Loaded, but the mode could not be read: {outcome.error}", error=True)


async def save(host: FlowHost) -> bool:
    """Save the draft; True when the draft's fate is settled (saved, or discarded in the conflict view)."""
    host.sync_draft()
    state = host.state
    if not state.loaded:
        not_loaded(host, "save against")
        return False
    if not state.dirty:
        reload_key = state.key("reload")
        newer = "" if state.conflict is None else f" Version {state.conflict.version} is newer: {reload_key} loads it."
        host.say(f"No unsaved changes; version {state.base_version} is what the server holds.{newer}")
        return True
    if state.oversized and not state.saved_oversized:  # kept, but withheld from recall: asked first
        from memframe.tui.dialogs.over_bound import over_bound

        if not await host.ask(over_bound(state.size, state.key("budget"))):
            host.say("Not saved; your draft is kept. Shorten it, or Save again and choose Save anyway.")
            return False
    outcome = await host.write(WriteRequest.save(state.draft, state.base_version))
    while outcome.conflict and outcome.server is not None:
        from memframe.tui.dialogs import ConflictScreen

        choice = await host.ask(ConflictScreen(outcome.server, state.draft, state.base_version, now=host.clock()))
        if choice == "edit":
            newer_version = outcome.server.version
            host.say(f"Keep editing. Version {newer_version} is newer; {state.key('save')} shows the conflict again.")
            return False
        if choice == "discard":
            take(host, outcome.server, f"Discarded your draft; showing version {outcome.server.version}.")
            return True
        server = outcome.server
        outcome = await host.write(WriteRequest.save(state.draft, server.version, revive=server.deleted))
    return outcome.ok


async def resolve_draft(host: FlowHost, purpose: str) -> bool:
    """Save / Discard / Cancel for an unsaved draft; True when it is safe to go on.

    After a failed Save (offline, a refused token) the dialog also offers to write the draft to a
    file, so the person is never left choosing between waiting and discarding."""
    host.sync_draft()
    state = host.state
    if not state.dirty:
        return True
    from memframe.tui.dialogs import SaveDiscardCancel

    offline = state.save_failed or state.poll_failing  # a Save failed, or the poll cannot reach the server
    dialog = SaveDiscardCancel(purpose, state.base_version, state.size, offer_file=offline)
    choice = await host.ask(dialog)
    if choice == "discard":
        state.discard()
        host.show(state.draft)
        return True
    if choice == "save":
        return await save(host)
    if choice == "file":
        return draft_to_file(host)
    host.say("Cancelled; your draft is still here.")
    return False


def draft_to_file(host: FlowHost) -> bool:
    """Write the draft to a private file (`memframe.backend.drafts`); True when it is written.

    The editor keeps the draft: the file is a copy the person can Save from later."""
    from memframe.backend.drafts import write_draft

    host.sync_draft()
    state = host.state
    if not state.loaded:
        host.say("The memory is not loaded, so there is no draft to write.", error=True)
        return False
    try:
        path = write_draft(state.workspace_id, state.draft, now=host.clock())
    except OSError as exc:
        host.say(f"Could not write the draft to a file: {exc.strerror or exc}. It is still here.", error=True)
        return False
    state.draft_file = path
    host.say(f"Your draft is in {path} (mode 0600, plain text): paste it in and Save when the server "
             "takes it, then delete the file.")  # fmt: skip
    return True


async def reload(host: FlowHost) -> None:
    if await resolve_draft(host, "before reloading"):
        outcome = await host.read_memory()
        if outcome.doc is not None:
            host.say(f"Reloaded version {outcome.doc.version} from the server.")
        else:
            host.say(f"Could not reload: {outcome.error} Still showing version {host.state.base_version}.",
                     error=True)  # fmt: skip


async def clear(host: FlowHost) -> None:
    state = host.state
    if not state.loaded:
        not_loaded(host, "clear")
        return
    if not await resolve_draft(host, "before clearing"):
        return
    from memframe.tui.dialogs import ClearConflict, ConfirmClear

    if not await host.ask(ConfirmClear(state.workspace_id, state.base_version, utf8_size(state.server_text))):
        host.say("Clear cancelled; nothing was written.")
        return
    outcome = await host.write(WriteRequest.clear(state.base_version))
    while outcome.conflict and outcome.server is not None:
        if not await host.ask(ClearConflict(outcome.server, outcome.policy, now=host.clock())):
            state.settle_conflict()
            host.say(f"Kept version {outcome.server.version}; nothing was cleared.")
            return
        outcome = await host.write(WriteRequest.clear(outcome.server.version))


async def undo(host: FlowHost, revision: int) -> None:
    """Restore `revision` (chosen in Changes) as a new version, with a Save's draft and conflict handling."""
    if not await resolve_draft(host, f"before restoring revision {revision}"):
        return
    state = host.state
    if revision == state.base_version:
        host.say(f"Revision {revision} is already the current version; nothing to restore.")
        return
    outcome = await host.write(WriteRequest.undo(revision, state.base_version))
    while outcome.conflict and outcome.server is not None:
        from memframe.tui.dialogs import ConflictScreen

        server = outcome.server
        dialog = ConflictScreen(server, outcome.text, state.base_version, now=host.clock(), revision=revision)
        choice = await host.ask(dialog)
        if choice == "discard":
            take(host, server, f"Kept version {server.version}; revision {revision} was not restored.")
            return
        if choice == "edit":
            take(host, server, f"Revision {revision}'s text is your draft on top of version {server.version}.")
            host.show(outcome.text)
            return
        outcome = await host.write(WriteRequest.undo(revision, server.version))


async def mode(host: FlowHost) -> None:
    state = host.state
    if state.policy is None:
        host.say(f"The mode is not known until the memory loads: press {state.key('reload')}.", error=True)
        return
    from memframe.tui.screens.mode import ModeSwitcher  # screens opened on demand load on demand

    policy = await host.ask(ModeSwitcher(host.backend, state.policy))
    if policy is not None:
        state.policy = policy
        host.say(f"Mode: {policy.mode.label} (policy revision {policy.revision}). {policy.mode.explanation}")


async def leave(host: FlowHost) -> None:
    """Quit once the draft is settled. A Save chosen here that fails asks again, now offering to write
    the draft to a file; Cancel (or keeping a conflicted draft) stays in the frame."""
    written = host.state.draft_file
    while True:
        failures = host.state.failed_saves
        if await resolve_draft(host, "before quitting"):
            # Written to a file on the way out: say where once more, after the frame has gone.
            host.quit(host.state.message if host.state.draft_file != written else None)
            return
        if host.state.failed_saves == failures:
            return  # cancelled, kept a conflicted draft, or the file could not be written


def applied(text: str, proposal: Proposal) -> str | None:
    """The proposal's result on `text`, or None when it does not apply (the backend then says why)."""
    from memframe.core.edits import apply_memory_changes
    from memframe.core.errors import MemframeError

    try:
        return apply_memory_changes(text, list(proposal.changes))
    except MemframeError:
        return None


async def apply(host: FlowHost, proposal: Proposal) -> None:
    """Apply `proposal` as the person's own Save against the base version, after settling the draft."""
    from memframe.core.edits import apply_memory_changes
    from memframe.core.errors import EditRefused
    from memframe.tui.dialogs import ConflictScreen

    state = host.state
    if not state.loaded:
        not_loaded(host, "apply to")
        return
    if not await resolve_draft(host, f"before applying proposal {proposal.id}"):
        return
    result = applied(state.server_text, proposal)
    outcome = await host.write(WriteRequest.apply(proposal, result or "", state.base_version))
    while outcome.conflict and outcome.server is not None:
        server = outcome.server
        if server.deleted:
            take(host, server, f"Not applied: the memory was deleted (version {server.version}); save it first.")
            return
        try:
            result = apply_memory_changes(server.text, list(proposal.changes))
        except EditRefused as exc:
            why = target_changed(proposal, server.version, exc) if target_gone(exc) else exc
            take(host, server, f"Not applied — conflict: {why}. Memory was not changed.", error=True)
            return
        choice = await host.ask(ConflictScreen(server, result, server.version, now=host.clock(), proposal=proposal.id))
        if choice == "discard":
            take(host, server, f"Kept version {server.version}; proposal {proposal.id} is still pending.")
            return
        if choice == "edit":
            save_key = state.key("save")
            take(host, server, f"Proposal {proposal.id} applied to version {server.version} is your draft: "
                               f"{save_key} saves it. The proposal stays pending until you dismiss it.")  # fmt: skip
            host.show(result)
            return
        outcome = await host.write(WriteRequest.apply(proposal, result, server.version))


async def catch_up(host: FlowHost, version: int) -> None:
    """The Assistant committed `version`: show it in the editor, unless that would touch an unsaved draft."""
    host.sync_draft()
    state = host.state
    if state.base_version >= version:
        return
    if state.dirty:
        state.newer = max(version, state.newer or 0)
        host.say(f"The Assistant saved version {version}; your draft is based on version "
                 f"{state.base_version}. Save to review both, or discard and reload.")  # fmt: skip
        return
    outcome = await host.read_memory(keep_edits=True)
    if outcome.doc is not None and state.base_version == outcome.doc.version:
        host.say(f"The Assistant remembered something: showing version {outcome.doc.version}.")


# --- changes made elsewhere, seen by the head poll ---------------------------------------------------


def notice(host: FlowHost, head: MemoryHead | None, error: MemframeError | None) -> bool:
    """Apply one head poll to the state and say what changed elsewhere; True when the editor is clean
    and should take the newer version (`follow`). Never touches a draft.

    Offline is said once (and only over a message that is not already an error), not on every tick.
    """
    state = host.state
    if head is None:
        if not state.poll_failing and not state.message_is_error:
            host.say(f"Cannot check the server for changes made elsewhere: {error}", error=True)
        state.poll_failing = True
        return False
    if state.poll_failing:
        state.poll_failing = False
        if state.message.startswith("Cannot check the server"):
            host.say("In touch with the server again.")
    old = state.policy
    if old is None or (head.policy.revision, head.policy.clear_generation) != (old.revision, old.clear_generation):
        state.policy = head.policy
        if old is not None and head.policy.mode is not old.mode:
            mode = head.policy.mode
            host.say(f"The mode was changed elsewhere: now {mode.label} (policy revision {head.policy.revision}). "
                     f"{mode.explanation}")  # fmt: skip
    if head.version <= state.base_version:
        return False
    host.sync_draft()
    if not state.dirty:
        return True
    if state.newer is None or head.version > state.newer:
        state.newer = head.version
        host.say(_newer_words(head, state.base_version, state.key))
    return False


def _newer_words(head: MemoryHead, base_version: int, key: Callable[[str], str]) -> str:
    what = "saved"
    if head.info is not None:
        what = {"clear": "cleared", "capture": "remembered by the Assistant", "delete": "deleted",
                "undo": "restored from an older revision"}.get(head.info.operation.value, "saved")  # fmt: skip
    return (f"Version {head.version} was {what} elsewhere; your draft is based on version {base_version}. "
            f"{key('save')} shows both; discard and {key('reload')} takes it.")  # fmt: skip


def not_loaded(host: FlowHost, what: str) -> None:
    """Nothing to write against until the memory loads: say so, naming the Reload key."""
    host.say(f"The memory is not loaded, so there is no version to {what}: press {host.state.key('reload')}.",
             error=True)  # fmt: skip


async def follow(host: FlowHost, version: int) -> None:
    """Take `version`, saved elsewhere, into a clean editor (a draft typed meanwhile wins and is kept)."""
    host.sync_draft()
    state = host.state
    if state.base_version >= version or state.dirty:
        return
    before = state.base_version
    outcome = await host.read_memory(keep_edits=True)
    doc = outcome.doc
    if doc is not None and state.base_version == doc.version and doc.version != before:
        what = "cleared" if doc.info is not None and doc.info.operation.value == "clear" else "saved"
        host.say(f"Version {doc.version} was {what} elsewhere; the editor shows it (you had no unsaved changes).")
