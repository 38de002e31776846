-- Forgetting is key rotation: one row per rotation of a workspace's key, newest highest. The
-- date and the person are clear metadata (a member whose key no longer matches is told who rotated
-- it and when); `sealed_record` is the rotator's record (which heads were re-sealed, which versions
-- were forgotten, when and by whom), sealed under the new key so a server cannot forge a forgetting.
-- Only the newest row keeps its record: an older one was sealed under a key that was destroyed.
CREATE TABLE workspace_key_rotations (
    workspace_id  TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    rotation      INTEGER NOT NULL CHECK (rotation >= 1),
    rotated_at    REAL NOT NULL,
    rotated_by    TEXT NOT NULL,
    sealed_record BLOB,
    PRIMARY KEY (workspace_id, rotation)
);
