-- Import with its source: a version a person imported from a file carries the file's name as a
-- source note, sealed on the client under the workspace key and bound to its workspace, path and
-- version (`memframe.sealing.seal_source`), so the server stores no name in clear and cannot move
-- a note to another version. Null for every other version; a rotation re-seals it with its version.
ALTER TABLE file_versions ADD COLUMN source_note BLOB;
