"""Automatic capture: the only automatic writer of memory, behind the commit fence.

The path reads as the contract does: the admission is read, a transport retry of the turn's
committed capture replays its receipt, the key session is resolved immediately before the batch,
and one transaction writes the version (expected version, no tombstone revival), inserts the fence
row whose CHECK judges the admission, and marks the admission committed.

Before the batch, the lines the capture would write are judged (`memframe.core.grounding`): a line
carrying the recall frame's residue is always refused, and with grounded capture on, a line the
person's message of the turn does not support is refused as `CaptureUngrounded`, which the tool
turns into a proposal. Both only add refusals; neither loosens the fence.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence

from memframe import sealing
from memframe.core.edits import MemoryChange, apply_memory_changes
from memframe.core.errors import (
    CaptureRefused,
    CaptureUngrounded,
    FenceRefused,
    InvalidInput,
    KeySessionUnavailable,
    NotFound,
    VersionConflict,
)
from memframe.core.grounding import refuse_frame_residue, unsupported_lines
from memframe.core.turns import CaptureReceipt
from memframe.core.types import MEMORY_PATH, Author, Mode, Operation, VersionInfo
from memframe.service import files
from memframe.service.admissions import ADMISSION_COLUMNS, Admission, AssistantBase, checked_admission, parse_credential
from memframe.service.fence import FENCE_INSERT, failed_predicates
from memframe.service.policy import read_policy
from memframe.service.proposals import edit_dicts
from memframe.service.rotation import latest_rotation
from memframe.service.transcript import turn_message

#: The admission a capture presents, with what its turn has committed already (if anything).
_CAPTURE_ADMISSION = (
    f"SELECT {ADMISSION_COLUMNS}, committed_version, commit_request_hash FROM workspace_memory_admissions WHERE id = ?"
)


class _FenceDidNotHold(Exception):
    """A capture's batch found its fence row or its admission not as the fence requires."""


