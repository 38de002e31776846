-- Optional token expiry (`memframe admin token create --expires-in 90d`): NULL never expires.
ALTER TABLE tokens ADD COLUMN expires_at REAL;

-- Conversations are addressed within their workspace, by their person: the id a client chose
-- (client_id) is unique per (workspace, person), so an id in use elsewhere neither blocks nor
-- reveals anything. `id` stays the internal key the other tables use; existing rows keep theirs.
ALTER TABLE conversations ADD COLUMN client_id TEXT;
UPDATE conversations SET client_id = id;
CREATE UNIQUE INDEX conversations_by_person ON conversations (workspace_id, user_id, client_id);
