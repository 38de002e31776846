-- Sealing v2: a workspace's key check, HMAC-SHA256(key, "memframe key check v1" + workspace id),
-- written once by the first key holder (at init, or on an existing workspace's first verified
-- open). It proves a key before a key session opens; it is useless for decrypting anything.
CREATE TABLE workspace_key_checks (
    workspace_id  TEXT PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
    key_check     TEXT NOT NULL CHECK (length(key_check) = 64),
    created_at    REAL NOT NULL,
    created_by    TEXT NOT NULL
);
