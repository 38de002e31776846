"""Admissions and delivery credentials: the authority a turn was admitted under.

Ingress freezes the mode, policy revision, Clear generation, consent revision
and key session of a send in one row, and writes a fresh nonce into the
conversation's credential slot in the same transaction. Every automation call
presents the resulting credential; the model never sees or supplies it.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from memframe.core.errors import InvalidInput, NotFound, Unauthorized
from memframe.core.turns import AIConsent
from memframe.core.types import Mode
from memframe.keysessions.store import KeySessionStore
from memframe.service.accounts import Accounts, require_member
from memframe.service.db import Database

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
    credential_nonce: str = field(repr=False)  # the secret half of the delivery credential
    created_at: float
    expires_at: float

    @property
    def credential(self) -> str:
        """The delivery credential the runtime presents to the automation routes."""
        return f"{CREDENTIAL_PREFIX}{self.id}.{self.credential_nonce}"


def parse_credential(credential: str | None) -> tuple[str, str]:
    """(admission id, nonce) from a presented credential; anything else is Unauthorized."""
    if not credential or not credential.startswith(CREDENTIAL_PREFIX) or "." not in credential:
        raise Unauthorized("A delivery credential is required.")
    admission_id, _, nonce = credential[len(CREDENTIAL_PREFIX) :].partition(".")
    if not admission_id or not nonce:
        raise Unauthorized("The delivery credential is not valid.")
    return admission_id, nonce


ADMISSION_COLUMNS = (
    "id, conversation_id, workspace_id, user_id, mode, policy_revision, clear_generation,"
    " ai_consent_revision, key_session_id, client_memory_state, credential_nonce, created_at, expires_at"
)


def admission_from_row(row: Sequence[Any]) -> Admission:
    values = list(row)
    values[4] = Mode(values[4])
    return Admission(*values)  # type: ignore[arg-type]


def checked_admission(row: Sequence[Any] | None, workspace_id: str, credential: str) -> Admission:
    """The admission row a credential names, only if the credential's nonce is its nonce and
    it belongs to this workspace; anything else is Unauthorized, alike."""
    if row is None:
        raise Unauthorized("The delivery credential is not valid.")
    admission = admission_from_row(row)
    _, presented = parse_credential(credential)
    require_credential_match(admission.credential_nonce, admission.workspace_id, presented, workspace_id)
    return admission


def require_credential_match(nonce: str | None, admitted_to: str | None, presented: str, workspace_id: str) -> None:
    """The presented nonce is the admission's own, and it is aimed at the admission's workspace."""
    if nonce is None or not secrets.compare_digest(nonce, presented) or admitted_to != workspace_id:
        raise Unauthorized("The delivery credential is not valid.")


def read_consent(conn: sqlite3.Connection, workspace_id: str) -> AIConsent:
    row = conn.execute(
        "SELECT enabled, consent_revision FROM workspace_ai_consent WHERE workspace_id = ?", (workspace_id,)
    ).fetchone()
    return AIConsent() if row is None else AIConsent(bool(row[0]), int(row[1]))


def write_admission(conn: sqlite3.Connection, admission: Admission, idempotency_key: str) -> None:
    """The ingress batch's two writes: the frozen admission, and the conversation's credential
    slot taken over by its fresh nonce (which retires any older turn's credential)."""
    a = admission
    conn.execute(
        f"INSERT INTO workspace_memory_admissions ({ADMISSION_COLUMNS}, idempotency_key)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            a.id,
            a.conversation_id,
            a.workspace_id,
            a.user_id,
            a.mode.value,
            a.policy_revision,
            a.clear_generation,
            a.ai_consent_revision,
            a.key_session_id,
            a.client_memory_state,
            a.credential_nonce,
            a.created_at,
            a.expires_at,
            idempotency_key,
        ),
    )
    conn.execute(
        "INSERT INTO agent_delivery_credentials (conversation_id, admission_id, credential_nonce,"
        " expires_at) VALUES (?, ?, ?, ?) ON CONFLICT (conversation_id) DO UPDATE SET"
        " admission_id = excluded.admission_id, credential_nonce = excluded.credential_nonce,"
        " expires_at = excluded.expires_at",
        (a.conversation_id, a.id, a.credential_nonce, a.expires_at),
    )


class AssistantBase:
    """What every part of the Assistant service shares: storage, key sessions, credentials."""

    def __init__(
        self, db: Database, accounts: Accounts, key_sessions: KeySessionStore, *, grounded_capture: bool = False
    ) -> None:
        """`grounded_capture` turns an automatic edit the person's message does not support into a
        proposal (`memframe.core.grounding`); it only adds a refusal, never loosens the fence."""
        self.db = db
        self.accounts = accounts
        self.key_sessions = key_sessions
        self.grounded_capture = grounded_capture

    def _admission_for(self, conn: sqlite3.Connection, workspace_id: str, credential: str) -> Admission:
        admission_id, _ = parse_credential(credential)
        row = conn.execute(
            f"SELECT {ADMISSION_COLUMNS} FROM workspace_memory_admissions WHERE id = ?", (admission_id,)
        ).fetchone()
        return checked_admission(row, workspace_id, credential)

    def _live_admission_for(self, conn: sqlite3.Connection, workspace_id: str, credential: str) -> Admission:
        """The admission, only while its credential still speaks for a running turn.

        That is: the conversation's credential slot still holds it (no newer message took
        over), it is within its original expiry, its person is still a member of the
        workspace, and workspace AI is still on under the consent it was admitted with (a
        consent change retires every admission taken before it). Every automation route
        that reads or writes text requires this; recall (which reports a withheld status
        instead) and capture (which the fence judges in its own batch) take the plain
        `_admission_for`.
        """
        admission = self._admission_for(conn, workspace_id, credential)
        slot = conn.execute(
            "SELECT admission_id, credential_nonce, expires_at FROM agent_delivery_credentials"
            " WHERE conversation_id = ?",
            (admission.conversation_id,),
        ).fetchone()
        member = conn.execute(
            "SELECT 1 FROM memberships WHERE workspace_id = ? AND user_id = ?", (workspace_id, admission.user_id)
        ).fetchone()
        consent = read_consent(conn, workspace_id)
        now = self.db.clock()
        if (
            slot is None
            or slot[0] != admission.id
            or not secrets.compare_digest(str(slot[1]), admission.credential_nonce)
            or now >= min(float(slot[2]), admission.expires_at)
            or member is None
            or not consent.enabled
            or consent.revision != admission.ai_consent_revision
        ):
            raise Unauthorized(
                "The delivery credential no longer holds: a newer message took over, it expired, "
                "its person lost access to the workspace, or workspace AI was switched."
            )
        return admission

    @staticmethod
    def _owned_conversation(
        conn: sqlite3.Connection, user: str, conversation_id: str, workspace_id: str | None = None
    ) -> str:
        """The internal key of this person's conversation `conversation_id` (in `workspace_id`, if
        given). A conversation is its person's alone: anyone else, like a stranger, gets NotFound."""
        sql = "SELECT id, workspace_id FROM conversations WHERE user_id = ? AND client_id = ?"
        args: tuple[str, ...] = (user, conversation_id)
        if workspace_id is not None:
            sql, args = sql + " AND workspace_id = ?", (*args, workspace_id)
        rows = conn.execute(sql, args).fetchall()
        if not rows:
            raise NotFound("No such conversation.")
        if len(rows) > 1:
            raise InvalidInput(
                f"You have a conversation {conversation_id!r} in several workspaces; say which with ?workspace=."
            )
        require_member(conn, user, rows[0][1])
        return str(rows[0][0])
