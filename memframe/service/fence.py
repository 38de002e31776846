"""The commit fence: one SQL predicate decides whether an automatic write may land.

Each clause is a named promise of the contract. The same list builds the
fence row's `ok` value (inside the capture's transaction, so a false or
NULL predicate aborts the version insert with it) and, after a refusal, the
read that tells a person which promise no longer held. No Python `if` stands
in for the CHECK.
"""

from __future__ import annotations

import sqlite3

#: (name a person reads, SQL over a = admission, c = conversation, m = membership,
#:  p = policy, ai = consent, cred = the conversation's credential slot, r = revocation,
#:  kc = the workspace's key check; :key_check is the check of the key the capture resolved)
FENCE_PREDICATES: list[tuple[str, str]] = [
    ("the admission exists for this workspace", "a.id IS NOT NULL AND a.workspace_id = :ws"),
    ("the owner still matches the conversation", "c.workspace_id = :ws AND c.user_id = a.user_id"),
    ("the owner is still a member of the workspace", "m.user_id IS NOT NULL"),
    ("the turn has not already changed memory", "a.consumed_at IS NULL"),
    ("the turn is within its original 15 minutes", ":now < a.expires_at"),
    ("the turn was admitted in Auto", "a.mode = 'auto'"),
    ("the mode is still Auto", "p.mode = 'auto'"),
    ("the mode was not changed since the turn began", "p.policy_revision = a.policy_revision"),
    ("memory was not cleared since the turn began", "p.clear_generation = a.clear_generation"),
    ("workspace AI is still enabled", "ai.enabled = 1"),
    ("AI consent was not changed since the turn began", "ai.consent_revision = a.ai_consent_revision"),
    (
        "no newer message in the conversation took over",
        "cred.admission_id = a.id AND cred.credential_nonce = a.credential_nonce AND cred.credential_nonce = :nonce",
    ),
    ("the delivery credential has not expired", ":now < cred.expires_at"),
    ("the presented key session is the turn's own", "a.key_session_id IS NOT NULL AND a.key_session_id = :key_session"),
    ("the key session was not revoked", "r.key_session_id IS NULL"),
    # A key rotation replaces the key check in its swap, so a capture holding the old key is refused
    # here even if it resolved its key before the swap (a workspace never given a check has no row).
    (
        "the workspace key was not rotated since the key session was opened",
        "kc.workspace_id IS NULL OR kc.key_check = :key_check",
    ),
]

_FROM = """
FROM (SELECT CAST(:admission_id AS TEXT) AS id) AS wanted
LEFT JOIN workspace_memory_admissions AS a ON a.id = wanted.id
LEFT JOIN conversations AS c ON c.id = a.conversation_id
LEFT JOIN memberships AS m ON m.workspace_id = a.workspace_id AND m.user_id = a.user_id
LEFT JOIN workspace_memory_policy AS p ON p.workspace_id = a.workspace_id
LEFT JOIN workspace_ai_consent AS ai ON ai.workspace_id = a.workspace_id
LEFT JOIN agent_delivery_credentials AS cred ON cred.conversation_id = a.conversation_id
LEFT JOIN key_session_revocations AS r ON r.key_session_id = a.key_session_id
LEFT JOIN workspace_key_checks AS kc ON kc.workspace_id = a.workspace_id
"""

# `(x) IS TRUE` turns a NULL (a missing row) into false; the outer SELECT always yields exactly one
# row, so the INSERT always inserts and the CHECK always judges: `ok = 1` on SQLite (where TRUE is
# 1), `ok IS TRUE` on PostgreSQL's boolean column (migration 0050).
_PREDICATE = " AND ".join(f"({sql}) IS TRUE" for _, sql in FENCE_PREDICATES)
FENCE_INSERT = f"""
INSERT INTO workspace_memory_commit_fence (admission_id, workspace_id, version, created_at, ok)
SELECT :admission_id, :ws, :version, :now, CASE WHEN {_PREDICATE} THEN TRUE ELSE FALSE END
{_FROM}
"""

_DIAGNOSE = "SELECT " + ", ".join(f"({sql}) IS TRUE" for _, sql in FENCE_PREDICATES) + _FROM


def failed_predicates(conn: sqlite3.Connection, params: dict[str, object]) -> list[str]:
    """Which promises do not hold now (read after a refusal, to explain it)."""
    row = conn.execute(_DIAGNOSE, params).fetchone()
    return [name for (name, _), ok in zip(FENCE_PREDICATES, row, strict=True) if not ok]
