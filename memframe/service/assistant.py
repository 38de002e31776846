"""The Assistant's side of the contract: consent, key sessions, admissions, recall, capture.

Every authority an automatic action uses is minted here by the server:
ingress writes the admission (and the conversation's delivery credential) in
one transaction before the turn runs; recall reads the conversation's latest
credential before every model call; the only automatic writer commits behind
the fence. The model never supplies an admission id, a path or a credential.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memframe import crypto
from memframe.core.edits import MemoryChange, apply_memory_changes
from memframe.core.errors import (
    CaptureRefused,
    DecryptionFailed,
    FenceRefused,
    InvalidInput,
    NotFound,
    Unauthorized,
    VersionConflict,
)
from memframe.core.memory_state import MemoryState
from memframe.core.paths import proposal_path, transcript_path
from memframe.core.turns import AIConsent, KeySessionInfo, ProposalRecord, Receipt
from memframe.core.types import (
    MEMORY_PATH,
    MEMORY_RECALL_MAX_BYTES,
    Author,
    Mode,
    Operation,
    RecallStatus,
    VersionInfo,
)
from memframe.service import files
from memframe.service.accounts import Accounts, require_member
from memframe.service.db import Database
from memframe.service.fence import FENCE_INSERT, failed_predicates
from memframe.service.keysessions import KeySessions, KeySessionUnavailable
from memframe.service.policy import read_policy

ADMISSION_SECONDS = 15 * 60
CREDENTIAL_PREFIX = "cred_"


@dataclass(frozen=True)
class Admission:
    """The authority one Assistant send was admitted under, frozen at ingress."""

    id: str
    conversation_id: str
    workspace_id: str
    user_id: str
    mode: Mode
    policy_revision: int
    clear_generation: int
    ai_consent_revision: int
    key_session_id: str | None
    client_memory_state: str | None
    credential_nonce: str
    created_at: float
    expires_at: float

    @property
    def credential(self) -> str:
        """The delivery credential the runtime presents to the automation routes."""
        return f"{CREDENTIAL_PREFIX}{self.id}.{self.credential_nonce}"


@dataclass(frozen=True)
class RecallResult:
    """What one model call may see: the text only when the status is PROVIDED."""

    status: RecallStatus
    revision: int | None
    text: str | None = None


@dataclass(frozen=True)
class CaptureReceipt:
    """A committed automatic change: the exact version and whether this was a replay."""

    admission_id: str
    version: VersionInfo
    replayed: bool = False


def parse_credential(credential: str | None) -> tuple[str, str]:
    """(admission id, nonce) from a presented credential; anything else is Unauthorized."""
    if not credential or not credential.startswith(CREDENTIAL_PREFIX) or "." not in credential:
        raise Unauthorized("A delivery credential is required.")
    admission_id, _, nonce = credential[len(CREDENTIAL_PREFIX) :].partition(".")
    if not admission_id or not nonce:
        raise Unauthorized("The delivery credential is not valid.")
    return admission_id, nonce


_ADMISSION_COLUMNS = (
    "id, conversation_id, workspace_id, user_id, mode, policy_revision, clear_generation,"
    " ai_consent_revision, key_session_id, client_memory_state, credential_nonce, created_at, expires_at"
)


def _admission(row: Sequence[object]) -> Admission:
    values = list(row)
    values[4] = Mode(values[4])
    return Admission(*values)  # type: ignore[arg-type]


class AssistantService:
    def __init__(self, db: Database, accounts: Accounts, key_sessions: KeySessions) -> None:
        self.db = db
        self.accounts = accounts
        self.key_sessions = key_sessions
        #: Test seam: runs after the key session is revalidated, immediately before the batch.
        self.before_fence_batch: Callable[[], None] | None = None

    # --- AI consent ------------------------------------------------------------------------

    def ai_consent(self, user: str, workspace_id: str) -> AIConsent:
        with self.db.read() as conn:
            require_member(conn, user, workspace_id)
            return _read_consent(conn, workspace_id)

    def set_ai(self, user: str, workspace_id: str, enabled: bool) -> AIConsent:
        """A change bumps the consent revision, which retires every admission taken before it."""
        with self.db.write() as conn:
            require_member(conn, user, workspace_id)
            current = _read_consent(conn, workspace_id)
            if current.enabled == enabled:
                return current
            conn.execute(
                "INSERT INTO workspace_ai_consent (workspace_id, enabled, consent_revision) VALUES (?, ?, ?)"
                " ON CONFLICT (workspace_id) DO UPDATE SET enabled = excluded.enabled,"
                " consent_revision = excluded.consent_revision",
                (workspace_id, int(enabled), current.revision + 1),
            )
            return AIConsent(enabled, current.revision + 1)

    # --- key sessions ----------------------------------------------------------------------

    def open_key_session(self, user: str, workspace_id: str, key: bytes) -> KeySessionInfo:
        """Accept a key only if it opens the workspace's memory, so a wrong key fails now, not later."""
        if len(key) != crypto.KEY_BYTES:
            raise InvalidInput("A workspace key is 32 bytes.")
        with self.db.read() as conn:
            require_member(conn, user, workspace_id)
            head = files.get_current(conn, workspace_id, MEMORY_PATH)
        if head is not None and head.ciphertext is not None:
            try:
                crypto.open_sealed(key, head.ciphertext, workspace_id=workspace_id, path=MEMORY_PATH)
            except DecryptionFailed:
                raise DecryptionFailed("This key does not open the workspace's memory.") from None
        return self.key_sessions.open(workspace_id, user, key)

    def revoke_key_session(self, user: str, session_id: str) -> None:
        """Durable revocation row first (the fence reads it), then the key is forgotten."""
        info = self.key_sessions.describe(session_id)
        if info is None:
            raise NotFound("No such key session (it may have expired already).")
        with self.db.write() as conn:
            require_member(conn, user, info.workspace_id)
            conn.execute(
                "INSERT OR IGNORE INTO key_session_revocations (key_session_id, workspace_id, revoked_at)"
                " VALUES (?, ?, ?)",
                (session_id, info.workspace_id, self.db.clock()),
            )
        self.key_sessions.forget(session_id)

    # --- ingress ---------------------------------------------------------------------------

    def admit(
        self,
        user: str,
        workspace_id: str,
        conversation_id: str,
        *,
        idempotency_key: str,
        key_session_id: str | None,
        memory_state: str | None,
    ) -> Admission:
        """Write the admission and the conversation's credential before the turn runs.

        A resend with the same idempotency key returns the original admission and nonce.
        """
        if not idempotency_key or len(idempotency_key) > 200:
            raise InvalidInput("An idempotency key of 1 to 200 characters is required.")
        state = MemoryState.parse(memory_state)
        if memory_state is not None and state is None:
            raise InvalidInput("X-Memory-State is not one of: none, pending, saved; version=N, conflict; version=N.")
        now = self.db.clock()
        with self.db.write() as conn:
            require_member(conn, user, workspace_id)
            consent = _read_consent(conn, workspace_id)
            if not consent.enabled:
                raise CaptureRefused("Workspace AI is off for this workspace; turn it on to talk to the Assistant.")
            self._claim_conversation(conn, user, workspace_id, conversation_id, now)
            row = conn.execute(
                f"SELECT {_ADMISSION_COLUMNS} FROM workspace_memory_admissions"
                " WHERE conversation_id = ? AND idempotency_key = ?",
                (conversation_id, idempotency_key),
            ).fetchone()
            if row is not None:
                return _admission(row)
            policy = read_policy(conn, workspace_id)
            admission = Admission(
                id="adm_" + secrets.token_hex(12),
                conversation_id=conversation_id,
                workspace_id=workspace_id,
                user_id=user,
                mode=policy.mode,
                policy_revision=policy.revision,
                clear_generation=policy.clear_generation,
                ai_consent_revision=consent.revision,
                key_session_id=key_session_id,
                client_memory_state=None if state is None else state.header(),
                credential_nonce=secrets.token_urlsafe(24),
                created_at=now,
                expires_at=now + ADMISSION_SECONDS,
            )
            conn.execute(
                f"INSERT INTO workspace_memory_admissions ({_ADMISSION_COLUMNS}, idempotency_key)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    admission.id,
                    conversation_id,
                    workspace_id,
                    user,
                    policy.mode.value,
                    policy.revision,
                    policy.clear_generation,
                    consent.revision,
                    key_session_id,
                    admission.client_memory_state,
                    admission.credential_nonce,
                    now,
                    admission.expires_at,
                    idempotency_key,
                ),
            )
            conn.execute(
                "INSERT INTO agent_delivery_credentials (conversation_id, admission_id, credential_nonce,"
                " expires_at) VALUES (?, ?, ?, ?) ON CONFLICT (conversation_id) DO UPDATE SET"
                " admission_id = excluded.admission_id, credential_nonce = excluded.credential_nonce,"
                " expires_at = excluded.expires_at",
                (conversation_id, admission.id, admission.credential_nonce, admission.expires_at),
            )
            return admission

    @staticmethod
    def _claim_conversation(
        conn: sqlite3.Connection, user: str, workspace_id: str, conversation_id: str, now: float
    ) -> None:
        if not conversation_id or len(conversation_id) > 100 or not conversation_id.isprintable():
            raise InvalidInput("A conversation id is 1 to 100 printable characters.")
        row = conn.execute(
            "SELECT workspace_id, user_id FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO conversations (id, workspace_id, user_id, created_at) VALUES (?, ?, ?, ?)",
                (conversation_id, workspace_id, user, now),
            )
        elif tuple(row) != (workspace_id, user):
            raise NotFound("No such conversation.")

    def _admission_for(self, conn: sqlite3.Connection, workspace_id: str, credential: str) -> Admission:
        admission_id, nonce = parse_credential(credential)
        row = conn.execute(
            f"SELECT {_ADMISSION_COLUMNS} FROM workspace_memory_admissions WHERE id = ?", (admission_id,)
        ).fetchone()
        if row is None:
            raise Unauthorized("The delivery credential is not valid.")
        admission = _admission(row)
        if not secrets.compare_digest(admission.credential_nonce, nonce) or admission.workspace_id != workspace_id:
            raise Unauthorized("The delivery credential is not valid.")
        return admission

    # --- recall ----------------------------------------------------------------------------

    def recall(self, workspace_id: str, credential: str) -> RecallResult:
        """What the next model call may see, judged now, and recorded as a receipt.

        Reads the current policy and document (so a Save, Clear or Off reaches the
        very next call), never an older copy: anything doubtful withholds with a reason.
        """
        with self.db.read() as conn:
            admission = self._admission_for(conn, workspace_id, credential)
            result = self._judge_recall(conn, admission)
        if result.status is RecallStatus.PROVIDED or result.status is RecallStatus.EMPTY:
            result = self._open_for_recall(admission, result)
        self._record_receipt(admission, result)
        return result

    def _judge_recall(self, conn: sqlite3.Connection, a: Admission) -> RecallResult:
        now = self.db.clock()
        slot = conn.execute(
            "SELECT admission_id, credential_nonce, expires_at FROM agent_delivery_credentials"
            " WHERE conversation_id = ?",
            (a.conversation_id,),
        ).fetchone()
        if slot is None or slot[0] != a.id or slot[1] != a.credential_nonce:
            return RecallResult(RecallStatus.SUPERSEDED, None)
        member = conn.execute(
            "SELECT 1 FROM memberships WHERE workspace_id = ? AND user_id = ?", (a.workspace_id, a.user_id)
        ).fetchone()
        if member is None or not _read_consent(conn, a.workspace_id).enabled:
            return RecallResult(RecallStatus.NO_ACCESS, None)
        if now >= slot[2]:
            return RecallResult(RecallStatus.UNAVAILABLE, None)
        if read_policy(conn, a.workspace_id).mode is Mode.OFF:
            return RecallResult(RecallStatus.OFF, None)
        version, deleted = files.current_state(conn, a.workspace_id, MEMORY_PATH)
        if deleted:
            return RecallResult(RecallStatus.DELETED, version)
        state = MemoryState.parse(a.client_memory_state)
        if state is not None and state.kind == "pending":
            return RecallResult(RecallStatus.PENDING, version)
        if state is not None and state.kind == "conflict":
            return RecallResult(RecallStatus.CONFLICT, version)
        if state is not None and state.kind == "saved" and version < (state.version or 0):
            return RecallResult(RecallStatus.STALE, version)
        if version == 0:
            return RecallResult(RecallStatus.EMPTY, 0)
        head = files.get_version(conn, a.workspace_id, MEMORY_PATH, version)
        if head.info.size > MEMORY_RECALL_MAX_BYTES:
            return RecallResult(RecallStatus.OVERSIZED, version)
        if head.info.size == 0:
            return RecallResult(RecallStatus.EMPTY, version)
        return RecallResult(RecallStatus.PROVIDED, version, text=None)

    def _open_for_recall(self, a: Admission, judged: RecallResult) -> RecallResult:
        if judged.revision == 0 or judged.revision is None:
            return judged
        try:
            key = self.key_sessions.resolve(a.key_session_id, a.workspace_id)
        except KeySessionUnavailable:
            return RecallResult(RecallStatus.UNAVAILABLE, judged.revision)
        with self.db.read() as conn:
            head = files.get_version(conn, a.workspace_id, MEMORY_PATH, judged.revision)
        try:
            text = crypto.open_sealed(key, head.ciphertext or b"", workspace_id=a.workspace_id, path=MEMORY_PATH)
        except DecryptionFailed:
            return RecallResult(RecallStatus.UNAVAILABLE, judged.revision)
        if not text.strip():
            return RecallResult(RecallStatus.EMPTY, judged.revision)
        return RecallResult(RecallStatus.PROVIDED, judged.revision, text)

    def _record_receipt(self, a: Admission, result: RecallResult) -> None:
        with self.db.write() as conn:
            call_index = conn.execute(
                "SELECT COUNT(*) FROM memory_recall_receipts WHERE admission_id = ?", (a.id,)
            ).fetchone()[0]
            conn.execute(
                "INSERT INTO memory_recall_receipts (admission_id, conversation_id, call_index, status,"
                " revision, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (a.id, a.conversation_id, call_index, result.status.value, result.revision, self.db.clock()),
            )
            conn.execute(
                "UPDATE workspace_memory_admissions SET recall_status = ?, recall_revision = ? WHERE id = ?",
                (result.status.value, result.revision, a.id),
            )

    def receipts(self, user: str, conversation_id: str) -> list[Receipt]:
        """Ids, versions and statuses of every recall in a conversation; never text."""
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT workspace_id, user_id FROM conversations WHERE id = ?", (conversation_id,)
            ).fetchone()
            if row is None or row[1] != user:
                raise NotFound("No such conversation.")
            require_member(conn, user, row[0])
            return [
                Receipt(r[0], int(r[1]), RecallStatus(r[2]), r[3], float(r[4]))
                for r in conn.execute(
                    "SELECT admission_id, call_index, status, revision, created_at FROM memory_recall_receipts"
                    " WHERE conversation_id = ? ORDER BY id",
                    (conversation_id,),
                )
            ]

    # --- capture ---------------------------------------------------------------------------

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
        request_hash = _request_hash(changes, expected_version)
        with self.db.read() as conn:
            admission = self._admission_for(conn, workspace_id, credential)
            if idempotency_key != f"memory:{admission.id}":
                raise InvalidInput("The Idempotency-Key must be memory:<admissionId> of this turn.")
            replay = self._replay(conn, admission, request_hash)
            if replay is not None:
                return replay
        key = self.key_sessions.resolve(key_session_id, workspace_id)
        base_text = self._text_at(key, workspace_id, expected_version)
        new_text = apply_memory_changes(base_text, list(changes))
        blob = crypto.seal(key, new_text, workspace_id=workspace_id, path=MEMORY_PATH)
        # Revalidate the key session immediately before the batch: the durable revocation
        # row is read by the predicate itself; this catches an eviction since resolution.
        self.key_sessions.resolve(key_session_id, workspace_id)
        if self.before_fence_batch is not None:
            self.before_fence_batch()
        now = self.db.clock()
        params = {
            "admission_id": admission.id,
            "ws": workspace_id,
            "now": now,
            "nonce": admission.credential_nonce,
            "key_session": key_session_id,
        }
        try:
            with self.db.write() as conn:
                version = files.check_base(conn, workspace_id, MEMORY_PATH, expected_version)
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
                conn.execute(FENCE_INSERT, {**params, "version": version})
                if conn.execute(
                    "SELECT ok FROM workspace_memory_commit_fence WHERE admission_id = ? AND version = ?",
                    (admission.id, version),
                ).fetchone() != (1,):
                    raise sqlite3.IntegrityError("fence row missing")
                marked = conn.execute(
                    "UPDATE workspace_memory_admissions SET consumed_at = ?, committed_version = ?,"
                    " commit_request_hash = ? WHERE id = ? AND consumed_at IS NULL",
                    (now, version, request_hash, admission.id),
                )
                if marked.rowcount != 1:
                    raise sqlite3.IntegrityError("admission already consumed")
        except sqlite3.IntegrityError:
            with self.db.read() as conn:
                reasons = failed_predicates(conn, params) or ["the fence did not hold"]
            raise FenceRefused(
                "Memory was not changed: " + "; ".join(f"not true that {r}" for r in reasons) + ".",
                reasons=reasons,
            ) from None
        return CaptureReceipt(admission.id, info)

    def _replay(self, conn: sqlite3.Connection, a: Admission, request_hash: str) -> CaptureReceipt | None:
        row = conn.execute(
            "SELECT committed_version, commit_request_hash FROM workspace_memory_admissions WHERE id = ?",
            (a.id,),
        ).fetchone()
        if row is None or row[0] is None:
            return None
        if row[1] != request_hash:
            raise CaptureRefused("This turn has already changed memory once; a further change needs a new message.")
        version = files.get_version(conn, a.workspace_id, MEMORY_PATH, int(row[0]))
        return CaptureReceipt(a.id, version.info, replayed=True)

    def _text_at(self, key: bytes, workspace_id: str, version: int) -> str:
        if version == 0:
            return ""
        with self.db.read() as conn:
            try:
                stored = files.get_version(conn, workspace_id, MEMORY_PATH, version)
            except NotFound:
                raise VersionConflict(files.current_state(conn, workspace_id, MEMORY_PATH)[0]) from None
        if stored.ciphertext is None:
            raise CaptureRefused("The memory was deleted; nothing was written.")
        return crypto.open_sealed(key, stored.ciphertext, workspace_id=workspace_id, path=MEMORY_PATH)

    def current_memory(self, workspace_id: str, credential: str) -> tuple[int, str]:
        """The current version and text, for turning a refused capture into a proposal against it."""
        with self.db.read() as conn:
            admission = self._admission_for(conn, workspace_id, credential)
            version, _ = files.current_state(conn, workspace_id, MEMORY_PATH)
        key = self.key_sessions.resolve(admission.key_session_id, workspace_id)
        return version, self._text_at(key, workspace_id, version)

    # --- proposals -------------------------------------------------------------------------

    def propose(
        self,
        workspace_id: str,
        credential: str,
        *,
        changes: Sequence[MemoryChange],
        base_version: int,
        reason: str,
    ) -> ProposalRecord:
        """A reviewable change for a person: sealed, tagged with the generation it was made under."""
        with self.db.read() as conn:
            admission = self._admission_for(conn, workspace_id, credential)
        if admission.mode is Mode.OFF:
            raise CaptureRefused("Memory is Off; the Assistant proposes nothing.")
        key = self.key_sessions.resolve(admission.key_session_id, workspace_id)
        proposal_id = "prop_" + secrets.token_hex(8)
        sealed = crypto.seal(key, _edits_json(changes), workspace_id=workspace_id, path=proposal_path(proposal_id))
        now = self.db.clock()
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO workspace_memory_proposals (id, workspace_id, admission_id, base_version,"
                " clear_generation, reason, sealed_edits, status, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?)",
                (
                    proposal_id,
                    workspace_id,
                    admission.id,
                    base_version,
                    admission.clear_generation,
                    reason,
                    sealed,
                    now,
                ),
            )
        return ProposalRecord(
            proposal_id,
            workspace_id,
            admission.id,
            base_version,
            admission.clear_generation,
            reason,
            sealed,
            "pending",
            now,
        )

    def proposals(self, user: str, workspace_id: str, *, status: str = "pending") -> list[ProposalRecord]:
        with self.db.read() as conn:
            require_member(conn, user, workspace_id)
            return [
                ProposalRecord(*row)
                for row in conn.execute(
                    "SELECT id, workspace_id, admission_id, base_version, clear_generation, reason,"
                    " sealed_edits, status, created_at FROM workspace_memory_proposals"
                    " WHERE workspace_id = ? AND status = ? ORDER BY created_at, id",
                    (workspace_id, status),
                )
            ]

    def resolve_proposal(self, user: str, workspace_id: str, proposal_id: str, status: str) -> None:
        """A person marks a proposal applied (after their own Save) or dismissed."""
        if status not in ("applied", "dismissed"):
            raise InvalidInput("A proposal is resolved as applied or dismissed.")
        with self.db.write() as conn:
            require_member(conn, user, workspace_id)
            cur = conn.execute(
                "UPDATE workspace_memory_proposals SET status = ?, resolved_at = ?"
                " WHERE id = ? AND workspace_id = ? AND status = 'pending'",
                (status, self.db.clock(), proposal_id, workspace_id),
            )
            if cur.rowcount != 1:
                raise NotFound("No such pending proposal.")

    # --- transcript ------------------------------------------------------------------------

    def append_transcript(self, workspace_id: str, credential: str, role: str, content: str) -> None:
        """People's messages and final answers only, sealed: recall blocks never reach here."""
        with self.db.read() as conn:
            admission = self._admission_for(conn, workspace_id, credential)
        key = self.key_sessions.resolve(admission.key_session_id, workspace_id)
        sealed = crypto.seal(key, content, workspace_id=workspace_id, path=transcript_path(admission.conversation_id))
        with self.db.write() as conn:
            seq = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM conversation_messages WHERE conversation_id = ?",
                (admission.conversation_id,),
            ).fetchone()[0]
            conn.execute(
                "INSERT INTO conversation_messages (conversation_id, seq, role, admission_id,"
                " sealed_content, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (admission.conversation_id, seq, role, admission.id, sealed, self.db.clock()),
            )

    def transcript(self, user: str, conversation_id: str) -> list[tuple[str, bytes]]:
        """(role, sealed content) in order; the client opens them with its key."""
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT workspace_id, user_id FROM conversations WHERE id = ?", (conversation_id,)
            ).fetchone()
            if row is None or row[1] != user:
                raise NotFound("No such conversation.")
            require_member(conn, user, row[0])
            return [
                (str(r[0]), bytes(r[1]))
                for r in conn.execute(
                    "SELECT role, sealed_content FROM conversation_messages WHERE conversation_id = ? ORDER BY seq",
                    (conversation_id,),
                )
            ]

    def conversation_history(self, workspace_id: str, credential: str) -> list[tuple[str, str]]:
        """The runtime's view of earlier messages in this conversation, opened with the key session."""
        with self.db.read() as conn:
            admission = self._admission_for(conn, workspace_id, credential)
            rows = conn.execute(
                "SELECT role, sealed_content FROM conversation_messages WHERE conversation_id = ? ORDER BY seq",
                (admission.conversation_id,),
            ).fetchall()
        key = self.key_sessions.resolve(admission.key_session_id, workspace_id)
        path = transcript_path(admission.conversation_id)
        return [(r[0], crypto.open_sealed(key, bytes(r[1]), workspace_id=workspace_id, path=path)) for r in rows]


def _read_consent(conn: sqlite3.Connection, workspace_id: str) -> AIConsent:
    row = conn.execute(
        "SELECT enabled, consent_revision FROM workspace_ai_consent WHERE workspace_id = ?", (workspace_id,)
    ).fetchone()
    return AIConsent() if row is None else AIConsent(bool(row[0]), int(row[1]))


def _edits_json(changes: Sequence[MemoryChange]) -> str:
    return json.dumps(
        [
            {
                k: v
                for k, v in (("op", c.op), ("line", c.line), ("new_line", c.new_line), ("heading", c.heading))
                if v is not None
            }
            for c in changes
        ],
        ensure_ascii=False,
        sort_keys=True,
    )


def _request_hash(changes: Sequence[MemoryChange], expected_version: int) -> str:
    body = json.dumps({"edits": json.loads(_edits_json(changes)), "expected": expected_version}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


__all__ = [
    "AIConsent",
    "Admission",
    "AssistantService",
    "CaptureReceipt",
    "ProposalRecord",
    "RecallResult",
    "Receipt",
    "parse_credential",
]
