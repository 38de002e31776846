"""Key rotation on the server: every kept ciphertext swapped for its re-seal in one transaction.

The server never sees a key or a text: the person's machine re-seals what stays under a new key
and sends it with the base it was made against, so a workspace that moved since (a Save, a
message, a proposal) refuses the whole rotation and nothing changes. Only the workspace's owner
rotates (the key check decides which key is the workspace's). The same transaction writes the new
key check and a durable revocation for every key session of the workspace (so the fence refuses an
in-flight capture under the old key); the old bytes are then taken off the disk.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from memframe import sealing
from memframe.core.errors import Forbidden, InvalidInput, KeyRotated, VersionConflict, WrongKey
from memframe.core.rotation import Destroyed, Rotation, RotationPlan, SealedRecords
from memframe.core.types import MEMORY_PATH
from memframe.service.files import check_source_note, check_well_formed

_CONVERSATIONS = "SELECT id FROM conversations WHERE workspace_id = ?"


def latest_rotation(conn: sqlite3.Connection, workspace_id: str) -> Rotation | None:
    row = conn.execute(
        "SELECT rotation, rotated_at, rotated_by, sealed_record FROM workspace_key_rotations"
        " WHERE workspace_id = ? ORDER BY rotation DESC LIMIT 1",
        (workspace_id,),
    ).fetchone()
    if row is None:
        return None
    return Rotation(int(row[0]), float(row[1]), str(row[2]), None if row[3] is None else bytes(row[3]))


def require_owner(conn: sqlite3.Connection, workspace_id: str, user: str) -> None:
    """Only the workspace's owner rotates its key: the key check decides which key is the
    workspace's, and forgetting destroys history for every member."""
    owner = conn.execute("SELECT owner_id FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()
    if owner is None or str(owner[0]) != user:
        raise Forbidden(f"Only the owner of workspace {workspace_id!r} rotates its key; nothing was changed.")


def rotated_error(rotation: Rotation | None) -> Exception:
    """What a key that no longer matches the workspace's key check is told."""
    if rotation is None:
        return WrongKey("This key is not the workspace's key; nothing was changed.")
    return KeyRotated.since(rotation.rotated_at, rotation.rotated_by)


def sealed_records(conn: sqlite3.Connection, workspace_id: str) -> SealedRecords:
    """The workspace's key check, messages, proposals and newest rotation, in one snapshot."""
    row = conn.execute("SELECT key_check FROM workspace_key_checks WHERE workspace_id = ?", (workspace_id,)).fetchone()
    messages = [
        (str(r[0]), int(r[1]), str(r[2]), bytes(r[3]))
        for r in conn.execute(
            "SELECT conversation_id, seq, role, sealed_content FROM conversation_messages"
            f" WHERE conversation_id IN ({_CONVERSATIONS}) ORDER BY conversation_id, seq",
            (workspace_id,),
        )
    ]
    proposals = [
        (str(r[0]), bytes(r[1]))
        for r in conn.execute(
            "SELECT id, sealed_edits FROM workspace_memory_proposals WHERE workspace_id = ? ORDER BY id",
            (workspace_id,),
        )
    ]
    return SealedRecords(None if row is None else str(row[0]), messages, proposals, latest_rotation(conn, workspace_id))


def _changed(conn: sqlite3.Connection, workspace_id: str, what: str) -> VersionConflict:
    current = conn.execute(
        "SELECT current_version FROM files WHERE workspace_id = ? AND path = ?", (workspace_id, MEMORY_PATH)
    ).fetchone()
    return VersionConflict(
        0 if current is None else int(current[0]),
        f"The workspace changed while its key was being rotated ({what}); nothing was changed. Try again.",
    )


def rotate(
    conn: sqlite3.Connection, workspace_id: str, user: str, now: float, plan: RotationPlan, sessions: set[str]
) -> Destroyed:
    """Swap in `plan` inside the caller's batch; any mismatch with the stored state raises, and the
    batch rolls back whole. `sessions` are the live key sessions the store holds for the workspace."""
    if len(plan.new_key_check) != 64 or plan.new_key_check == plan.old_key_check:
        raise InvalidInput("A rotation needs a new key check; nothing was changed.")
    require_owner(conn, workspace_id, user)
    row = conn.execute("SELECT key_check FROM workspace_key_checks WHERE workspace_id = ?", (workspace_id,)).fetchone()
    if row is None or str(row[0]) != plan.old_key_check:
        raise rotated_error(latest_rotation(conn, workspace_id))
    heads = {
        str(r[0]): int(r[1])
        for r in conn.execute("SELECT path, current_version FROM files WHERE workspace_id = ?", (workspace_id,))
    }
    if heads != plan.heads:
        raise _changed(conn, workspace_id, "a file has a newer version")
    destroyed: dict[str, tuple[int, int, int]] = {}
    sent: dict[str, dict[int, bytes | None]] = {}
    for path, version, blob in plan.versions:
        sent.setdefault(path, {})[version] = blob
    if not set(sent) <= set(heads) or not set(plan.forget_before) <= set(heads):
        raise InvalidInput("A rotation names a file the workspace does not have; nothing was changed.")
    notes: dict[str, dict[int, bytes]] = {}
    for path, version, note in plan.notes:
        notes.setdefault(path, {})[version] = note
    resealed = 0
    for path in heads:
        rows = {
            int(r[0]): int(r[1])
            for r in conn.execute(
                "SELECT version, size FROM file_versions WHERE workspace_id = ? AND path = ?"
                " AND ciphertext IS NOT NULL",
                (workspace_id, path),
            )
        }
        every = {
            int(r[0])
            for r in conn.execute(
                "SELECT version FROM file_versions WHERE workspace_id = ? AND path = ?", (workspace_id, path)
            )
        }
        before = plan.forget_before.get(path, 0)
        if before and not 1 < before <= heads[path]:
            raise InvalidInput(f"Versions before {before} of {path} cannot be forgotten; nothing was changed.")
        kept = {v for v in every if v >= before}
        if set(sent.get(path, {})) != kept:
            raise _changed(conn, workspace_id, f"the versions of {path} are not the ones re-sealed")
        noted = {
            int(r[0])
            for r in conn.execute(
                "SELECT version FROM file_versions WHERE workspace_id = ? AND path = ? AND version >= ?"
                " AND source_note IS NOT NULL",
                (workspace_id, path, before),
            )
        }
        if set(notes.get(path, {})) != noted:  # a note left under the old key would never open again
            raise InvalidInput(f"The source notes of {path} were not all re-sealed; nothing was changed.")
        gone = sorted(v for v in every if v < before)
        if gone:
            destroyed[path] = (gone[0], gone[-1], len(gone))
            conn.execute(
                "DELETE FROM file_versions WHERE workspace_id = ? AND path = ? AND version < ?",
                (workspace_id, path, before),
            )
        for version in sorted(kept):
            blob = sent[path][version]
            if (blob is None) != (version not in rows):
                raise InvalidInput(f"Version {version} of {path} was re-sealed as another kind of version.")
            if blob is None:
                continue
            check_well_formed(blob)
            if sealing.plaintext_size(blob) != rows[version]:
                raise InvalidInput(f"The re-seal of version {version} of {path} is not the same text's size.")
            resealed_note = notes.get(path, {}).get(version)
            if resealed_note is not None:
                check_source_note(resealed_note)
            conn.execute(
                "UPDATE file_versions SET ciphertext = ?, content_hash = ?, source_note = ? WHERE workspace_id = ?"
                " AND path = ? AND version = ?",
                (blob, sealing.content_hash(blob), resealed_note, workspace_id, path, version),
            )
            resealed += 1
    memory_before = plan.forget_before.get(MEMORY_PATH, 0)
    if memory_before:  # a receipt keeps its ids and status; its link to a destroyed text goes
        conn.execute(
            "UPDATE memory_recall_receipts SET revision = NULL WHERE revision < ?"
            f" AND conversation_id IN ({_CONVERSATIONS})",
            (memory_before, workspace_id),
        )
        conn.execute(
            "UPDATE workspace_memory_admissions SET recall_revision = NULL"
            " WHERE workspace_id = ? AND recall_revision < ?",
            (workspace_id, memory_before),
        )
    stored = sealed_records(conn, workspace_id)
    messages_gone = proposals_gone = 0
    if plan.forget_conversations:
        messages_gone, proposals_gone = len(stored.messages), len(stored.proposals)
        conn.execute(f"DELETE FROM conversation_messages WHERE conversation_id IN ({_CONVERSATIONS})", (workspace_id,))
        conn.execute("DELETE FROM workspace_memory_proposals WHERE workspace_id = ?", (workspace_id,))
    else:
        if {(c, s) for c, s, _, _ in stored.messages} != {(c, s) for c, s, _ in plan.messages}:
            raise _changed(conn, workspace_id, "a conversation has a newer message")
        if {p for p, _ in stored.proposals} != {p for p, _ in plan.proposals}:
            raise _changed(conn, workspace_id, "a proposal was made")
        for conversation, seq, blob in plan.messages:
            check_well_formed(blob)
            conn.execute(
                "UPDATE conversation_messages SET sealed_content = ? WHERE conversation_id = ? AND seq = ?",
                (blob, conversation, seq),
            )
        for proposal, blob in plan.proposals:
            check_well_formed(blob)
            conn.execute("UPDATE workspace_memory_proposals SET sealed_edits = ? WHERE id = ?", (blob, proposal))
    revoked = revoke(conn, workspace_id, now, sessions, every=True)
    conn.execute(
        "UPDATE workspace_key_checks SET key_check = ?, created_at = ?, created_by = ? WHERE workspace_id = ?",
        (plan.new_key_check, now, user, workspace_id),
    )
    number = 1 if stored.rotation is None else stored.rotation.number + 1
    conn.execute("UPDATE workspace_key_rotations SET sealed_record = NULL WHERE workspace_id = ?", (workspace_id,))
    check_well_formed(plan.sealed_record)
    conn.execute(
        "INSERT INTO workspace_key_rotations (workspace_id, rotation, rotated_at, rotated_by, sealed_record)"
        " VALUES (?, ?, ?, ?, ?)",
        (workspace_id, number, now, user, plan.sealed_record),
    )
    return Destroyed(
        rotated_at=now,
        rotated_by=user,
        versions=destroyed,
        messages=messages_gone,
        proposals=proposals_gone,
        resealed_versions=resealed,
        resealed_messages=0 if plan.forget_conversations else len(plan.messages),
        resealed_proposals=0 if plan.forget_conversations else len(plan.proposals),
        key_sessions_revoked=revoked,
    )


def revoke(conn: Any, workspace_id: str, now: float, sessions: set[str], *, every: bool = False) -> int:
    """A durable revocation row for each of `sessions` and (`every`) for every key session an
    admission of the workspace names, so the fence refuses any capture still in flight under them."""
    named: set[str] = set()
    if every:
        named = {
            str(r[0])
            for r in conn.execute(
                "SELECT DISTINCT key_session_id FROM workspace_memory_admissions"
                " WHERE workspace_id = ? AND key_session_id IS NOT NULL",
                (workspace_id,),
            )
        }
    done = {
        str(r[0])
        for r in conn.execute(
            "SELECT key_session_id FROM key_session_revocations WHERE workspace_id = ?", (workspace_id,)
        )
    }
    fresh = sorted((named | sessions) - done)
    for session in fresh:
        conn.execute(
            "INSERT INTO key_session_revocations (key_session_id, workspace_id, revoked_at) VALUES (?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            (session, workspace_id, now),
        )
    return len(fresh)
