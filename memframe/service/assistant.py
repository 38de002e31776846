"""The Assistant's side of the contract: consent, key sessions, admissions, recall, capture.

Every authority an automatic action uses is minted here by the server:
ingress writes the admission (and the conversation's delivery credential) in
one transaction before the turn runs; recall reads the conversation's latest
credential before every model call; the only automatic writer commits behind
the fence. The model never supplies an admission id, a path or a credential.
It runs past 400 lines because a turn's steps (key session, admission, recall, receipt) read here
in the contract's order; capture, proposals and documents already live in modules of their own.
"""

from __future__ import annotations

import secrets
import sqlite3
from typing import NamedTuple

from memframe import sealing
from memframe.core.errors import (
    AIDisabled,
    DecryptionFailed,
    InvalidInput,
    KeySessionServiceDown,
    KeySessionUnavailable,
    NotFound,
)
from memframe.core.memory_state import MemoryState
from memframe.core.turns import AIConsent, KeySessionInfo, RecallResult, Receipt
from memframe.core.types import MEMORY_PATH, MEMORY_RECALL_MAX_BYTES, Mode, Policy, RecallStatus
from memframe.service import files, key_checks
from memframe.service.accounts import require_member
from memframe.service.admissions import (
    ADMISSION_COLUMNS,
    ADMISSION_SECONDS,
    Admission,
    admission_from_row,
    parse_credential,
    read_consent,
    require_credential_match,
    write_admission,
)
from memframe.service.capture import CaptureMixin
from memframe.service.documents import DocumentsMixin
from memframe.service.policy import read_policy
from memframe.service.proposals import ProposalsMixin
from memframe.service.transcript import TranscriptMixin


