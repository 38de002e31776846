"""The workspace's key check: who sets it, how a key is proven against it, how an admin resets it.

The key check proves a key before the server holds it in a key session, so whoever writes it
decides which key is "the workspace's": only the workspace's owner may write it (at init, or on
an older workspace with her first proven key session), every other member's key is proven against
it and never sets it, and only an admin on the database itself takes it away.
"""

from __future__ import annotations

import hmac
import sqlite3
from collections.abc import Callable

from memframe.core.errors import Forbidden, InvalidInput, WrongKey
from memframe.service.accounts import require_member

_SELECT = "SELECT key_check FROM workspace_key_checks WHERE workspace_id = ?"
_INSERT = (
    "INSERT INTO workspace_key_checks (workspace_id, key_check, created_at, created_by)"
    " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
WRONG_KEY = "This key is not the workspace's key (it does not match its key check)."


def stored(conn: sqlite3.Connection, workspace_id: str) -> str | None:
    """The workspace's key check, or None while its owner has not set one."""
    row = conn.execute(_SELECT, (workspace_id,)).fetchone()
    return None if row is None else str(row[0])


def is_owner(conn: sqlite3.Connection, user: str, workspace_id: str) -> bool:
    row = conn.execute("SELECT owner_id FROM workspaces WHERE id = ?", (workspace_id,)).fetchone()
    return row is not None and str(row[0]) == user


def not_the_owner(workspace_id: str) -> Forbidden:
    return Forbidden(
        f"Only the owner of workspace {workspace_id!r} sets its key check; a member's key is proven against it. "
        "The owner's 'memframe init' (or first key session) sets it; nothing was changed."
    )


def check_format(key_check: str) -> str:
    if len(key_check) != 64 or any(c not in "0123456789abcdef" for c in key_check):
        raise InvalidInput("A key check is 64 lowercase hex digits.")
    return key_check


def set_once(conn: sqlite3.Connection, user: str, workspace_id: str, key_check: str, now: float) -> str:
    """The owner writes the key check once; the same value again is a no-op, another is refused."""
    check_format(key_check)
    require_member(conn, user, workspace_id)
    if not is_owner(conn, user, workspace_id):
        raise not_the_owner(workspace_id)
    conn.execute(_INSERT, (workspace_id, key_check, now, user))
    if stored(conn, workspace_id) != key_check:
        raise WrongKey("This workspace already has another key; nothing was changed.")
    return key_check


def prove(
    conn: sqlite3.Connection,
    user: str,
    workspace_id: str,
    mine: str,
    opens_memory: Callable[[], bool | None],
    now: float,
) -> None:
    """Prove a key (its check `mine`) for a key session, inside the caller's transaction (a write one
    when no check is stored yet: the owner's proven key then writes it).

    With a key check, the key must match it. Without one (an older workspace), the memory proves
    the key if there is one (`opens_memory` answers None when there is none): the owner's proven
    key then writes the check; a member's never does, and with no memory a member has nothing to
    prove her key against, so she waits for the owner.
    """
    require_member(conn, user, workspace_id)
    check = stored(conn, workspace_id)
    if check is not None:
        if not hmac.compare_digest(check, mine):
            raise WrongKey(WRONG_KEY)
        return
    opens = opens_memory()
    if opens is False:
        raise WrongKey("This key does not open the workspace's memory.")
    if is_owner(conn, user, workspace_id):
        conn.execute(_INSERT, (workspace_id, mine, now, user))
        if stored(conn, workspace_id) != mine:  # another key was proven a moment ago
            raise WrongKey(WRONG_KEY)
    elif opens is None:
        raise Forbidden(
            f"Workspace {workspace_id!r} has no key check yet, so this key cannot be proven: its owner sets "
            "it with 'memframe init' or by opening a key session; nothing was changed."
        )


def reset(conn: sqlite3.Connection, workspace_id: str) -> bool:
    """Remove the key check (an admin's repair of a wrong one); True if there was one."""
    if conn.execute("SELECT 1 FROM workspaces WHERE id = ?", (workspace_id,)).fetchone() is None:
        from memframe.core.errors import NotFound

        raise NotFound(f"There is no workspace {workspace_id!r}.")
    return conn.execute("DELETE FROM workspace_key_checks WHERE workspace_id = ?", (workspace_id,)).rowcount > 0
