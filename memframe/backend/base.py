"""The frame's one seam: what every backend promises, and the errors it may raise.

Two layers, so encryption lives in one place:

* `MemoryStore` speaks ciphertext to wherever the versions live (the service
  in-process, or a server over HTTP). It never sees plaintext or a key.
* `Backend` is what the frame and the CLI use: plaintext in and out. The one
  implementation, `SealedBackend`, seals and opens text on the client over any
  store; `LocalBackend` and `RemoteBackend` only choose the store.

Every write promise is the contract's: the acknowledged version is exact, and
a failure (offline, auth, conflict) changes nothing and leaves the caller's
draft alone. Nothing is queued and nothing is retried behind the caller's back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from memframe.backend.save_state import SaveState
from memframe.core.errors import (
    DecryptionFailed,
    DocumentDeleted,
    InvalidInput,
    KeyFileError,
    MemframeError,
    NotFound,
    PolicyConflict,
    Unauthorized,
    Unavailable,
    VersionConflict,
)
from memframe.core.types import MemoryDocument, MemoryHead, Mode, Policy, StoredVersion, VersionInfo

if TYPE_CHECKING:  # named in signatures only: the Assistant's records are not loaded before they are used
    from memframe.core.blame import CaptureMessage, CaptureOrigin
    from memframe.core.rotation import Destroyed, Rotation, RotationPlan, SealedRecords
    from memframe.core.turns import AIConsent, KeySessionInfo, Proposal, ProposalRecord, Receipt, TurnResult

__all__ = [
    "Backend",
    "DecryptionFailed",
    "DocumentDeleted",
    "InvalidInput",
    "KeyFileError",
    "MemframeError",
    "MemoryStore",
    "NotFound",
    "PolicyConflict",
    "Unauthorized",
    "Unavailable",
    "VersionConflict",
]


@runtime_checkable
class MemoryStore(Protocol):
    """Ciphertext-level access to one workspace, for one authenticated person."""

    @property
    def workspace_id(self) -> str:
        """The workspace this store is bound to."""

    @property
    def location(self) -> str:
        """Where the versions live, for people: a file path or a URL."""

    @property
    def assistant_model(self) -> str:
        """Who answers the Assistant's messages, for people: a model and its server, or the scripted demo."""

    def get_file(self, path: str) -> StoredVersion | None:
        """The head version (a tombstone if deleted), or None if never created."""

    def put_file(
        self,
        path: str,
        ciphertext: bytes,
        base_version: int,
        *,
        clear: bool = False,
        restored_from: int | None = None,
        revive: bool = False,
        source_note: bytes | None = None,
    ) -> VersionInfo:
        """Write against exactly `base_version` (0 = create-only) or raise VersionConflict; a Save
        may carry `source_note`, the sealed name of the file it was imported from."""

    def list_versions(self, path: str, *, limit: int = 50, before: int | None = None) -> list[VersionInfo]:
        """Newest first; metadata only."""

    def list_files(self) -> list[tuple[str, int, bool]]:
        """(path, head version, deleted) of every file in the workspace."""

    def get_version(self, path: str, version: int) -> StoredVersion:
        """One revision's metadata and ciphertext, or NotFound."""

    def get_versions(self, path: str, versions: Sequence[int]) -> list[StoredVersion]:
        """Several revisions, in the order asked, or NotFound if any is missing."""

    def get_policy(self) -> Policy:
        """The workspace's policy; the default when no row exists."""

    def set_policy(self, mode: Mode, expected_revision: int) -> Policy:
        """Compare-and-set on the policy revision, or PolicyConflict."""

    # --- the Assistant (a person's side of it) ----------------------------------------------

    def get_ai(self) -> AIConsent:
        """Whether workspace AI is on, and its consent revision."""

    def set_ai(self, enabled: bool) -> AIConsent:
        """Turn workspace AI on or off; a change bumps the consent revision."""

    def get_key_check(self) -> str | None:
        """The workspace's key check (HMAC of the key, useless for decrypting), or None if unset."""

    def set_key_check(self, key_check: str) -> None:
        """Write the key check once; another value than the stored one is WrongKey, nothing changed."""

    def rotation(self) -> Rotation | None:
        """The newest rotation of the workspace key: when, by whom, and its sealed record."""

    def sealed_records(self) -> SealedRecords:
        """The key check, every transcript message and proposal (sealed), and the newest rotation."""

    def rotate_key(self, plan: RotationPlan) -> Destroyed:
        """Swap in a rotation in one transaction against the state it was made from, or change nothing."""

    def open_key_session(self, key: bytes) -> KeySessionInfo:
        """Hand the key to the service's RAM for a while; refused unless the key is proven (it
        matches the key check, or on a workspace without one it opens the memory)."""

    def revoke_key_session(self, session_id: str) -> None:
        """Durably revoke, then forget the key."""

    def send_message(
        self,
        conversation_id: str,
        text: str,
        *,
        idempotency_key: str,
        key_session_id: str | None,
        memory_state: str | None,
        on_text: Callable[[str], None] | None = None,
    ) -> TurnResult:
        """One Assistant send: admitted before the turn runs, then answered.

        `on_text` receives the answer as it streams in, where the store can stream it."""

    def receipts(self, conversation_id: str) -> list[Receipt]:
        """Which revision each model call of a conversation used; never text."""

    def transcript(self, conversation_id: str) -> list[tuple[str, bytes]]:
        """A conversation's stored messages, sealed."""

    def capture_origins(self) -> list[CaptureOrigin]:
        """Which admission and conversation of this person made each capture, in ids only."""

    def proposals(self) -> list[ProposalRecord]:
        """Pending proposals, with their edits sealed."""

    def resolve_proposal(self, proposal_id: str, status: str) -> None:
        """Mark a pending proposal applied or dismissed."""

    def close(self) -> None:
        """Release connections; idempotent."""


