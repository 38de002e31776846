"""workspace_memory_policy: the mode, its revision and the Clear generation."""

from __future__ import annotations

import sqlite3

from memframe.core.errors import PolicyConflict
from memframe.core.types import Mode, Policy


def read_policy(conn: sqlite3.Connection, workspace_id: str) -> Policy:
    """A missing row is the contract's default: Read only, revision 0, generation 0."""
    row = conn.execute(
        "SELECT mode, policy_revision, clear_generation FROM workspace_memory_policy WHERE workspace_id = ?",
        (workspace_id,),
    ).fetchone()
    if row is None:
        return Policy()
    return Policy(Mode(row[0]), int(row[1]), int(row[2]))


def write_mode(conn: sqlite3.Connection, workspace_id: str, mode: Mode, expected_revision: int) -> Policy:
    """Compare-and-set: a stale revision changes nothing; a real change bumps the revision.

    Bumping retires every admission taken under the previous revision. Choosing
    the mode that is already set is not a change and retires nothing.
    """
    current = read_policy(conn, workspace_id)
    if expected_revision != current.revision:
        raise PolicyConflict(current.revision, current.mode.value)
    if mode == current.mode:
        return current
    conn.execute(
        "INSERT INTO workspace_memory_policy (workspace_id, mode, policy_revision, clear_generation)"
        " VALUES (?, ?, ?, ?)"
        " ON CONFLICT (workspace_id) DO UPDATE SET mode = excluded.mode,"
        " policy_revision = excluded.policy_revision",
        (workspace_id, mode.value, current.revision + 1, current.clear_generation),
    )
    return Policy(mode, current.revision + 1, current.clear_generation)


# Advances the generation only if the Clear's own version row exists in this transaction:
# the empty revision and the generation advance are one atomic fact, as the contract says.
ADVANCE_CLEAR_GENERATION = """
INSERT INTO workspace_memory_policy (workspace_id, mode, policy_revision, clear_generation)
SELECT :ws, 'read_only', 0, 1
WHERE EXISTS (
    SELECT 1 FROM file_versions
    WHERE workspace_id = :ws AND path = :path AND version = :version AND operation = 'clear'
)
ON CONFLICT (workspace_id) DO UPDATE SET clear_generation = workspace_memory_policy.clear_generation + 1
"""
