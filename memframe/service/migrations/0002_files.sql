-- Encrypted, versioned files. No plaintext and no diff is ever stored: only
-- ciphertext, its SHA-256, and the metadata a list needs (so listing never decrypts).
CREATE TABLE files (
    workspace_id    TEXT NOT NULL REFERENCES workspaces(id),
    path            TEXT NOT NULL,
    current_version INTEGER NOT NULL CHECK (current_version >= 1),
    deleted         INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1)),
    PRIMARY KEY (workspace_id, path)
) WITHOUT ROWID;

CREATE TABLE file_versions (
    workspace_id  TEXT NOT NULL,
    path          TEXT NOT NULL,
    version       INTEGER NOT NULL CHECK (version >= 1),
    created_at    REAL NOT NULL,
    author        TEXT NOT NULL CHECK (author IN ('person', 'assistant')),
    actor         TEXT NOT NULL,
    operation     TEXT NOT NULL CHECK (operation IN ('save', 'clear', 'undo', 'capture', 'delete')),
    size          INTEGER NOT NULL,
    content_hash  TEXT NOT NULL,
    restored_from INTEGER,
    -- last, so reading the metadata never touches the ciphertext's overflow pages
    ciphertext    BLOB,
    PRIMARY KEY (workspace_id, path, version)
);
