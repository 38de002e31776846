"""A key rotation uploaded in parts: re-sealed ciphertexts staged until the swap takes them.

One HTTP request is bounded (the server's body limit) and a long history re-sealed is larger, so a
remote client uploads the plan's ciphertexts in parts that wait in tables of their own, which
nothing reads but the rotation naming the upload: it adds them to its plan and deletes them in the
swap's one transaction, so a stale base or a concurrent Save still refuses the whole rotation.
"""

from __future__ import annotations

import dataclasses
import secrets
import sqlite3

from memframe.core.errors import NotFound
from memframe.core.rotation import RotationPart, RotationPlan
from memframe.service.rotation import require_owner

#: An upload left this long (a client that died mid-way) is deleted when the next one starts.
ABANDONED_SECONDS = 24 * 3600

_GONE = "No such key rotation upload (a newer one replaced it, or it was left too long); nothing was changed."


def start(conn: sqlite3.Connection, workspace_id: str, user: str, now: float) -> str:
    """A new upload for the owner; it replaces the workspace's earlier one and any abandoned one."""
    require_owner(conn, workspace_id, user)
    conn.execute(  # its items go with it (ON DELETE CASCADE)
        "DELETE FROM key_rotation_uploads WHERE workspace_id = ? OR created_at < ?",
        (workspace_id, now - ABANDONED_SECONDS),
    )
    upload = "rku_" + secrets.token_hex(16)
    conn.execute(
        "INSERT INTO key_rotation_uploads (id, workspace_id, created_by, created_at) VALUES (?, ?, ?, ?)",
        (upload, workspace_id, user, now),
    )
    return upload


def _require_upload(conn: sqlite3.Connection, workspace_id: str, user: str, upload: str) -> None:
    require_owner(conn, workspace_id, user)
    row = conn.execute(
        "SELECT 1 FROM key_rotation_uploads WHERE id = ? AND workspace_id = ? AND created_by = ?",
        (upload, workspace_id, user),
    ).fetchone()
    if row is None:
        raise NotFound(_GONE)


def add(conn: sqlite3.Connection, workspace_id: str, user: str, upload: str, part: RotationPart) -> int:
    """Stage one part; an item staged again replaces the earlier copy, so a part sent twice (a
    retry) stages it once. Returns how many items the part held."""
    _require_upload(conn, workspace_id, user, upload)
    items = [
        *(("version", path, version, blob) for path, version, blob in part.versions),
        *(("message", conversation, seq, blob) for conversation, seq, blob in part.messages),
        *(("proposal", proposal, 0, blob) for proposal, blob in part.proposals),
    ]
    for kind, name, number, blob in items:
        conn.execute(
            "INSERT INTO key_rotation_upload_items (upload_id, kind, name, number, ciphertext) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (upload_id, kind, name, number) DO UPDATE SET ciphertext = excluded.ciphertext",
            (upload, kind, name, number, blob),
        )
    return len(items)


def take(conn: sqlite3.Connection, workspace_id: str, user: str, upload: str, plan: RotationPlan) -> RotationPlan:
    """`plan` with the upload's staged items added, the upload deleted in the caller's transaction
    (so it is consumed only if the swap commits)."""
    _require_upload(conn, workspace_id, user, upload)
    plan = dataclasses.replace(
        plan, versions=list(plan.versions), messages=list(plan.messages), proposals=list(plan.proposals)
    )
    for kind, name, number, blob in conn.execute(
        "SELECT kind, name, number, ciphertext FROM key_rotation_upload_items WHERE upload_id = ?"
        " ORDER BY kind, name, number",
        (upload,),
    ):
        if kind == "version":
            plan.versions.append((str(name), int(number), None if blob is None else bytes(blob)))
        elif kind == "message":
            plan.messages.append((str(name), int(number), bytes(blob)))
        else:
            plan.proposals.append((str(name), bytes(blob)))
    conn.execute("DELETE FROM key_rotation_uploads WHERE id = ?", (upload,))
    return plan


def drop(conn: sqlite3.Connection, workspace_id: str, user: str, upload: str) -> None:
    """The owner's upload whose rotation was refused: it was made against a state that is gone."""
    conn.execute(
        "DELETE FROM key_rotation_uploads WHERE id = ? AND workspace_id = ? AND created_by = ?",
        (upload, workspace_id, user),
    )
