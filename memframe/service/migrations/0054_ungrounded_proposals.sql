-- Grounded capture: an automatic edit the person's message does not support becomes a proposal
-- with the reason 'ungrounded'. A CHECK cannot be altered in place on SQLite, so the table is
-- rebuilt (the same columns, every row kept) with the wider CHECK.
CREATE TABLE workspace_memory_proposals_new (
    id               TEXT PRIMARY KEY,
    workspace_id     TEXT NOT NULL REFERENCES workspaces(id),
    admission_id     TEXT NOT NULL,
    base_version     INTEGER NOT NULL,
    clear_generation INTEGER NOT NULL,
    reason           TEXT NOT NULL CHECK (reason IN ('read_only', 'conflict', 'ungrounded')),
    sealed_edits     BLOB NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('pending', 'applied', 'dismissed')),
    created_at       REAL NOT NULL,
    resolved_at      REAL
);
INSERT INTO workspace_memory_proposals_new (id, workspace_id, admission_id, base_version, clear_generation,
    reason, sealed_edits, status, created_at, resolved_at)
    SELECT id, workspace_id, admission_id, base_version, clear_generation, reason, sealed_edits, status,
    created_at, resolved_at FROM workspace_memory_proposals;
DROP TABLE workspace_memory_proposals;
ALTER TABLE workspace_memory_proposals_new RENAME TO workspace_memory_proposals;
CREATE INDEX workspace_memory_proposals_pending ON workspace_memory_proposals (workspace_id, status);
