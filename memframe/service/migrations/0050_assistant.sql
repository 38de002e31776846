-- The Assistant's authority: AI consent, conversations, admissions, delivery credentials,
-- key-session revocations, recall receipts, the commit fence, proposals and the transcript.
-- Keys never appear here: they live only in the KeySessions store's RAM.

CREATE TABLE workspace_ai_consent (
    workspace_id     TEXT PRIMARY KEY REFERENCES workspaces(id),
    enabled          INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    consent_revision INTEGER NOT NULL CHECK (consent_revision >= 0)
) WITHOUT ROWID;

CREATE TABLE conversations (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    user_id      TEXT NOT NULL REFERENCES users(id),
    created_at   REAL NOT NULL
);

CREATE TABLE workspace_memory_admissions (
    id                   TEXT PRIMARY KEY,
    conversation_id      TEXT NOT NULL REFERENCES conversations(id),
    workspace_id         TEXT NOT NULL,
    user_id              TEXT NOT NULL,
    idempotency_key      TEXT NOT NULL,
    mode                 TEXT NOT NULL,
    policy_revision      INTEGER NOT NULL,
    clear_generation     INTEGER NOT NULL,
    ai_consent_revision  INTEGER NOT NULL,
    key_session_id       TEXT,
    client_memory_state  TEXT,
    credential_nonce     TEXT NOT NULL,
    created_at           REAL NOT NULL,
    expires_at           REAL NOT NULL,
    consumed_at          REAL,
    committed_version    INTEGER,
    commit_request_hash  TEXT,
    recall_status        TEXT,
    recall_revision      INTEGER,
    UNIQUE (conversation_id, idempotency_key)
);

-- One slot per conversation: the newest turn's credential overwrites the older one.
CREATE TABLE agent_delivery_credentials (
    conversation_id  TEXT PRIMARY KEY REFERENCES conversations(id),
    admission_id     TEXT NOT NULL,
    credential_nonce TEXT NOT NULL,
    expires_at       REAL NOT NULL
) WITHOUT ROWID;

CREATE TABLE key_session_revocations (
    key_session_id TEXT PRIMARY KEY,
    workspace_id   TEXT NOT NULL,
    revoked_at     REAL NOT NULL
) WITHOUT ROWID;

-- Every recall, per model call: ids, versions and statuses, never text.
CREATE TABLE memory_recall_receipts (
    id              INTEGER PRIMARY KEY,
    admission_id    TEXT NOT NULL REFERENCES workspace_memory_admissions(id),
    conversation_id TEXT NOT NULL,
    call_index      INTEGER NOT NULL,
    status          TEXT NOT NULL,
    revision        INTEGER,
    created_at      REAL NOT NULL
);
CREATE INDEX memory_recall_receipts_by_conversation ON memory_recall_receipts (conversation_id, id);

-- The fence: a capture's version commits only with a row whose ok is computed, in the same
-- transaction, from one predicate over the admission and the current state. ok is NOT NULL, so
-- a NULL predicate (a missing row) aborts as surely as a false one.
-- only sqlite
CREATE TABLE workspace_memory_commit_fence (
    admission_id  TEXT PRIMARY KEY REFERENCES workspace_memory_admissions(id),
    workspace_id  TEXT NOT NULL,
    version       INTEGER NOT NULL,
    created_at    REAL NOT NULL,
    ok            INTEGER NOT NULL CHECK (ok = 1)
) WITHOUT ROWID;

-- The same table where the predicate is a real boolean.
-- only postgresql
CREATE TABLE workspace_memory_commit_fence (
    admission_id  TEXT PRIMARY KEY REFERENCES workspace_memory_admissions(id),
    workspace_id  TEXT NOT NULL,
    version       INTEGER NOT NULL,
    created_at    REAL NOT NULL,
    ok            BOOLEAN NOT NULL CHECK (ok IS TRUE)
);

-- Read-only proposals: the edits are sealed with the workspace key (they are memory text).
CREATE TABLE workspace_memory_proposals (
    id               TEXT PRIMARY KEY,
    workspace_id     TEXT NOT NULL REFERENCES workspaces(id),
    admission_id     TEXT NOT NULL,
    base_version     INTEGER NOT NULL,
    clear_generation INTEGER NOT NULL,
    reason           TEXT NOT NULL CHECK (reason IN ('read_only', 'conflict')),
    sealed_edits     BLOB NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('pending', 'applied', 'dismissed')),
    created_at       REAL NOT NULL,
    resolved_at      REAL
);
CREATE INDEX workspace_memory_proposals_pending ON workspace_memory_proposals (workspace_id, status);

-- The durable transcript: people's messages and final answers, sealed with the workspace key.
-- Recall blocks and system prompts are never written here.
CREATE TABLE conversation_messages (
    conversation_id TEXT NOT NULL REFERENCES conversations(id),
    seq             INTEGER NOT NULL,
    role            TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
    admission_id    TEXT,
    sealed_content  BLOB NOT NULL,
    created_at      REAL NOT NULL,
    PRIMARY KEY (conversation_id, seq)
) WITHOUT ROWID;
