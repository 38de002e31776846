-- A key rotation too large for one request is uploaded in parts (issue 31): the re-sealed
-- ciphertexts wait here, under an upload only the workspace's owner started, until the rotation
-- that names the upload swaps them in and deletes them in its own transaction. Nothing else reads
-- these tables, so a staged ciphertext is never a version, message or proposal before that swap.
-- One upload per workspace at a time: a newer one replaces it, and one left for a day is deleted.
CREATE TABLE key_rotation_uploads (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    created_by   TEXT NOT NULL,
    created_at   REAL NOT NULL
);
-- kind 'version': name = path, number = version, ciphertext NULL for a deletion's tombstone;
-- kind 'message': name = conversation id, number = seq; kind 'proposal': name = id, number = 0.
-- The key makes a part sent again (a retry) replace what it sent before.
CREATE TABLE key_rotation_upload_items (
    upload_id  TEXT NOT NULL REFERENCES key_rotation_uploads (id) ON DELETE CASCADE,
    kind       TEXT NOT NULL CHECK (kind IN ('version', 'message', 'proposal')),
    name       TEXT NOT NULL,
    number     INTEGER NOT NULL,
    ciphertext BLOB,
    PRIMARY KEY (upload_id, kind, name, number)
);
