"""The document as the frame holds it: one plain object that every screen shares.

Widgets show this state; they never own it. It has no Textual import so it can
be read (and tested) without a running app. What this client has *saved* is
tracked by the backend's `SaveState`, the same object X-Memory-State reads, so
the frame and an Assistant send can never disagree about the acknowledged
version. An unsaved draft lives only here and is never reported anywhere.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memframe.backend.save_state import SaveState
from memframe.core.errors import EditRefused, MemframeError, VersionConflict
from memframe.core.types import MEMORY_RECALL_MAX_BYTES, MemoryDocument, Mode, Policy, VersionInfo, utf8_size
from memframe.core.wording import CLEAR_BOUNDARY
from memframe.tui.keynames import key_label

if TYPE_CHECKING:  # proposals and their edits load when the first one is applied, not before the first paint
    from memframe.core.turns import Proposal


class WriteKind(enum.StrEnum):
    """The human writes; each is one direct upload against a base version.

    Applying a proposal is a Save of the proposal's result, made by the person.
    """

    SAVE = "save"
    CLEAR = "clear"
    UNDO = "undo"
    APPLY = "apply"


@dataclass(frozen=True)
class WriteRequest:
    """One write as the frame asks for it: what, against which version."""

    kind: WriteKind
    base_version: int
    text: str = ""  # the text to save (a Clear writes nothing else; an Undo reads its revision)
    revision: int | None = None  # Undo: the revision whose text is restored
    revive: bool = False  # Save over a deleted document, chosen explicitly
    proposal: Proposal | None = None  # Apply: the proposal; `text` is its result on the base version's text

    @classmethod
    def save(cls, text: str, base_version: int, *, revive: bool = False) -> WriteRequest:
        return cls(WriteKind.SAVE, base_version, text, revive=revive)

    @classmethod
    def clear(cls, base_version: int) -> WriteRequest:
        return cls(WriteKind.CLEAR, base_version)

    @classmethod
    def undo(cls, revision: int, base_version: int) -> WriteRequest:
        return cls(WriteKind.UNDO, base_version, revision=revision)

    @classmethod
    def apply(cls, proposal: Proposal, result: str, base_version: int) -> WriteRequest:
        return cls(WriteKind.APPLY, base_version, result, proposal=proposal)


@dataclass(frozen=True)
class WriteOutcome:
    """What came back: the exact acknowledged version, or why nothing was written.

    On a conflict `server` is the newer document (when it could be read) and
    `text` is what this write would have put there, so a conflict view can
    show both without another round trip.
    """

    request: WriteRequest
    text: str
    info: VersionInfo | None = None
    error: MemframeError | None = None
    server: MemoryDocument | None = None
    policy: Policy | None = None
    #: A write that landed with something left undone (a proposal applied but not marked applied).
    warning: str = ""

    @property
    def ok(self) -> bool:
        return self.info is not None

    @property
    def conflict(self) -> bool:
        return isinstance(self.error, VersionConflict)


class DocumentState:
    """Draft, base version, server text, dirty flag, in-flight write, last message."""

    def __init__(self, save_state: SaveState, workspace_id: str = "", location: str = "") -> None:
        self.save_state = save_state
        #: Names a binding id's current key in messages (the App sets one that reads its keymap).
        self.key: Callable[[str], str] = key_label
        self.workspace_id = workspace_id
        self.location = location
        self.loaded = False
        #: The text of `base_version` exactly as the server holds it.
        self.server_text = ""
        #: The server version the draft is based on; writes name it as X-Base-Version.
        self.base_version = 0
        self.deleted = False
        self.draft = ""
        self.policy: Policy | None = None
        #: The write this frame has asked for and not yet heard back about.
        self.writing: WriteRequest | None = None
        #: A newer server document that refused our last write, until resolved.
        self.conflict: MemoryDocument | None = None
        #: The last Save of this draft failed for a reason other than a conflict (offline, a refused
        #: token), so the draft may have nowhere to go but a file (`flows.draft_to_file`).
        self.save_failed = False
        #: A key rotation (Changes: forget, rotate) is running: the poll waits, and Quit waits for its receipt.
        self.rotating = False
        #: A newer version the head poll saw on the server while the editor held a draft (or was busy).
        self.newer: int | None = None
        #: The head poll could not reach the server last time (said once, not on every tick).
        self.poll_failing = False
        #: The last file a draft was written to (`flows.draft_to_file`).
        self.draft_file: Path | None = None
        #: How many Saves have failed that way in this session (a flow can tell "it just failed").
        self.failed_saves = 0
        #: One line for the person: the last failure (error=True) or success.
        self.message = ""
        self.message_is_error = False

    # --- what the status bar reads ---------------------------------------------------------

    @property
    def dirty(self) -> bool:
        """Unsaved changes: the draft differs from the text of the base version."""
        return self.draft != self.server_text

    @property
    def size(self) -> int:
        return utf8_size(self.draft)

    @property
    def oversized(self) -> bool:
        return self.size > MEMORY_RECALL_MAX_BYTES

    @property
    def saved_oversized(self) -> bool:
        return utf8_size(self.server_text) > MEMORY_RECALL_MAX_BYTES

    @property
    def in_flight(self) -> bool:
        """A write is underway: asked for here, or already inside the backend, or a key rotation."""
        return self.writing is not None or self.save_state.in_flight or self.rotating

    @property
    def acknowledged_version(self) -> int | None:
        """This client's last acknowledged write, read from the shared SaveState."""
        last = self.save_state.last
        return last.version if last.kind == "saved" else None

    @property
    def newer_version(self) -> int | None:
        """A version on the server newer than the draft's base: from a refused write or the poll."""
        seen = [v for v in (self.newer, None if self.conflict is None else self.conflict.version) if v is not None]
        newest = max(seen, default=0)
        return newest if newest > self.base_version else None

    @property
    def mode(self) -> Mode | None:
        return None if self.policy is None else self.policy.mode

    # --- transitions -------------------------------------------------------------------------

    def say(self, message: str, *, error: bool = False) -> None:
        self.message = message
        self.message_is_error = error

    def edit(self, text: str) -> None:
        self.draft = text

    def adopt(self, doc: MemoryDocument, *, settles: bool = True) -> None:
        """Take the server's document as both base and draft (load, reload, discard).

        Taking the server's text resolves a refused Save (`settles`): the Assistant is given memory
        again. A refused Clear shows the newer text without settling: the person asked for it to be
        cleared, so memory stays withheld until they retry or keep it (`settle_conflict`)."""
        if settles:
            self.save_state.take_server_version(doc.version)
        self.loaded = True
        self.server_text = doc.text
        self.base_version = doc.version
        self.deleted = doc.deleted
        self.draft = doc.text
        self.conflict = None
        self.save_failed = False
        if self.newer is not None and self.newer <= doc.version:
            self.newer = None

    def settle_conflict(self) -> None:
        """The person kept the server's base version after a refused write: the conflict is resolved."""
        self.save_state.take_server_version(self.base_version)

    def discard(self) -> None:
        """Drop the draft; the editor goes back to the base version's text."""
        self.draft = self.server_text
        self.say(f"Discarded your changes; showing version {self.base_version}.")

    def begin(self, request: WriteRequest) -> None:
        self.writing = request

    def finish(self, outcome: WriteOutcome) -> None:
        """Apply a write's outcome. Only success moves the base version; a failure keeps the draft."""
        self.writing = None
        kind = outcome.request.kind
        if outcome.info is not None:
            self.server_text = outcome.text
            self.base_version = outcome.info.version
            self.deleted = False
            self.conflict = None
            self.save_failed = False
            if self.newer is not None and self.newer <= outcome.info.version:
                self.newer = None
            if kind is not WriteKind.SAVE:
                self.draft = outcome.text
            self.say(_success(outcome), error=bool(outcome.warning))
            return
        error = outcome.error
        if kind is WriteKind.SAVE and not outcome.conflict:
            self.save_failed = True
            self.failed_saves += 1
        if outcome.conflict and outcome.server is not None:
            self.conflict = outcome.server
            if kind is WriteKind.CLEAR:
                # The draft was resolved before the Clear, so showing the newer text loses nothing.
                self.adopt(outcome.server, settles=False)
                self.conflict = outcome.server
        self.say(_failure(outcome, error, self.key), error=True)


