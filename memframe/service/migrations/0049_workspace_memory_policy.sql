-- One row per workspace; a missing row means read_only, revision 0, generation 0.
CREATE TABLE workspace_memory_policy (
    workspace_id     TEXT PRIMARY KEY REFERENCES workspaces(id),
    mode             TEXT NOT NULL CHECK (mode IN ('off', 'read_only', 'auto')),
    policy_revision  INTEGER NOT NULL CHECK (policy_revision >= 0),
    clear_generation INTEGER NOT NULL CHECK (clear_generation >= 0)
) WITHOUT ROWID;