class AssistantService(CaptureMixin, ProposalsMixin, DocumentsMixin, TranscriptMixin):
    """Consent, key sessions, ingress and recall; capture, proposals and transcript live in mixins."""

    # --- AI consent ------------------------------------------------------------------------

    def ai_consent(self, user: str, workspace_id: str) -> AIConsent:
        with self.db.read() as conn:
            require_member(conn, user, workspace_id)
            return read_consent(conn, workspace_id)

    def set_ai(self, user: str, workspace_id: str, enabled: bool) -> AIConsent:
        """A change bumps the consent revision, which retires every admission taken before it."""
        with self.db.write() as conn:
            require_member(conn, user, workspace_id)
            current = read_consent(conn, workspace_id)
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

    def open_key_session(
        self, user: str, workspace_id: str, key: bytes, *, hold_seconds: float | None = None
    ) -> KeySessionInfo:
        """Accept a key only if it is proven against the workspace's key check (see `key_checks.prove`:
        on an older workspace the memory proves it, and only the owner's key then writes the check).
        A wrong key fails now, memory or not. `hold_seconds`: held that long whether used or not
        (`memframe key unlock`)."""
        if len(key) != sealing.KEY_BYTES:
            raise InvalidInput("A workspace key is 32 bytes.")
        mine = sealing.key_check(key, workspace_id)
        with self.db.read() as conn:  # the usual case, a check to match, writes nothing
            checked = key_checks.stored(conn, workspace_id) is not None
            if checked:
                key_checks.prove(conn, user, workspace_id, mine, lambda: None, self.db.clock())
        if not checked:  # an older workspace: the memory proves the key, and the owner's writes the check
            with self.db.write() as conn:

                def opens_memory() -> bool | None:
                    head = files.get_current(conn, workspace_id, MEMORY_PATH)
                    if head is None or head.ciphertext is None:
                        return None
                    try:  # a delta opens against its run, in the same snapshot
                        sealing.open_sealed(
                            key,
                            head.ciphertext,
                            workspace_id=workspace_id,
                            path=MEMORY_PATH,
                            version=head.info.version,
                            legacy=True,
                            fetch=files.ciphertexts(conn, workspace_id, MEMORY_PATH),
                        )
                    except DecryptionFailed:
                        return False
                    return True

                key_checks.prove(conn, user, workspace_id, mine, opens_memory, self.db.clock())
        if hold_seconds is None:
            return self.key_sessions.open(workspace_id, user, key)
        return self.key_sessions.open(workspace_id, user, key, hold_seconds=hold_seconds)

    def revoke_key_session(self, user: str, session_id: str) -> None:
        """Durable revocation row first (the fence reads it), then the key is forgotten."""
        info = self.key_sessions.describe(session_id)
        if info is None:
            raise NotFound("No such key session (it may have expired already).")
        with self.db.write() as conn:
            require_member(conn, user, info.workspace_id)
            if info.user_id != user:  # only its owner revokes it; to anyone else it does not exist
                raise NotFound("No such key session (it may have expired already).")
            conn.execute(
                "INSERT INTO key_session_revocations (key_session_id, workspace_id, revoked_at)"
                " VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (session_id, info.workspace_id, self.db.clock()),
            )
        self.key_sessions.forget(session_id)

    def live_key_session(self, user: str, workspace_id: str) -> str | None:
        """The live, unrevoked key session this person holds for this workspace that lasts longest
        (one `memframe key unlock` opened, or the frame's), or None: what a chat client's turn uses."""
        with self.db.read() as conn:
            require_member(conn, user, workspace_id)
        try:
            theirs = [sid for sid, _ in self.key_sessions.sessions_of(user, workspace_id)]
            live = [info for info in map(self.key_sessions.describe, theirs) if info is not None]
        except KeySessionServiceDown:
            return None  # no key is usable now: the turn is admitted without one and says why
        if live:
            with self.db.read() as conn:
                marks = ", ".join("?" * len(live))
                sql = f"SELECT key_session_id FROM key_session_revocations WHERE key_session_id IN ({marks})"
                revoked = {str(row[0]) for row in conn.execute(sql, [info.id for info in live])}
            live = [info for info in live if info.id not in revoked]
        return max(live, key=lambda info: info.expires_at).id if live else None

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
            consent = read_consent(conn, workspace_id)
            if not consent.enabled:
                raise AIDisabled("Workspace AI is off for this workspace; turn it on to talk to the Assistant.")
            conversation_id = self._claim_conversation(conn, user, workspace_id, conversation_id, now)
            row = conn.execute(
                f"SELECT {ADMISSION_COLUMNS} FROM workspace_memory_admissions"
                " WHERE conversation_id = ? AND idempotency_key = ?",
                (conversation_id, idempotency_key),
            ).fetchone()
            if row is not None:
                return admission_from_row(row)
            if key_session_id is not None:
                self._check_key_session(conn, user, workspace_id, key_session_id)
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
            write_admission(conn, admission, idempotency_key)
            return admission

    def _check_key_session(self, conn: sqlite3.Connection, user: str, workspace_id: str, session_id: str) -> None:
        """The X-Key-Session a send names must exist, be live and unrevoked, and be this
        workspace's and this person's; otherwise nothing is admitted (the transaction rolls back).

        Every way of failing gets the same answer, KeySessionUnavailable with `admission_refused`,
        so another person's live session is indistinguishable from a dead one, and the client may
        open a fresh session of its own and send the same message again.
        """
        try:
            info = self.key_sessions.describe(session_id)
        except KeySessionServiceDown:  # nothing admitted: the client may try again, and hears why
            raise KeySessionServiceDown(
                "The key-session service cannot be reached; nothing was admitted (Saves still work).",
                admission_refused=True,
            ) from None
        revoked = conn.execute(
            "SELECT 1 FROM key_session_revocations WHERE key_session_id = ?", (session_id,)
        ).fetchone()
        if info is None or revoked is not None or (info.workspace_id, info.user_id) != (workspace_id, user):
            raise KeySessionUnavailable(
                "The key session is closed, expired or unknown; nothing was admitted. Open a new one and send again.",
                admission_refused=True,
            )

    @staticmethod
    def _claim_conversation(
        conn: sqlite3.Connection, user: str, workspace_id: str, conversation_id: str, now: float
    ) -> str:
        """The internal key of this person's conversation `conversation_id` in this workspace, made
        on first use. The client's id is the key when no other conversation has it; otherwise a
        fresh one is minted, so an id taken elsewhere neither blocks this send nor reveals anything."""
        if not conversation_id or len(conversation_id) > 100 or not conversation_id.isprintable():
            raise InvalidInput("A conversation id is 1 to 100 printable characters.")
        row = conn.execute(
            "SELECT id FROM conversations WHERE workspace_id = ? AND user_id = ? AND client_id = ?",
            (workspace_id, user, conversation_id),
        ).fetchone()
        if row is not None:
            return str(row[0])
        taken = conn.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
        internal = conversation_id if taken is None else f"{conversation_id}~{secrets.token_hex(8)}"
        conn.execute(
            "INSERT INTO conversations (id, workspace_id, user_id, client_id, created_at) VALUES (?, ?, ?, ?, ?)",
            (internal, workspace_id, user, conversation_id, now),
        )
        return internal

    # --- recall ----------------------------------------------------------------------------

    def recall(self, workspace_id: str, credential: str) -> RecallResult:
        """What the next model call may see, judged now, and recorded as a receipt.

        Reads the current policy and document (so a Save, Clear or Off reaches the
        very next call), never an older copy: anything doubtful withholds with a reason.
        Everything is judged from one snapshot read in one statement, since recall runs
        before every model call. In order: snapshot, judge, resolve the key session (asked
        of the store now, never cached), open, receipt; `recall_awaiting_key` is the same
        recall with the resolve awaited.
        """
        judged = self.judge_recall(workspace_id, credential)
        opener = self._recall_opener(judged) if judged.needs_key else None
        return self.finish_recall(judged, opener)

    async def recall_awaiting_key(self, workspace_id: str, credential: str) -> RecallResult:
        """`recall` for a caller on an event loop where reads are local (SQLite): the snapshot and
        judgement run here, the key session's resolve is awaited (a round trip to a key-session
        service lets the loop serve other requests meanwhile, and several recalls' resolves share
        one of its wake-ups), then the open and the receipt run here too. Same order, same
        statuses and receipts as `recall`."""
        judged = self.judge_recall(workspace_id, credential)
        opener = await self._recall_opener_async(judged) if judged.needs_key else None
        return self.finish_recall(judged, opener)

    def judge_recall(self, workspace_id: str, credential: str) -> JudgedRecall:
        """The snapshot (one statement) and what it allows, before any key is asked for; a wrong or
        stale credential is refused here."""
        admission_id, presented = parse_credential(credential)  # a malformed one is refused before any read
        row = self.db.read_row(_RECALL_SNAPSHOT, (MEMORY_PATH, admission_id))
        if row is None:
            require_credential_match(None, None, presented, workspace_id)
        s = _RecallSnapshot(admission_id, *row)
        require_credential_match(s.nonce, s.workspace_id, presented, workspace_id)
        now = self.db.clock()
        return JudgedRecall(s, self._judge_recall(s, now), now)

    def finish_recall(self, judged: JudgedRecall, opener: sealing.Opener | None) -> RecallResult:
        """Open the memory under `opener` when the judgement needs the key (None: the key session
        is unavailable, so recall withholds), then record the receipt."""
        result = judged.result
        if judged.needs_key:
            result = self._open_for_recall(judged.snapshot, result, opener)
        self._record_receipt(judged.snapshot, result, judged.now)
        return result

    def _recall_opener(self, judged: JudgedRecall) -> sealing.Opener | None:
        try:
            return self.key_sessions.memory_opener(judged.snapshot.key_session_id, judged.snapshot.workspace_id)
        except KeySessionUnavailable:  # KeySessionServiceDown included: recall withholds
            return None

    async def _recall_opener_async(self, judged: JudgedRecall) -> sealing.Opener | None:
        s = judged.snapshot
        try:
            return await self.key_sessions.memory_opener_async(s.key_session_id, s.workspace_id)
        except KeySessionUnavailable:  # KeySessionServiceDown included: recall withholds
            return None

    @staticmethod
    def _judge_recall(s: _RecallSnapshot, now: float) -> RecallResult:
        if s.slot_expires_at is None or s.slot_admission != s.admission_id or s.slot_nonce != s.nonce:
            return RecallResult(RecallStatus.SUPERSEDED, None)  # no slot, or a newer turn's
        if not s.member or not s.ai_enabled:
            return RecallResult(RecallStatus.NO_ACCESS, None)
        if now >= s.slot_expires_at:
            return RecallResult(RecallStatus.UNAVAILABLE, None)
        if (s.mode or _DEFAULT_MODE) == _OFF:
            return RecallResult(RecallStatus.OFF, None)
        version = s.version or 0
        if s.deleted:
            return RecallResult(RecallStatus.DELETED, version)
        state = MemoryState.parse(s.client_memory_state)
        if state is not None and state.kind == "pending":
            return RecallResult(RecallStatus.PENDING, version)
        if state is not None and state.kind == "conflict":
            return RecallResult(RecallStatus.CONFLICT, version)
        if state is not None and state.kind == "saved" and version < (state.version or 0):
            return RecallResult(RecallStatus.STALE, version)
        if version == 0:
            return RecallResult(RecallStatus.EMPTY, 0)
        if s.size > MEMORY_RECALL_MAX_BYTES:  # metadata: an oversized text is never decrypted
            return RecallResult(RecallStatus.OVERSIZED, version)
        if s.size == 0:
            return RecallResult(RecallStatus.EMPTY, version)
        return RecallResult(RecallStatus.PROVIDED, version, text=None)

    def _open_for_recall(
        self, s: _RecallSnapshot, judged: RecallResult, open_memory: sealing.Opener | None
    ) -> RecallResult:
        if open_memory is None:
            return RecallResult(RecallStatus.UNAVAILABLE, judged.revision)
        try:
            fetch = files.keyframe_runs(self.db.read, s.workspace_id, MEMORY_PATH)  # read only on a miss
            text = open_memory(s.ciphertext or b"", judged.revision or 0, legacy=True, fetch=fetch)
        except DecryptionFailed:
            return RecallResult(RecallStatus.UNAVAILABLE, judged.revision)
        if not text.strip():
            return RecallResult(RecallStatus.EMPTY, judged.revision)
        return RecallResult(RecallStatus.PROVIDED, judged.revision, text)

    def _record_receipt(self, s: _RecallSnapshot, result: RecallResult, now: float) -> None:
        """Queued, not awaited: it commits before anything this process writes after it (an
        answer, a capture, a transcript) and within milliseconds otherwise; see `write_soon`."""
        status, revision = result.status.value, result.revision
        a, conversation = s.admission_id, s.conversation_id
        # The admission row's recall status and revision follow from it (a trigger, migration 0051).
        self.db.write_soon("memory_recall_receipts", _RECEIPT_COLUMNS, (a, conversation, status, revision, now))

    def receipts(self, user: str, conversation_id: str, workspace_id: str | None = None) -> list[Receipt]:
        """Ids, versions and statuses of every recall in a conversation; never text."""
        self.db.flush()  # receipts still queued by recalls in this process are shown too
        with self.db.read() as conn:
            conversation_id = self._owned_conversation(conn, user, conversation_id, workspace_id)
            return [
                Receipt(r[0], int(r[1]), RecallStatus(r[2]), r[3], float(r[4]))
                for r in conn.execute(
                    # Numbered here: the index of each call among its admission's recalls.
                    "SELECT admission_id, ROW_NUMBER() OVER (PARTITION BY admission_id ORDER BY id) - 1,"
                    " status, revision, created_at FROM memory_recall_receipts WHERE conversation_id = ? ORDER BY id",
                    (conversation_id,),
                )
            ]