#: The key that writes the draft to a file by default (the main screen's `memframe.draft_file` binding).
DRAFT_FILE_KEY = "f5"


def _success(outcome: WriteOutcome) -> str:
    assert outcome.info is not None
    version = outcome.info.version
    kind = outcome.request.kind
    if kind is WriteKind.CLEAR:
        generation = "" if outcome.policy is None else f"; clear generation is now {outcome.policy.clear_generation}"
        return f"Cleared: version {version} is empty{generation}. {CLEAR_BOUNDARY}"
    if kind is WriteKind.UNDO:
        return f"Restored revision {outcome.request.revision} as version {version}."
    if kind is WriteKind.APPLY:
        assert outcome.request.proposal is not None
        if outcome.warning:
            return f"Proposal {outcome.request.proposal.id}: {outcome.warning}"
        return f"Applied proposal {outcome.request.proposal.id}: the server acknowledged version {version}."
    return f"Saved: the server acknowledged version {version}."


def _failure(outcome: WriteOutcome, error: MemframeError | None, key: Callable[[str], str]) -> str:
    kind = outcome.request.kind
    verb = {WriteKind.SAVE: "Not saved", WriteKind.CLEAR: "Not cleared", WriteKind.UNDO: "Not restored",
            WriteKind.APPLY: "Not applied"}[kind]  # fmt: skip
    reason = str(error) if error is not None else "unknown failure"
    if kind is WriteKind.APPLY and isinstance(error, EditRefused) and target_gone(error):
        clause = target_changed(outcome.request.proposal, outcome.request.base_version, error)
        return f"{verb} — conflict: {clause}. Memory was not changed; edit it by hand or dismiss the proposal."
    if isinstance(error, VersionConflict):
        newer = error.current_version
        if kind is WriteKind.APPLY:
            return f"{verb}: version {newer} was written first; nothing was changed."
        if kind is WriteKind.CLEAR:
            return f"{verb}: version {newer} was written first; nothing was cleared. Retry Clear explicitly."
        return f"{verb}: version {newer} is newer on the server. Your draft is kept; {key('save')} to review."
    if kind is WriteKind.SAVE:
        return f"{verb}: {reason} Your draft is kept here; nothing is queued. {key('draft_file')} writes it to a file."
    return f"{verb}: {reason} Nothing changed; nothing is queued."


def target_gone(error: EditRefused) -> bool:
    """The edit was refused because the proposal's target line is gone or no longer unique."""
    from memframe.core.edits import TARGET_GONE

    return error.details.get("reason") in TARGET_GONE


def target_changed(proposal: Proposal | None, base_version: int, error: EditRefused) -> str:
    """A proposal's target line changed since it was made: which edit and how, as a clause."""
    from memframe.core.edits import RefusalReason

    index = error.details.get("index")
    edit = ""
    if proposal is not None and isinstance(index, int) and 0 < index <= len(proposal.changes):
        change = proposal.changes[index - 1]
        edit = f" (edit {index}: {change.op} {change.line!r})"
    where = f"version {base_version}"
    phrases: dict[str, str] = {
        RefusalReason.NO_MATCH: "is no longer in",
        RefusalReason.AMBIGUOUS: "now appears more than once in",
    }
    what = phrases.get(str(error.details.get("reason")), "goes under a heading that now appears more than once in")
    return f"the line this proposal changes{edit} {what} {where}"
