-- People, their tokens (stored only as hashes), workspaces and memberships.
CREATE TABLE users (
    id          TEXT PRIMARY KEY,
    created_at  REAL NOT NULL
);

CREATE TABLE tokens (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id),
    token_hash  TEXT NOT NULL UNIQUE,
    label       TEXT NOT NULL DEFAULT '',
    created_at  REAL NOT NULL,
    revoked_at  REAL
);

CREATE TABLE workspaces (
    id          TEXT PRIMARY KEY,
    owner_id    TEXT NOT NULL REFERENCES users(id),
    created_at  REAL NOT NULL
);

CREATE TABLE memberships (
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    user_id      TEXT NOT NULL REFERENCES users(id),
    created_at   REAL NOT NULL,
    PRIMARY KEY (workspace_id, user_id)
) WITHOUT ROWID;