#: Everything recall judges, in one statement: the admission, the conversation's credential
#: slot, membership, consent, policy, and the memory's head (its size and ciphertext).
_RECALL_SNAPSHOT = """
SELECT a.conversation_id, a.workspace_id, a.key_session_id, a.client_memory_state, a.credential_nonce,
       s.admission_id, s.credential_nonce, s.expires_at, m.user_id IS NOT NULL, COALESCE(c.enabled, 0), p.mode,
       f.current_version, COALESCE(f.deleted, 0), COALESCE(v.size, 0), v.ciphertext
FROM workspace_memory_admissions AS a
LEFT JOIN agent_delivery_credentials AS s ON s.conversation_id = a.conversation_id
LEFT JOIN memberships AS m ON m.workspace_id = a.workspace_id AND m.user_id = a.user_id
LEFT JOIN workspace_ai_consent AS c ON c.workspace_id = a.workspace_id
LEFT JOIN workspace_memory_policy AS p ON p.workspace_id = a.workspace_id
LEFT JOIN files AS f ON f.workspace_id = a.workspace_id AND f.path = ?
LEFT JOIN file_versions AS v ON v.workspace_id = f.workspace_id AND v.path = f.path AND v.version = f.current_version
WHERE a.id = ?
"""


_DEFAULT_MODE = Policy().mode.value  # the mode of a workspace with no policy row yet
_OFF = Mode.OFF.value


class _RecallSnapshot(NamedTuple):
    admission_id: str
    conversation_id: str
    workspace_id: str
    key_session_id: str | None
    client_memory_state: str | None
    nonce: str
    slot_admission: str | None
    slot_nonce: str | None
    slot_expires_at: float | None
    member: int
    ai_enabled: int
    mode: str | None  # None: no policy row yet, the default mode
    version: int | None  # None: never created
    deleted: int
    size: int
    ciphertext: bytes | None


_RECEIPT_COLUMNS = ("admission_id", "conversation_id", "status", "revision", "created_at")


class JudgedRecall(NamedTuple):
    """A recall between its judgement and its open: the snapshot, what it allows, and when."""

    snapshot: _RecallSnapshot
    result: RecallResult
    now: float

    @property
    def needs_key(self) -> bool:
        """Whether the memory must be opened under the conversation's key session."""
        return bool(self.result.revision) and self.result.status in (RecallStatus.PROVIDED, RecallStatus.EMPTY)
