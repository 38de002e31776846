"""The durable transcript: people's messages and final answers, sealed with the workspace key.

Recall blocks and system prompts never reach it, so a cleared memory is not
replayed from stored records.
"""

from __future__ import annotations

import sqlite3

from memframe import sealing
from memframe.core.blame import CaptureOrigin
from memframe.service.accounts import require_member
from memframe.service.admissions import Admission, AssistantBase


class TranscriptMixin(AssistantBase):
    def append_transcript(self, workspace_id: str, credential: str, role: str, content: str) -> None:
        """People's messages and final answers only, sealed: recall blocks never reach here."""
        with self.db.read() as conn:
            admission = self._live_admission_for(conn, workspace_id, credential)
        key = self.key_sessions.resolve(admission.key_session_id, workspace_id)
        with self.db.write() as conn:
            seq = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM conversation_messages WHERE conversation_id = ?",
                (admission.conversation_id,),
            ).fetchone()[0]
            # Sealed at its place in the conversation: a message moved, swapped or dropped from the
            # middle no longer opens at the position it is read from.
            sealed = sealing.seal_message(
                key, content, workspace_id=workspace_id, conversation_id=admission.conversation_id, seq=seq, role=role
            )
            conn.execute(
                "INSERT INTO conversation_messages (conversation_id, seq, role, admission_id,"
                " sealed_content, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (admission.conversation_id, seq, role, admission.id, sealed, self.db.clock()),
            )

    def transcript(self, user: str, conversation_id: str, workspace_id: str | None = None) -> list[tuple[str, bytes]]:
        """(role, sealed content) in order; the client opens them with its key."""
        with self.db.read() as conn:
            conversation_id = self._owned_conversation(conn, user, conversation_id, workspace_id)
            return [
                (str(r[0]), bytes(r[1]))
                for r in conn.execute(
                    "SELECT role, sealed_content FROM conversation_messages WHERE conversation_id = ? ORDER BY seq",
                    (conversation_id,),
                )
            ]

    def capture_origins(self, user: str, workspace_id: str) -> list[CaptureOrigin]:
        """The captures this person's own conversations made in the workspace, in ids only: what blame
        needs to find, in the sealed transcript, the message that led to each. A conversation is its
        person's alone, so another member's captures are not listed."""
        with self.db.read() as conn:
            require_member(conn, user, workspace_id)
            rows = conn.execute(
                "SELECT a.committed_version, a.id, c.client_id, (SELECT MIN(m.seq) FROM conversation_messages AS m"
                " WHERE m.conversation_id = a.conversation_id AND m.admission_id = a.id AND m.role = 'user')"
                " FROM workspace_memory_admissions AS a JOIN conversations AS c ON c.id = a.conversation_id"
                " WHERE a.workspace_id = ? AND c.user_id = ? AND a.committed_version IS NOT NULL"
                " ORDER BY a.committed_version",
                (workspace_id, user),
            ).fetchall()
        return [CaptureOrigin(int(r[0]), str(r[1]), str(r[2]), None if r[3] is None else int(r[3])) for r in rows]

    def conversation_history(self, workspace_id: str, credential: str) -> list[tuple[str, str]]:
        """The runtime's view of earlier messages in this conversation, opened with the key session."""
        with self.db.read() as conn:
            admission = self._live_admission_for(conn, workspace_id, credential)
            rows = conn.execute(
                "SELECT role, sealed_content FROM conversation_messages WHERE conversation_id = ? ORDER BY seq",
                (admission.conversation_id,),
            ).fetchall()
        key = self.key_sessions.resolve(admission.key_session_id, workspace_id)
        return sealing.open_transcript(
            key, workspace_id, admission.conversation_id, [(str(r[0]), bytes(r[1])) for r in rows]
        )


def turn_message(conn: sqlite3.Connection, key: bytes, admission: Admission) -> str:
    """The person's message of the turn `admission` admitted, opened with its key session's key in
    RAM; "" when the turn stored none (nothing then supports a grounded capture)."""
    row = conn.execute(
        "SELECT seq, sealed_content FROM conversation_messages WHERE admission_id = ? AND role = 'user'"
        " ORDER BY seq LIMIT 1",
        (admission.id,),
    ).fetchone()
    if row is None:
        return ""
    return sealing.open_message(
        key,
        bytes(row[1]),
        workspace_id=admission.workspace_id,
        conversation_id=admission.conversation_id,
        seq=int(row[0]),
        role="user",
    )
