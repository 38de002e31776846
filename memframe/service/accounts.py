"""People, bearer tokens and workspace membership.

Tokens are random, shown once, and stored only as SHA-256 hashes: a copy of
the database cannot be used to act as anyone. Membership decides everything a
person can reach; a workspace they are not a member of is simply NotFound.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memframe.core.errors import InvalidInput, NotFound, Unauthorized
from memframe.paths import check_workspace_id
from memframe.service.db import Database

if TYPE_CHECKING:
    from memframe.keysessions.store import KeySessionStore

TOKEN_PREFIX = "mf_"
#: The person who owns workspaces of the embedded local database.
LOCAL_USER = "local"


@dataclass(frozen=True)
class TokenInfo:
    id: str
    user_id: str
    label: str
    created_at: float
    revoked_at: float | None


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def check_user_id(user_id: str) -> str:
    try:
        return check_workspace_id(user_id)
    except InvalidInput:
        raise InvalidInput(f"{user_id!r} is not a user name: use letters, digits, '.', '_' or '-'.") from None


class Accounts:
    """People and membership; losing either ends the person's key sessions (`_revoke_sessions`)."""

    def __init__(self, db: Database, key_sessions: KeySessionStore | None = None) -> None:
        self.db = db
        self.key_sessions = key_sessions

    def _revoke_sessions(self, conn: sqlite3.Connection, user_id: str, workspace_id: str | None = None) -> list[str]:
        """Durable revocation rows, in the caller's batch, for the person's key sessions.

        The caller forgets the keys after its batch commits. Admissions that name these
        sessions are retired with them: the commit fence reads the revocation rows, and
        recall can no longer resolve the key.
        """
        if self.key_sessions is None:
            return []
        sessions = self.key_sessions.sessions_of(user_id, workspace_id)
        for session_id, workspace in sessions:
            conn.execute(
                "INSERT INTO key_session_revocations (key_session_id, workspace_id, revoked_at)"
                " VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (session_id, workspace, self.db.clock()),
            )
        return [session_id for session_id, _ in sessions]

    def _forget(self, session_ids: list[str]) -> None:
        if self.key_sessions is not None:
            for session_id in session_ids:
                self.key_sessions.forget(session_id)

    # users ---------------------------------------------------------------------------

    def add_user(self, user_id: str, *, exist_ok: bool = False) -> str:
        check_user_id(user_id)
        with self.db.write() as conn:
            added = conn.execute(
                "INSERT INTO users (id, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING", (user_id, self.db.clock())
            ).rowcount
            if not added and not exist_ok:
                raise InvalidInput(f"The user {user_id!r} already exists.")
        return user_id

    def users(self) -> list[str]:
        with self.db.read() as conn:
            return [r[0] for r in conn.execute("SELECT id FROM users ORDER BY id")]

    def _require_user(self, conn: sqlite3.Connection, user_id: str) -> None:
        if conn.execute("SELECT 1 FROM users WHERE id = ?", (user_id,)).fetchone() is None:
            raise NotFound(f"There is no user {user_id!r}.")

    # tokens --------------------------------------------------------------------------

    def create_token(self, user_id: str, label: str = "", *, expires_in: float | None = None) -> tuple[str, str]:
        """Returns (token id, the token itself); the token is never retrievable again.

        With `expires_in` (seconds) the token stops working that long after now.
        """
        if expires_in is not None and expires_in <= 0:
            raise InvalidInput("A token's lifetime must be positive.")
        import secrets  # here, not at the top: reading commands (`history -p`) never make a token

        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token_id = secrets.token_hex(6)
        with self.db.write() as conn:
            self._require_user(conn, user_id)
            now = self.db.clock()
            conn.execute(
                "INSERT INTO tokens (id, user_id, token_hash, label, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                (token_id, user_id, _hash(token), label, now, None if expires_in is None else now + expires_in),
            )
        return token_id, token

    def tokens(self, user_id: str | None = None) -> list[TokenInfo]:
        sql = "SELECT id, user_id, label, created_at, revoked_at FROM tokens"
        args: tuple[str, ...] = ()
        if user_id:
            sql += " WHERE user_id = ?"
            args = (user_id,)
        with self.db.read() as conn:
            return [TokenInfo(*row) for row in conn.execute(sql + " ORDER BY created_at", args)]

    def revoke_token(self, token_id: str) -> None:
        """Revoke one token; revoking a person's last live token also revokes their key sessions."""
        with self.db.write() as conn:
            now = self.db.clock()
            row = conn.execute("SELECT user_id FROM tokens WHERE id = ? AND revoked_at IS NULL", (token_id,)).fetchone()
            if row is None:
                raise NotFound(f"There is no active token {token_id!r}.")
            conn.execute("UPDATE tokens SET revoked_at = ? WHERE id = ?", (now, token_id))
            left = conn.execute(
                "SELECT 1 FROM tokens WHERE user_id = ? AND revoked_at IS NULL"
                " AND (expires_at IS NULL OR expires_at > ?)",
                (row[0], now),
            ).fetchone()
            revoked = [] if left is not None else self._revoke_sessions(conn, str(row[0]))
        self._forget(revoked)

    def authenticate(self, token: str | None) -> str:
        """The user a bearer token speaks for; any failure is one indistinct Unauthorized."""
        if not token:
            raise Unauthorized("A token is required.")
        # One statement, its own snapshot: no BEGIN and COMMIT around it (every person's request runs this).
        row = self.db.read_row(
            "SELECT user_id FROM tokens WHERE token_hash = ? AND revoked_at IS NULL"
            " AND (expires_at IS NULL OR expires_at > ?)",
            (_hash(token), self.db.clock()),
        )
        if row is None:
            raise Unauthorized("The token is not valid.")
        return str(row[0])

    # workspaces ----------------------------------------------------------------------

    def create_workspace(self, workspace_id: str, owner: str) -> str:
        check_workspace_id(workspace_id)
        now = self.db.clock()
        with self.db.write() as conn:
            self._require_user(conn, owner)
            added = conn.execute(
                "INSERT INTO workspaces (id, owner_id, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (workspace_id, owner, now),
            ).rowcount
            if not added:
                raise InvalidInput(f"The workspace {workspace_id!r} already exists.")
            conn.execute(
                "INSERT INTO memberships (workspace_id, user_id, created_at) VALUES (?, ?, ?)",
                (workspace_id, owner, now),
            )
        return workspace_id

    def add_member(self, workspace_id: str, user_id: str) -> None:
        with self.db.write() as conn:
            self._require_user(conn, user_id)
            if conn.execute("SELECT 1 FROM workspaces WHERE id = ?", (workspace_id,)).fetchone() is None:
                raise NotFound(f"There is no workspace {workspace_id!r}.")
            conn.execute(
                "INSERT INTO memberships (workspace_id, user_id, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (workspace_id, user_id, self.db.clock()),
            )

    def remove_member(self, workspace_id: str, user_id: str) -> None:
        """Remove a member; their key sessions for the workspace are revoked in the same batch."""
        with self.db.write() as conn:
            cur = conn.execute(
                "DELETE FROM memberships WHERE workspace_id = ? AND user_id = ?", (workspace_id, user_id)
            )
            if cur.rowcount == 0:
                raise NotFound(f"{user_id!r} is not a member of {workspace_id!r}.")
            revoked = self._revoke_sessions(conn, user_id, workspace_id)
        self._forget(revoked)

    def workspaces(self, user_id: str | None = None) -> list[str]:
        with self.db.read() as conn:
            if user_id is None:
                return [r[0] for r in conn.execute("SELECT id FROM workspaces ORDER BY id")]
            return [
                r[0]
                for r in conn.execute(
                    "SELECT workspace_id FROM memberships WHERE user_id = ? ORDER BY workspace_id",
                    (user_id,),
                )
            ]

    def members(self, workspace_id: str) -> list[str]:
        with self.db.read() as conn:
            return [
                r[0]
                for r in conn.execute(
                    "SELECT user_id FROM memberships WHERE workspace_id = ? ORDER BY user_id", (workspace_id,)
                )
            ]


def require_member(conn: sqlite3.Connection, user_id: str, workspace_id: str) -> None:
    """Non-members learn nothing: the same NotFound as for a workspace that does not exist."""
    row = conn.execute(
        "SELECT 1 FROM memberships WHERE workspace_id = ? AND user_id = ?", (workspace_id, user_id)
    ).fetchone()
    if row is None:
        raise NotFound("No such workspace, or you are not a member of it.")
