"""Plaintext over any MemoryStore: sealing on the client, and save-state tracking.

This is the only place a human write's text is encrypted, whichever backend
is used, so local and remote cannot drift apart in what they store.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
from collections.abc import Sequence

from memframe.backend.base import MemoryStore
from memframe.backend.save_state import SaveState
from memframe.core.edits import apply_memory_changes, parse_changes
from memframe.core.errors import (
    CaptureRefused,
    KeySessionUnavailable,
    MemframeError,
    NotFound,
    ProposalNotMarked,
    VersionConflict,
)
from memframe.core.paths import proposal_path, transcript_path
from memframe.core.turns import AIConsent, Proposal, ProposalRecord, Receipt, TurnResult
from memframe.core.types import MEMORY_PATH, MemoryDocument, MemoryHead, Mode, Operation, Policy, VersionInfo
from memframe.crypto import open_sealed, opener, seal


class SealedBackend:
    """The Backend every frame and CLI command uses; see `memframe.backend.base.Backend`."""

    def __init__(self, store: MemoryStore, key: bytes, *, save_state: SaveState | None = None) -> None:
        self.store = store
        self._key = key
        self._key_session: str | None = None
        self._key_session_lock = threading.Lock()  # the frame's poll and a send may run at once
        self.save_state = save_state or SaveState()

    @property
    def workspace_id(self) -> str:
        return self.store.workspace_id

    @property
    def location(self) -> str:
        return self.store.location

    def __repr__(self) -> str:  # never shows the key
        return f"<{type(self).__name__} {self.workspace_id} at {self.location}>"

    # --- sealing -------------------------------------------------------------------------

    def _seal(self, text: str, path: str = MEMORY_PATH) -> bytes:
        return seal(self._key, text, workspace_id=self.workspace_id, path=path)

    def _open(self, blob: bytes | None, path: str = MEMORY_PATH) -> str:
        if blob is None:
            return ""
        return open_sealed(self._key, blob, workspace_id=self.workspace_id, path=path)

    # --- any file of the workspace (people manage every path, the memory's included) -------

    def list_files(self) -> list[tuple[str, int, bool]]:
        """(path, head version, deleted) of every file, without decrypting anything."""
        return self.store.list_files()

    def read_file(self, path: str) -> tuple[int, str, bool]:
        """(version, text, deleted) of a file's head; (0, "", False) if it was never created."""
        head = self.store.get_file(path)
        if head is None:
            return 0, "", False
        return head.info.version, self._open(head.ciphertext, path), head.info.operation is Operation.DELETE

    def write_file(self, path: str, text: str, base_version: int) -> VersionInfo:
        """One direct write of any file against its exact base version (0 = create-only)."""
        return self.store.put_file(path, self._seal(text, path), base_version)

    # --- reads ---------------------------------------------------------------------------

    def load(self) -> MemoryDocument:
        head = self.store.get_file(MEMORY_PATH)
        if head is None:
            return MemoryDocument("", 0)
        deleted = head.info.operation is Operation.DELETE
        return MemoryDocument(self._open(head.ciphertext), head.info.version, deleted, head.info)

    def history(self, *, limit: int = 50, before: int | None = None) -> list[VersionInfo]:
        return self.store.list_versions(MEMORY_PATH, limit=limit, before=before)

    def head(self) -> MemoryHead:
        rows = self.store.list_versions(MEMORY_PATH, limit=1)
        return MemoryHead(rows[0] if rows else None, self.store.get_policy())

    def read_revision(self, version: int) -> str:
        if version < 1:
            raise NotFound(f"There is no revision {version}.")
        return self._open(self.store.get_version(MEMORY_PATH, version).ciphertext)

    def read_revisions(self, versions: Sequence[int]) -> dict[int, str]:
        """The decrypted texts of several revisions, read together (one transaction locally)."""
        if any(v < 1 for v in versions):
            raise NotFound(f"There is no revision {min(versions)}.")
        stored = self.store.get_versions(MEMORY_PATH, versions)
        open_blob = opener(self._key, workspace_id=self.workspace_id, path=MEMORY_PATH)  # one cipher for all
        return {s.info.version: open_blob(s.ciphertext) for s in stored}

    def get_policy(self) -> Policy:
        return self.store.get_policy()

    # --- writes: each one direct upload, tracked for X-Memory-State -----------------------

    def _write(self, text: str, base_version: int, **kwargs: object) -> VersionInfo:
        blob = self._seal(text)
        with self.save_state.saving():
            info = self.store.put_file(MEMORY_PATH, blob, base_version, **kwargs)  # type: ignore[arg-type]
            self.save_state.acknowledge(info.version)
        return info

    def save(self, text: str, base_version: int, *, revive: bool = False) -> VersionInfo:
        return self._write(text, base_version, revive=revive)

    def clear(self, base_version: int) -> VersionInfo:
        return self._write("", base_version, clear=True)

    def undo(self, revision: int, base_version: int) -> VersionInfo:
        # Decrypting first proves the revision is ours and readable before anything is written.
        text = self.read_revision(revision)
        return self._write(text, base_version, restored_from=revision)

    def set_policy(self, mode: Mode, expected_revision: int) -> Policy:
        return self.store.set_policy(mode, expected_revision)

    # --- the Assistant ----------------------------------------------------------------------

    def get_ai(self) -> AIConsent:
        return self.store.get_ai()

    def set_ai(self, enabled: bool) -> AIConsent:
        return self.store.set_ai(enabled)

    def key_session(self) -> str:
        """This client's key session, opened on first use and reused until closed or gone."""
        with self._key_session_lock:
            if self._key_session is None:
                self._key_session = self.store.open_key_session(self._key).id
            return self._key_session

    def close_key_session(self) -> None:
        with self._key_session_lock:
            session, self._key_session = self._key_session, None
        if session is not None:
            self.store.revoke_key_session(session)

    def _forget_key_session(self, session: str) -> None:
        """The server no longer holds `session` (idle eviction, expiry, a restart): drop our id, so
        the next use opens a fresh one. There is nothing to revoke: the server forgot the key already."""
        with self._key_session_lock:
            if self._key_session == session:
                self._key_session = None

    def send(self, conversation_id: str, text: str, *, idempotency_key: str | None = None) -> TurnResult:
        state = self.save_state.for_send()  # waits up to 5 s for an in-flight Save
        return self.send_turn(conversation_id, text, idempotency_key=idempotency_key, memory_state=state.header())

    def send_turn(
        self, conversation_id: str, text: str, *, idempotency_key: str | None = None, memory_state: str | None
    ) -> TurnResult:
        """One send under this client's key session, reporting `memory_state` as given (None: none).

        A long-running client outlives its key session (the server evicts it after its idle time, and
        every session ends at its lifetime). Only the key-session open is ever repeated: when ingress
        refused the send because the session is gone, it wrote nothing (`admission_refused`), so a
        fresh session is opened and the same message, with the same idempotency key, goes once more.
        A session that ends later in a turn is not re-sent (the turn may have written); the next send
        opens a fresh one.
        """
        key = idempotency_key or secrets.token_hex(8)
        session = self.key_session()
        try:
            return self.store.send_message(
                conversation_id, text, idempotency_key=key, key_session_id=session, memory_state=memory_state
            )
        except KeySessionUnavailable as exc:
            self._forget_key_session(session)
            if not exc.admission_refused:
                raise KeySessionUnavailable(
                    "The key session ended during this turn, so it may be incomplete; nothing was sent again. "
                    "The next message opens a fresh key session."
                ) from None
        return self.store.send_message(
            conversation_id, text, idempotency_key=key, key_session_id=self.key_session(), memory_state=memory_state
        )

    def receipts(self, conversation_id: str) -> list[Receipt]:
        return self.store.receipts(conversation_id)

    def transcript(self, conversation_id: str) -> list[tuple[str, str]]:
        path = transcript_path(conversation_id)
        return [
            (role, open_sealed(self._key, blob, workspace_id=self.workspace_id, path=path))
            for role, blob in self.store.transcript(conversation_id)
        ]

    def proposals(self) -> list[Proposal]:
        return [self._open_proposal(record) for record in self.store.proposals()]

    def _open_proposal(self, record: ProposalRecord) -> Proposal:
        raw = open_sealed(self._key, record.sealed_edits, workspace_id=self.workspace_id, path=proposal_path(record.id))
        return Proposal(
            record.id,
            record.base_version,
            record.clear_generation,
            record.reason,
            tuple(parse_changes(json.loads(raw))),
            record.created_at,
        )

    def apply_proposal(self, proposal_id: str, base_version: int) -> VersionInfo:
        proposal = next((p for p in self.proposals() if p.id == proposal_id), None)
        if proposal is None:
            raise NotFound("No such pending proposal.")
        if proposal.clear_generation != self.get_policy().clear_generation:
            raise CaptureRefused(
                "This proposal was made before the memory was cleared, so it cannot be applied; dismiss it."
            )
        current = self.load()
        if current.version != base_version:
            raise VersionConflict(current.version)
        info = self.save(apply_memory_changes(current.text, list(proposal.changes)), base_version)
        try:
            self.store.resolve_proposal(proposal_id, "applied")
        except MemframeError as exc:  # the Save landed: say so, with its version, never "not applied"
            raise ProposalNotMarked(info, exc) from None
        return info

    def dismiss_proposal(self, proposal_id: str) -> None:
        self.store.resolve_proposal(proposal_id, "dismissed")

    def close(self) -> None:
        # Already gone (expired, revoked, or the server is down): nothing is left to forget.
        with contextlib.suppress(MemframeError):
            self.close_key_session()
        self.store.close()