@runtime_checkable
class Backend(Protocol):
    """What the Memory frame and the CLI use: the workspace's memory, in plaintext."""

    @property
    def workspace_id(self) -> str:
        """The workspace this backend is bound to."""

    @property
    def location(self) -> str:
        """Where the memory lives, for people: a file path or a URL."""

    @property
    def assistant_model(self) -> str:
        """Who answers the Assistant's messages, for people: a model and its server, or the scripted demo."""

    @property
    def save_state(self) -> SaveState:
        """This client's own Saves, which X-Memory-State reports."""

    def load(self) -> MemoryDocument:
        """The current text and the exact version it belongs to (0: never created)."""

    def save(self, text: str, base_version: int, *, revive: bool = False, source: str | None = None) -> VersionInfo:
        """One direct upload against `base_version`. On success the returned version is
        exactly what the server holds; on any failure nothing changed anywhere. `source` names the
        file the text was imported from: sealed with the version, as its text is (InvalidInput
        unless printable and at most 200 bytes)."""

    def clear(self, base_version: int) -> VersionInfo:
        """Write an empty revision and advance the Clear generation, atomically.
        If another write won first: VersionConflict, nothing written, generation unmoved."""

    def undo(self, revision: int, base_version: int) -> VersionInfo:
        """Restore `revision`'s text as a new revision against `base_version`; never
        rewinds the Clear generation or the policy revision."""

    def history(self, *, limit: int = 50, before: int | None = None) -> list[VersionInfo]:
        """Revisions newest first, one page, without decrypting anything."""

    def head(self) -> MemoryHead:
        """The head revision's metadata and the policy, cheaply (two small reads, no text, nothing
        decrypted): what a frame left open polls to notice a Save, Clear, capture or mode change."""

    def forgotten_line(self) -> str | None:
        """Where the memory's history starts after version 1 because older versions were forgotten:
        "versions 1–(N−1) were forgotten on DATE by WHO", as the rotation record sealed under the key
        says; None otherwise."""

    def source_of(self, info: VersionInfo) -> str | None:
        """The name of the file a person imported revision `info` from, opened on this machine; None
        if it has no source note. A note that does not open at that version (altered, or moved from
        another version) is DecryptionFailed, said as tampering: it is never shown."""

    def read_revision(self, version: int) -> str:
        """The decrypted text of one revision (empty for a deletion)."""

    def read_revisions(self, versions: Sequence[int]) -> dict[int, str]:
        """Several revisions' texts in one go (one transaction locally, one request remotely):
        what a search of a long history reads batch by batch instead of one round trip each."""

    def get_policy(self) -> Policy:
        """The mode, its revision and the Clear generation."""

    def set_policy(self, mode: Mode, expected_revision: int) -> Policy:
        """Compare-and-set the mode; PolicyConflict if someone changed it first."""

    # --- the Assistant ---------------------------------------------------------------------

    def get_ai(self) -> AIConsent:
        """Whether workspace AI is on."""

    def set_ai(self, enabled: bool) -> AIConsent:
        """Turn workspace AI on or off. Changing the memory mode never does this."""

    def send(
        self,
        conversation_id: str,
        text: str,
        *,
        idempotency_key: str | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> TurnResult:
        """Send a message to the Assistant: waits up to 5 s for an in-flight Save, reports
        X-Memory-State (never the unsaved draft), opens a key session if none is open."""

    def receipts(self, conversation_id: str) -> list[Receipt]:
        """Which revision each answer used, or why memory was withheld."""

    def transcript(self, conversation_id: str) -> list[tuple[str, str]]:
        """A conversation's stored messages, decrypted on this machine."""

    def capture_messages(self) -> dict[int, CaptureMessage]:
        """Per capture version of this person's conversations: the conversation, and the person's
        message that led to it, decrypted on this machine from the sealed transcript."""

    def proposals(self) -> list[Proposal]:
        """Pending proposals, decrypted on this machine."""

    def apply_proposal(self, proposal_id: str, base_version: int) -> VersionInfo:
        """Apply a proposal as a normal human Save against `base_version`. Refused if it was made
        before a Clear; an edit whose target line changed is an EditRefused (a conflict to show).
        If the Save landed but marking the proposal applied failed: ProposalNotMarked, whose `info`
        is the acknowledged version (the write happened; the caller moves to it)."""

    def dismiss_proposal(self, proposal_id: str) -> None:
        """Drop a proposal without changing memory."""

    def close(self) -> None:
        """Release resources (and revoke this client's key session); idempotent."""