class CaptureMixin(AssistantBase):
    def commit_capture(
        self,
        workspace_id: str,
        credential: str,
        *,
        idempotency_key: str,
        key_session_id: str | None,
        changes: Sequence[MemoryChange],
        expected_version: int,
    ) -> CaptureReceipt:
        """The only automatic writer. Scope, idempotency and key-session checks first; then
        one transaction: the version (expected version, no tombstone revival), the fence row
        whose CHECK judges the admission, and the admission marked committed."""
        # 1. The admission the turn presents (scope: its credential, its workspace).
        admission_id, _ = parse_credential(credential)
        row = self.db.read_row(_CAPTURE_ADMISSION, (admission_id,))
        admission = checked_admission(None if row is None else row[:-2], workspace_id, credential)
        if idempotency_key != f"memory:{admission.id}":
            raise InvalidInput("The Idempotency-Key must be memory:<admissionId> of this turn.")
        # 2. Idempotent replay: a transport retry of the committed capture gets the same receipt.
        request_hash = _request_hash(changes, expected_version)
        committed_version, committed_hash = row[-2:]
        if committed_version is not None:
            return self._replay(admission, int(committed_version), committed_hash, request_hash)
        # 3. The lines it would write: never the recall frame's residue.
        refuse_frame_residue(changes)
        # 4. The key session, resolved immediately before the batch: an evicted or forgotten one
        # fails here. An explicit revocation is also a durable row, which the fence reads in the batch,
        # and a key rotation replaces the key check the fence compares the resolved key's with.
        # With grounded capture, the person's message of this turn is read with it, in RAM, and
        # must support every line written (a refusal only: the batch judges the fence regardless).
        try:
            key, opener = self.key_sessions.key_and_opener(key_session_id, workspace_id)
        except KeySessionUnavailable:
            self._refuse_if_rotated(admission)
            raise
        if self.grounded_capture:
            self._require_grounded(admission, key, changes)
        now = self.db.clock()
        params = {
            "admission_id": admission.id,
            "ws": workspace_id,
            "now": now,
            "nonce": admission.credential_nonce,
            "key_session": key_session_id,
            "key_check": sealing.key_check(key, workspace_id),
        }
        written: list[tuple[bytes, int, str]] = []  # what the batch sealed, once it ran

        def batch(conn: sqlite3.Connection) -> VersionInfo:
            # 5. One transaction (its own savepoint in a group commit): the base is read here, so an
            # earlier write of the same group is seen as the conflict it is.
            base = self._current_base(conn, workspace_id, expected_version)
            version = expected_version + 1
            # The fence row first: a refused capture aborts before its base is opened or any version
            # written (a base re-sealed by a key rotation meanwhile is the fence's to refuse, not the
            # cipher's), and an accepted one writes its version in the same transaction.
            if conn.execute(FENCE_INSERT, {**params, "version": version}).rowcount != 1:
                raise _FenceDidNotHold("fence row missing")  # the CHECK judged no row
            text, blob = self._sealed(conn, workspace_id, expected_version, base, key, opener, changes)
            info = files.insert_version(
                conn,
                workspace_id=workspace_id,
                path=MEMORY_PATH,
                version=version,
                now=now,
                author=Author.ASSISTANT,
                actor="assistant",
                operation=Operation.CAPTURE,
                ciphertext=blob,
            )
            marked = conn.execute(
                "UPDATE workspace_memory_admissions SET consumed_at = ?, committed_version = ?,"
                " commit_request_hash = ? WHERE id = ? AND consumed_at IS NULL",
                (now, version, request_hash, admission.id),
            )
            if marked.rowcount != 1:
                raise _FenceDidNotHold("admission already consumed")
            written.append((blob, version, text))
            return info

        refused: tuple[type[Exception], ...] = (_FenceDidNotHold, *self.db.integrity_errors)
        try:
            info = self.db.write_together(batch)
        except refused:
            with self.db.read() as conn:
                reasons = failed_predicates(conn, params) or ["the fence did not hold"]
            raise FenceRefused(
                "Memory was not changed: " + "; ".join(f"not true that {r}" for r in reasons) + ".",
                reasons=reasons,
            ) from None
        opener.hold(*written[-1])  # the next recall and capture start from the text just written
        return CaptureReceipt(admission.id, info)

    def _refuse_if_rotated(self, admission: Admission) -> None:
        """A turn whose key session a key rotation revoked (and forgot) after the turn began is told
        so, instead of the bare "closed, expired or unknown"; nothing was written either way."""
        with self.db.read() as conn:
            revoked = conn.execute(
                "SELECT 1 FROM key_session_revocations WHERE key_session_id = ?", (admission.key_session_id,)
            ).fetchone()
            last = latest_rotation(conn, admission.workspace_id)
        if revoked is not None and last is not None and last.rotated_at >= admission.created_at:
            raise KeySessionUnavailable(
                f"Memory was not changed: the workspace key was rotated by {last.rotated_by} after this turn"
                " began; its key session was revoked with the old key, under which this capture was made."
            )

    def _require_grounded(self, admission: Admission, key: bytes, changes: Sequence[MemoryChange]) -> None:
        """CaptureUngrounded unless the person's message of the turn supports every line written."""
        with self.db.read() as conn:
            message = turn_message(conn, key, admission)
        if unsupported := unsupported_lines(message, changes):
            edits = ", ".join(str(u.index) for u in unsupported)
            raise CaptureUngrounded(
                f"Not written: grounded capture is on and the person's message of this turn does not "
                f"contain every word of edit {edits}."
            )

    def _sealed(
        self,
        conn: sqlite3.Connection,
        workspace_id: str,
        expected_version: int,
        base: bytes | None,
        key: bytes,
        opener: sealing.Opener,
        changes: Sequence[MemoryChange],
    ) -> tuple[str, bytes]:
        """(text, ciphertext) of the version after `base` (the head at `expected_version`, read in
        `conn`'s snapshot): the base opened, the changes applied, the result sealed."""
        base_text = _open_base(opener, workspace_id, expected_version, base, conn)
        text = apply_memory_changes(base_text, list(changes))
        blob = sealing.seal(  # a delta against the base where smaller (never against a Clear's "")
            key,
            text,
            workspace_id=workspace_id,
            path=MEMORY_PATH,
            version=expected_version + 1,
            previous=base,
            previous_text=base_text,
        )
        return text, blob

    def _replay(self, a: Admission, committed_version: int, committed_hash: str, request_hash: str) -> CaptureReceipt:
        """A transport retry of the turn's committed capture replays its receipt; a different
        change in the same turn is refused."""
        if committed_hash != request_hash:
            raise CaptureRefused("This turn has already changed memory once; a further change needs a new message.")
        try:
            with self.db.read() as conn:
                version = files.get_version(conn, a.workspace_id, MEMORY_PATH, committed_version)
        except NotFound:  # `forget --before N` destroyed it since: its receipt went with it
            raise NotFound(
                f"This turn changed memory as version {committed_version}, which has since been forgotten;"
                " nothing was changed."
            ) from None
        return CaptureReceipt(a.id, version.info, replayed=True)

    @staticmethod
    def _current_base(conn: sqlite3.Connection, workspace_id: str, expected_version: int) -> bytes | None:
        """The ciphertext a capture applies its edits to: the current memory, only if it is the
        expected version (None for a memory never written); a stale base is a VersionConflict."""
        if expected_version < 0:
            raise InvalidInput("The base version cannot be negative.")
        head = files.get_current(conn, workspace_id, MEMORY_PATH)
        current = 0 if head is None else head.info.version
        if expected_version != current:
            raise VersionConflict(current)
        if head is None:
            return None
        if head.info.operation is Operation.DELETE:
            raise CaptureRefused("The memory was deleted; nothing was written.")
        return head.ciphertext or b""

    def current_memory(self, workspace_id: str, credential: str) -> tuple[int, str]:
        """The current version and text, for turning a refused capture into a proposal against it.

        Refused while memory is Off, so no automation path can read memory that recall withholds.
        """
        with self.db.read() as conn:
            admission = self._live_admission_for(conn, workspace_id, credential)
            if read_policy(conn, workspace_id).mode is Mode.OFF:
                raise CaptureRefused("Memory is Off for this workspace; nothing can be read or proposed.")
            version, _ = files.current_state(conn, workspace_id, MEMORY_PATH)
            opener = self.key_sessions.memory_opener(admission.key_session_id, workspace_id)
            base = self._current_base(conn, workspace_id, version)
            return version, _open_base(opener, workspace_id, version, base, conn)


def _request_hash(changes: Sequence[MemoryChange], expected_version: int) -> str:
    """What a replay must match: the turn's edits and the version they were made against."""
    body = json.dumps({"edits": edit_dicts(changes), "expected": expected_version}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


def _open_base(
    opener: sealing.Opener, workspace_id: str, version: int, base: bytes | None, conn: sqlite3.Connection
) -> str:
    """The memory text a capture applies its edits to, opened at its own version (a row copied
    from another version fails here). An old-format head still opens: it is the document's last
    text from before sealing v2, and the capture's new version starts its chain. `opener` is the
    key session's, which usually holds the head already (recall opened it); a head stored as a
    delta opens against the versions before it, read in the batch's own snapshot."""
    if base is None:
        return ""
    return opener(base, version, legacy=True, fetch=files.ciphertexts(conn, workspace_id, MEMORY_PATH))
